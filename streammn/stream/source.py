"""The one data type that crosses every boundary (:class:`Batch`) and the :class:`Source` contract.

A source turns some external storage (a file, a directory of files, a message log, an array)
into a stream of validated ``uint8`` row blocks. This module is the core's side of that seam:
the engine and the learners depend on it, and the ``connectors`` package builds every file and
message-log source on it (connectors depend on the core, never the other way round).
:class:`ArraySource`, rows already in memory, lives here too, since learners turn a matrix
given to ``fit`` into a source with it. Downstream code never sees file formats. Every
source can report its :meth:`~Source.position` after the last batch it yielded and
:meth:`~Source.seek` back to such a position, which is how snapshots make a stream resumable.
Positions are plain JSON-serialisable values (ints, lists, dicts) so that snapshot manifests
can store them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import numpy as np

from streammn.errors import BatchError, DataError, SettingsError
from streammn.errors import SourceError, SourceUnavailable  # noqa: F401 (re-exported)
from streammn.schema.encoding import table_of
from streammn.schema import Schema
from streammn.schema.inference import infer_rows_schema

DEFAULT_BATCH_SIZE = 65536


@dataclass(frozen=True)
class Batch:
    """A block of rows and the source position just after its last row.

    ``rows`` is a C-contiguous ``uint8`` matrix of shape ``(n_rows, n_vars)`` whose values are
    already validated against the source's schema. ``start`` is the absolute index of the first
    row in the source (for error messages and prequential bookkeeping); ``end`` the position a
    resumed source must ``seek`` to in order to continue after this batch. ``schema`` is the
    schema a source validated the rows against: learners and statistics trust such a batch
    (``Schema.rows_of``) instead of checking every batch again; a batch without it is
    validated wherever it is used.
    """

    rows: np.ndarray
    end: Any
    start: int = 0
    schema: Schema | None = None

    def __post_init__(self):
        rows = self.rows
        if rows.dtype != np.uint8 or rows.ndim != 2 or not rows.flags.c_contiguous:
            raise BatchError("Batch.rows must be a C-contiguous 2-D uint8 array")

    def __len__(self) -> int:
        return self.rows.shape[0]

    @property
    def n_rows(self) -> int:
        return self.rows.shape[0]

    @property
    def n_vars(self) -> int:
        return self.rows.shape[1]

    def head(self, n: int) -> "Batch":
        """The first ``n`` rows, still trusted (for prequential scoring of a batch's head)."""
        return Batch(self.rows[:n], end=self.end, start=self.start, schema=self.schema)


class Source:
    """Base class of all sources: iteration over batches, position/seek, context manager.

    Subclasses implement :meth:`_batches` (yield :class:`Batch` from the current position),
    :meth:`position`, :meth:`seek` and, when they hold resources, :meth:`close`.
    """

    schema: Schema
    batch_size: int = DEFAULT_BATCH_SIZE

    def __iter__(self) -> Iterator[Batch]:
        return self._batches()

    def _batches(self) -> Iterator[Batch]:  # pragma: no cover - abstract
        raise NotImplementedError

    def position(self) -> Any:  # pragma: no cover - abstract
        """The position after the last yielded row, suitable for :meth:`seek`."""
        raise NotImplementedError

    def seek(self, position: Any) -> None:  # pragma: no cover - abstract
        """Continue the next iteration from ``position`` (as returned by :meth:`position`)."""
        raise NotImplementedError

    def position_after(self, batch: Batch, k: int) -> Any:
        """The position after the first ``k`` rows of ``batch`` (a batch this source just
        yielded), or ``None`` when the source can only resume at batch ends. The engine cuts
        batches at snapshot rows with it; seeking there must continue with the rest of
        ``batch`` and then the batches an uninterrupted read would have yielded."""
        return None

    def commit(self, position: Any) -> None:
        """Record that everything up to ``position`` is safely learned (the engine calls it
        once the snapshot covering ``position`` is durable). Message logs commit their
        consumer offsets here; files and arrays have nothing to record."""

    def stop(self) -> None:
        """Ask a running iteration to end soon (called from a signal handler): a source that
        waits for new rows stops waiting. Finite sources end on their own."""

    def describe(self) -> str:
        """A short human-readable description, used in errors and snapshot manifests."""
        return type(self).__name__

    @property
    def rewindable(self) -> bool:
        """True when the source can be iterated again from the start (multi-pass learners)."""
        return True

    def rewind(self) -> None:
        """Go back to the first row (for multi-pass learning over a finite source)."""
        self.seek(self.initial_position())

    def initial_position(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def read_all(self) -> np.ndarray:
        """Concatenate every remaining batch into one matrix (small data, tests)."""
        blocks = [b.rows for b in self]
        if not blocks:
            return np.empty((0, self.schema.n_vars), dtype=np.uint8)
        return np.ascontiguousarray(np.concatenate(blocks, axis=0))


class NumberedRows(Source):
    """A source whose rows are numbered from 0 (a matrix, a generator): the position is the
    number of the next row, ``_next``; ``_n_rows()`` is the last valid position (None: no end)."""

    _next: int

    def _n_rows(self) -> int | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def position(self) -> int:
        return self._next

    def initial_position(self) -> int:
        return 0

    def position_after(self, batch: Batch, k: int) -> int:
        return batch.start + k

    def seek(self, position) -> None:
        position, n = int(position), self._n_rows()
        if position < 0 or (n is not None and position > n):
            raise DataError(f"position {position} outside 0..{n}")
        self._next = position


class ArraySource(NumberedRows):
    """Yield the rows of a 2-D array in batches; the position is the next row index.

    ``rows`` is a matrix of state numbers, or a table or data frame (Arrow, pandas, polars)
    whose named values and numbers the schema encodes (:mod:`streammn.schema.encoding`). The whole
    of it is validated against ``schema`` (inferred when omitted) up front, so a bad value
    raises :class:`~streammn.schema.SchemaError` before any batch is yielded.
    """

    def __init__(
        self,
        rows,
        schema: Schema | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        name: str = "array",
    ):
        if batch_size < 1:
            raise SettingsError(f"batch_size must be positive, got {batch_size}")
        self.name = name
        self.schema = infer_rows_schema(rows, source=name) if schema is None else schema
        self.rows = self.schema.validate(rows, source=name)
        self.batch_size = batch_size
        self._next = 0

    def _batches(self):
        n = self.rows.shape[0]
        while self._next < n:
            start = self._next
            stop = min(start + self.batch_size, n)
            self._next = stop
            yield Batch(self.rows[start:stop], end=stop, start=start, schema=self.schema)

    def _n_rows(self) -> int:
        return self.rows.shape[0]

    def describe(self) -> str:
        return f"{self.name} ({self.rows.shape[0]} rows)"

    def __repr__(self) -> str:
        return (
            f"ArraySource({self.rows.shape[0]} rows, {self.schema!r}, batch_size={self.batch_size})"
        )


def as_source(data, schema: Schema) -> Iterable[Any]:
    """What a learner's ``fit`` reads from ``data``: a :class:`Source` as it is, rows in memory
    (a matrix, a table, a data frame) as an :class:`ArraySource` over ``schema``, and anything
    else (an iterable of batches) as it is."""
    if isinstance(data, Source):
        return data
    if isinstance(data, np.ndarray) or table_of(data) is not None:
        return ArraySource(data, schema=schema)
    return data


class Lookahead:
    """A source's batches, with a look at what follows the batch just yielded: whether the
    source has ended (:meth:`at_end`) is known before another batch is learned. The engine
    asks only of finite sources (a following log would wait for new rows). What the look
    read is yielded next; an error it met is raised there, where it would have been."""

    def __init__(self, source: Source):
        self._batches = iter(source)
        self._ahead: Batch | BaseException | None = None  # read by at_end, not yet yielded

    def __iter__(self) -> "Lookahead":
        return self

    def __next__(self) -> Batch:
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return next(self._batches)
        if isinstance(ahead, BaseException):
            raise ahead
        return ahead

    def at_end(self) -> bool:
        """Whether no batch follows the last one yielded."""
        if self._ahead is None:
            try:
                self._ahead = next(self._batches)
            except Exception as error:  # StopIteration (the end) or a read error
                self._ahead = error
        return isinstance(self._ahead, StopIteration)
