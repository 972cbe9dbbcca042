"""Sources over one or many files: path resolution, positions, and deterministic batching.

A file source reads its files in order. Its position is a JSON-friendly dict::

    {"file_index": k, "file": "<path of file k>", "row": r, "offset": rows before this point,
     "files": [identity of files 0..k (all, once the source has ended)]}

Seeking checks the files the position covers by content (:mod:`streammn.connectors.fileid`) and
refuses
with :class:`SourceError` when the input changed; positions without ``"files"`` (written by
streammn 0.1) are checked by the path of file k as before.

Batch boundaries are a pure function of the files: within each file, batches end at multiples
of ``batch_size`` rows from the file's start (the file's last batch may be shorter). A bad row
ends the stream with a shorter batch holding every good row before it, then the error. A source
that seeks to a batch end therefore cuts the rest of the stream into exactly the same batches as
an uninterrupted read, which is what makes a resumed run end with the same model.
"""

from __future__ import annotations

import glob
import os
from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

from streammn.connectors.base import (
    DEFAULT_BATCH_SIZE,
    Batch,
    Source,
    SourceError,
    SourceUnavailable,
)
from streammn.connectors.fileid import file_identity, first_changed_file
from streammn.schema import SchemaError
from streammn.errors import DataError, SettingsError


def resolve_paths(spec, suffixes: Sequence[str]) -> list[str]:
    """Expand a file, a directory (files with one of ``suffixes``, recursively, sorted), a glob
    pattern, or a list of those into a sorted list of files. Missing input raises
    :class:`SourceUnavailable`."""
    if isinstance(spec, (list, tuple)):
        paths = [p for s in spec for p in resolve_paths(s, suffixes)]
        if not paths:
            raise SourceUnavailable(f"no input files in {list(spec)!r}")
        return paths
    spec = os.fspath(spec)
    if os.path.isdir(spec):
        found = sorted(
            os.path.join(root, f)
            for root, _, files in os.walk(spec)
            for f in files
            if f.endswith(tuple(suffixes)) and not f.startswith(("_", "."))
        )
        if not found:
            raise SourceUnavailable(f"{spec}: directory holds no {'/'.join(suffixes)} files")
        return found
    if os.path.isfile(spec):
        return [spec]
    if glob.has_magic(spec):
        found = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
        if not found:
            raise SourceUnavailable(f"{spec}: pattern matches no files")
        return found
    raise SourceUnavailable(f"{spec}: no such file or directory")


@contextmanager
def read_errors(path: str):
    """Turn failures while decoding ``path`` into :class:`SourceError` naming it (a vanished or
    unreadable file: :class:`SourceUnavailable`); schema and source errors pass through."""
    try:
        yield
    except (SchemaError, SourceError):
        raise
    except FileNotFoundError as e:
        raise SourceUnavailable(f"{path}: file disappeared ({e})") from e
    except PermissionError as e:
        raise SourceUnavailable(f"{path}: cannot be opened ({e.strerror})") from e
    except (pa.ArrowException, OSError, EOFError) as e:
        raise SourceError(f"{path}: cannot read ({type(e).__name__}: {e})") from e


