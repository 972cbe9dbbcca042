"""CSV and Libra ``.data`` files as a streaming source.

Files are decoded block by block with pyarrow's streaming CSV reader. ``.data`` files (the
format of the benchmark datasets and of Libra) have no header; other CSV files have one by
default. Libra's unknown value ``*`` and empty cells are nulls, which the schema rejects.

When pyarrow fails on a block (wrong column count, a non-numeric token), the source re-reads
the lines from the last good row with the plain ``csv`` module to name the exact row and
column in a :class:`~streammn.schema.SchemaError`, and yields the good rows before it first;
only the error path pays for that.
"""

from __future__ import annotations

import csv
import io
import itertools
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from connectors.arrow import record_batch_rows, record_batch_to_rows, table_column_max
from connectors.base import DEFAULT_BATCH_SIZE, SourceError
from connectors.files import FileSource, resolve_paths
from streammn.schema import Schema, SchemaError

CSV_SUFFIXES = (".data", ".csv", ".txt", ".csv.gz", ".data.gz")
NULL_TOKENS = ["", "*", "NA", "N/A", "NULL", "null", "NaN", "nan", "None"]
BLOCK_BYTES = 4 << 20


def _headerless(path: str) -> bool:
    return path.endswith((".data", ".data.gz"))


class CsvSource(FileSource):
    """Stream the rows of CSV / ``.data`` files in batches.

    ``header``: whether files start with a line of column names (default: no for ``.data``,
    yes otherwise). ``schema``: declared, or inferred from the first block of the first file
    (max value + 1, at least 2) and then fixed. ``columns``: names selecting and ordering the
    variables in headed files. ``block_bytes``: bytes pyarrow decodes at a time. Rows in errors
    are 0-based data rows of the named file.
    """

    def __init__(self, path, batch_size: int = DEFAULT_BATCH_SIZE, schema: Schema | None = None,
                 header: bool | None = None, columns: Sequence[str] | None = None,
                 delimiter: str = ",", block_bytes: int = BLOCK_BYTES):
        super().__init__(resolve_paths(path, CSV_SUFFIXES), batch_size)
        self.header = (not _headerless(self.paths[0])) if header is None else bool(header)
        self.delimiter = delimiter
        self.block_bytes = int(block_bytes)
        self.columns = list(columns) if columns is not None else None
        if self.columns is not None and not self.header:
            raise ValueError("columns can only be selected by name in files with a header")
        self.schema = schema if schema is not None else self._infer_schema()

    def _reader(self, path: str, skip: int, column_names=None, column_types=None):
        read = pacsv.ReadOptions(
            block_size=self.block_bytes, use_threads=True,
            column_names=column_names if not self.header else None,
            autogenerate_column_names=False,
            skip_rows=0 if self.header else skip,
            skip_rows_after_names=skip if self.header else 0)
        parse = pacsv.ParseOptions(delimiter=self.delimiter)
        convert = pacsv.ConvertOptions(null_values=NULL_TOKENS, strings_can_be_null=True,
                                       column_types=column_types,
                                       include_columns=self.columns)
        return pacsv.open_csv(path, read_options=read, parse_options=parse,
                              convert_options=convert)

    def _first_line_width(self, path: str) -> int:
        with pa.input_stream(path, compression="detect") as f:
            line = io.TextIOWrapper(f, encoding="utf-8").readline()
        if not line.strip():
            raise SchemaError("empty file", row=0, source=path)
        return len(line.split(self.delimiter))

    def _names(self, path: str) -> list[str] | None:
        """Column names to give pyarrow for a headerless file (the header names itself)."""
        if self.header:
            return None
        width = self._first_line_width(path)
        return [f"x{j}" for j in range(width)]

    def _infer_schema(self) -> Schema:
        path = self.paths[0]
        try:
            reader = self._reader(path, 0, column_names=self._names(path))
            first = reader.read_next_batch()
        except StopIteration:
            raise SchemaError("no rows to infer a schema from", source=path) from None
        except pa.ArrowInvalid as e:
            raise self._locate_error(path, 0, None, e)[0] from None
        names = first.schema.names
        maxima = table_column_max(first, names)
        cards = [2 if n not in maxima else max(maxima[n] + 1, 2) for n in names]
        probe = Schema.from_cardinalities([255] * len(names), names)
        record_batch_to_rows(first, probe, 0, path)  # nulls and non-integers fail here
        return Schema.from_cardinalities(cards, names)

    def _read_file(self, index: int, start_row: int) -> Iterator[np.ndarray]:
        path = self.paths[index]
        n = self.schema.n_vars
        names = self._names(path)
        if names is not None and len(names) != n:
            raise SchemaError(f"expected {n} columns, got {len(names)}", row=0, source=path)
        if names is None:
            names = self.columns or self.schema.names
        types = {name: pa.int64() for name in names}
        row = start_row
        reader = None
        while True:
            try:
                if reader is None:  # opening already parses the first block
                    reader = self._reader(path, start_row,
                                          column_names=None if self.header else names,
                                          column_types=types)
                rb = reader.read_next_batch()
            except StopIteration:
                return
            except pa.ArrowInvalid as e:
                error, good = self._locate_error(path, row, self.schema, e)
                if good:  # the block's rows before the bad line are fine: keep them
                    yield self.schema.validate(np.array(good, dtype=np.int64), row_offset=row,
                                               source=path)
                raise error from None
            if self.header and self.columns is None and rb.schema.names != self.schema.names:
                raise SchemaError(f"header {rb.schema.names[:8]} does not match the schema's "
                                  f"variables {self.schema.names[:8]}", row=0, source=path)
            yield from record_batch_rows(rb, self.schema, row_offset=row, source=path)
            row += rb.num_rows

    def _locate_error(self, path: str, start_row: int, schema: Schema | None,
                      cause: Exception) -> tuple[Exception, list[list[int]]]:
        """Find the first bad line from ``start_row`` on: a SchemaError describing it, and the
        parsed good rows before it."""
        width = schema.n_vars if schema is not None else None
        good: list[list[int]] = []
        with pa.input_stream(path, compression="detect") as f:
            text = io.TextIOWrapper(f, encoding="utf-8", newline="")
            lines = csv.reader(text, delimiter=self.delimiter)
            header_row = next(lines, None) if self.header else None
            keep = None
            if header_row is not None and self.columns is not None:
                keep = [header_row.index(c) for c in self.columns if c in header_row]
            for r, tokens in enumerate(itertools.islice(lines, start_row, None), start=start_row):
                if keep is not None and len(tokens) == len(header_row):
                    tokens = [tokens[k] for k in keep]
                if width is None:
                    width = len(tokens)
                if len(tokens) != width:
                    return SchemaError(f"expected {width} columns, got {len(tokens)} "
                                       f"(truncated or malformed line)", row=r,
                                       source=path), good
                values = []
                for c, tok in enumerate(tokens):
                    tok = tok.strip()
                    if tok in NULL_TOKENS:
                        return SchemaError("null value", row=r, column=c, source=path), good
                    try:
                        values.append(int(tok))
                    except ValueError:
                        return SchemaError(f"non-integer value {tok!r}", row=r, column=c,
                                           source=path), good
                good.append(values)
        return SourceError(f"{path}: cannot parse ({cause})"), []
