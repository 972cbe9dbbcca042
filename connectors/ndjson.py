"""Newline-delimited JSON files (``.ndjson``, ``.jsonl``) as a streaming source.

Each non-empty line is one flat JSON object mapping variable names to values: state numbers,
or the names, booleans and numbers of a named schema, with ``null`` or an absent key for a
missing value (in missing mode). The lines are decoded as a Kafka or Redis source decodes its
JSON messages (:class:`streammn.connectors.messages.MessageDecoder`: the flat-JSON kernel for state
numbers, pyarrow's JSON reader for names and for whatever the kernel declines), a chunk of
lines at a time, so the same events give the same rows from a file as from a log, and a bad line
is a :class:`~streammn.schema.SchemaError` naming the file and its row.

Without a schema, the first :data:`~streammn.schema.inference.INFER_ROWS` lines of the first
file give one (pyarrow's JSON reader, then the inference every headed source uses: words become
names, ``true``/``false`` two boolean states, numbers that are not state numbers bins;
:func:`~streammn.schema.inference.infer_variable`), variables in the order their keys first
appear. A resumed source skips to its row by counting newlines (:mod:`streammn.connectors.lines`).
"""

from __future__ import annotations

import io
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.json as pajson

from streammn.connectors.base import DEFAULT_BATCH_SIZE
from streammn.connectors.files import FileSource, read_errors, resolve_paths
from streammn.connectors.lines import CHUNK_BYTES, open_at, skip_bom, skip_rows
from streammn.connectors.messages import MessageDecoder
from streammn.schema import Schema, SchemaError
from streammn.errors import SettingsError
from streammn.schema.inference import INFER_ROWS, check_kinds, infer_variable, numbered_variable

JSON_LINES_SUFFIXES = (".ndjson", ".jsonl", ".ndjson.gz", ".jsonl.gz")


class JsonLinesSource(FileSource):
    """Stream the rows of newline-delimited JSON files in batches.

    ``schema``: declared, or inferred from the first file's first lines (module doc).
    ``missing``: ``null`` values and absent keys become missing values (the schema's missing
    mode); ``missing_token`` is refused, it names a CSV cell. ``kinds``: what a schema file
    says of some variables, for the inference of the others
    (:func:`streammn.schema.file.read_schema_file`). Rows in errors are 0-based data rows
    (non-empty lines) of the named file.
    """

    def __init__(
        self,
        path,
        batch_size: int = DEFAULT_BATCH_SIZE,
        schema: Schema | None = None,
        missing: bool = False,
        kinds: dict | None = None,
        missing_token: str | None = None,
    ):
        if missing_token is not None:
            raise SettingsError(
                "a missing-value token is for CSV cells; in JSON a missing value is null or "
                "an absent key (use missing=True, --missing)"
            )
        super().__init__(resolve_paths(path, JSON_LINES_SUFFIXES), batch_size)
        self.kinds = dict(kinds or {})
        self.missing = bool(missing)
        schema = schema if schema is not None else self._infer_schema()
        self.schema = schema.with_missing() if self.missing else schema
        self._decoder = MessageDecoder("json", self.schema)

    def _lines(self, path: str, start_row: int) -> Iterator[list[bytes]]:
        """The rows (non-empty lines, endings removed) of ``path`` from ``start_row`` on, a
        chunk of about ``CHUNK_BYTES`` at a time (split by bytes methods, not line by line)."""
        stream = open_at(path, 0)
        try:
            _, pending = skip_rows(stream, start_row, skip_bom(stream))
            while True:
                data = stream.read(CHUNK_BYTES)
                text = pending + data
                cut = text.rfind(b"\n") + 1 if data else len(text)
                pending = text[cut:]
                block = text[:cut]
                if b"\r" in block:  # CRLF endings (a scan is cheaper than a copy)
                    block = block.replace(b"\r\n", b"\n")
                lines = list(filter(None, block.split(b"\n")))
                if lines:
                    yield lines
                if not data:
                    return
        finally:
            stream.close()

    def _infer_schema(self) -> Schema:
        path = self.paths[0]
        sample: list[bytes] = []
        with read_errors(path):
            for lines in self._lines(path, 0):
                sample += lines[: INFER_ROWS - len(sample)]
                if len(sample) == INFER_ROWS:
                    break
        if not sample:
            raise SchemaError("no rows to infer a schema from", source=path)
        try:
            table = pajson.read_json(io.BytesIO(b"\n".join(sample)))
        except pa.ArrowInvalid as e:
            raise SchemaError(f"unreadable JSON in the first rows: {e}", source=path) from None
        names = table.column_names
        check_kinds(self.kinds, names, path)
        return Schema(
            infer_variable(name, col, self.kinds.get(name)) or numbered_variable(name, col, path)
            for name, col in zip(names, table.columns)
        )

    def _read_file(self, index: int, start_row: int) -> Iterator[np.ndarray]:
        path = self.paths[index]
        row = start_row
        for lines in self._lines(path, start_row):
            rows = self._decoder.decode(lines, lambda i: {"file": path}, row)
            row += rows.shape[0]
            yield rows