class FileSource(Source):
    """Base of sources that read a list of files in order (Parquet, CSV).

    Subclasses implement :meth:`_read_file`, yielding validated ``uint8`` row blocks of one
    file starting at a given row.
    """

    def __init__(self, paths: list[str], batch_size: int = DEFAULT_BATCH_SIZE):
        if batch_size < 1:
            raise SettingsError(f"batch_size must be positive, got {batch_size}")
        self.paths = paths
        self.batch_size = int(batch_size)
        self._file_index = 0
        self._row = 0
        self._offset = 0
        self._identities: dict[int, list] = {}

    def _read_file(self, index: int, start_row: int) -> Iterator[np.ndarray]:  # pragma: no cover
        raise NotImplementedError

    # positions ----------------------------------------------------------------------------
    def position(self) -> dict:
        i = self._file_index
        return {
            "file_index": i,
            "file": self.paths[i] if i < len(self.paths) else None,
            "row": self._row,
            "offset": self._offset,
            "files": [self._identity(k) for k in range(min(i + 1, len(self.paths)))],
        }

    def _identity(self, index: int) -> list:
        if index not in self._identities:
            with read_errors(self.paths[index]):
                self._identities[index] = file_identity(self.paths[index])
        return self._identities[index]

    def initial_position(self) -> dict:
        return {"file_index": 0, "file": self.paths[0], "row": 0, "offset": 0}

    def position_after(self, batch: Batch, k: int) -> dict | None:
        """A batch lies within one file, so the rows before its end are rows of that file;
        seeking there yields the rest of the batch as one batch (it ends at the same multiple
        of ``batch_size``), then the same batches as before; the files read so far are the same.
        A position that holds more than row numbers and file identities (a byte offset, say)
        cannot be derived for a row inside the batch: None."""
        if set(batch.end) - {"files"} != {"file_index", "file", "row", "offset"}:
            return None
        back = len(batch) - k
        return {**batch.end, "row": batch.end["row"] - back, "offset": batch.end["offset"] - back}

    def seek(self, position: dict) -> None:
        try:
            i, row, offset = (
                int(position["file_index"]),
                int(position["row"]),
                int(position.get("offset", 0)),
            )
        except (KeyError, TypeError, ValueError):
            raise DataError(f"not a file-source position: {position!r}") from None
        if "files" in position:  # first: a removed file is named, not "outside" the source
            try:
                changed = first_changed_file(self.paths, position["files"], self._identity)
            except (TypeError, ValueError):
                raise SourceError("malformed file identities in the position") from None
            if changed:
                raise SourceError(f"{changed}: the input files changed since the snapshot")
        if not 0 <= i <= len(self.paths) or row < 0:
            raise DataError(f"position {position!r} outside this source's {len(self.paths)} files")
        name = position.get("file")
        if (
            "files" not in position
            and i < len(self.paths)
            and name is not None
            and os.path.abspath(name) != os.path.abspath(self.paths[i])
        ):
            raise SourceError(
                f"position refers to {name}, but file {i} of this source is "
                f"{self.paths[i]}: the input files changed"
            )
        self._file_index, self._row, self._offset = i, row, offset

    @property
    def offset(self) -> int:
        """Rows of the whole source before the current position."""
        return self._offset

    # iteration ----------------------------------------------------------------------------
    def _batches(self) -> Iterator[Batch]:
        bs = self.batch_size
        while self._file_index < len(self.paths):
            pending: list[np.ndarray] = []
            pending_n = 0
            boundary = (self._row // bs + 1) * bs
            try:
                for block in self._wrapped_read(self._file_index, self._row):
                    while block.shape[0]:
                        take = min(block.shape[0], boundary - self._row - pending_n)
                        pending.append(block[:take])
                        pending_n += take
                        block = block[take:]
                        if self._row + pending_n == boundary:
                            yield self._emit(pending, pending_n)
                            pending, pending_n = [], 0
                            boundary += bs
            except (SchemaError, SourceError):
                if pending_n:  # the good rows before the error: a last, shorter batch
                    yield self._emit(pending, pending_n)
                raise
            if pending_n:
                yield self._emit(pending, pending_n)
            self._file_index += 1
            self._row = 0

    def _emit(self, pending: list[np.ndarray], n: int) -> Batch:
        rows = pending[0] if len(pending) == 1 else np.concatenate(pending, axis=0)
        start = self._offset
        self._row += n
        self._offset += n
        return Batch(
            np.ascontiguousarray(rows), end=self.position(), start=start, schema=self.schema
        )

    def _wrapped_read(self, index: int, start_row: int) -> Iterator[np.ndarray]:
        """:meth:`_read_file` with decoding failures turned into :class:`SourceError`."""
        with read_errors(self.paths[index]):
            yield from self._read_file(index, start_row)

    def describe(self) -> str:
        if len(self.paths) == 1:
            return f"{type(self).__name__}({self.paths[0]})"
        return f"{type(self).__name__}({len(self.paths)} files from {self.paths[0]})"

    def __repr__(self) -> str:
        return f"{self.describe()[:-1]}, batch_size={self.batch_size}, {self.schema!r})"
