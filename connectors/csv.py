"""CSV and Libra ``.data`` files as a streaming source.

Files are decoded block by block with pyarrow's streaming CSV reader. ``.data`` files (the
format of the benchmark datasets and of Libra) have no header; other CSV files have one by
default. Libra's unknown value ``*`` and empty cells are nulls, which the schema rejects
unless the source is in missing mode (``missing=True``, or a ``missing_token`` declaring one
more null token): then they are missing values (:mod:`streammn.trees.missing`).

A reader starts at any data row: the rows before it are skipped by counting newlines
(:mod:`connectors.lines`), not by pyarrow's ``skip_rows``, which only works within its first
block; so a resumed run seeks to its position in a file of any size.

When pyarrow fails on a block (wrong column count, a non-numeric token, bytes that are not
UTF-8), the source re-reads the rows from the last good row one by one to name the exact row
and column in a :class:`~streammn.schema.SchemaError`, and yields the good rows before it
first; only the error path pays for that.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from connectors.arrow import record_batch_rows, record_batch_to_rows, table_column_max
from connectors.base import DEFAULT_BATCH_SIZE, SourceError
from connectors.files import FileSource, read_errors, resolve_paths
from connectors.lines import Counted, data_lines, next_line, open_at, skip_rows
from streammn.schema import MISSING, Schema, SchemaError
from streammn.errors import SettingsError

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
    are 0-based data rows of the named file. ``missing``: null cells become missing values
    (the schema's missing mode); ``missing_token``: one more token read as null (implies
    ``missing``).
    """

    def __init__(
        self,
        path,
        batch_size: int = DEFAULT_BATCH_SIZE,
        schema: Schema | None = None,
        header: bool | None = None,
        columns: Sequence[str] | None = None,
        delimiter: str = ",",
        block_bytes: int = BLOCK_BYTES,
        missing: bool = False,
        missing_token: str | None = None,
    ):
        super().__init__(resolve_paths(path, CSV_SUFFIXES), batch_size)
        self.header = (not _headerless(self.paths[0])) if header is None else bool(header)
        self.delimiter = delimiter
        self.block_bytes = int(block_bytes)
        self.columns = list(columns) if columns is not None else None
        if self.columns is not None and not self.header:
            raise SettingsError("columns can only be selected by name in files with a header")
        self.missing = bool(missing) or missing_token is not None
        self.null_tokens = NULL_TOKENS + ([missing_token] if missing_token is not None else [])
        schema = schema if schema is not None else self._infer_schema()
        self.schema = schema.with_missing() if self.missing else schema

    def _reader(self, path: str, start_row: int, column_names: list[str], column_types=None):
        """A pyarrow CSV reader from data row ``start_row`` of ``path`` on (None when no row
        follows). The rows before are
        skipped here (:mod:`connectors.lines`), so any row of a file of any size can be a
        start, whatever pyarrow's block size."""
        with pa.input_stream(path, compression="detect") as stream:
            counted = Counted(stream)
            head = b""
            if self.header:
                _, head = next_line(counted)
            skipped, head = skip_rows(counted, start_row, head)
        if skipped < start_row:
            raise SourceError(
                f"{path}: has {skipped:,} rows, but the position is at row "
                f"{start_row:,}: the input file changed"
            )
        read = pacsv.ReadOptions(
            block_size=self.block_bytes,
            use_threads=True,
            column_names=column_names,
            autogenerate_column_names=False,
        )
        parse = pacsv.ParseOptions(delimiter=self.delimiter)
        convert = pacsv.ConvertOptions(
            null_values=self.null_tokens,
            strings_can_be_null=True,
            column_types=column_types,
            include_columns=self.columns,
        )
        stream = open_at(path, counted.n_read - len(head))  # the first byte after the row
        try:
            return pacsv.open_csv(
                stream, read_options=read, parse_options=parse, convert_options=convert
            )
        except pa.ArrowInvalid as e:
            stream.close()
            if str(e).startswith("Empty CSV file"):  # no row after start_row
                return None
            raise
        except BaseException:
            stream.close()
            raise

    def _first_line(self, path: str) -> list[str]:
        """The tokens of the first row of ``path``: its header, or its first data row."""
        with pa.input_stream(path, compression="detect") as f:
            line, _ = next_line(f)
        if line is None:
            raise SchemaError("empty file", row=0, source=path)
        return [tok.strip().strip('"') for tok in _text(line, 0, path).split(self.delimiter)]

    def _names(self, path: str) -> list[str]:
        """Every column name of ``path``: its header, or ``x0, x1, ...`` for its width."""
        tokens = self._first_line(path)
        return tokens if self.header else [f"x{j}" for j in range(len(tokens))]

    def _infer_schema(self) -> Schema:
        path = self.paths[0]
        with read_errors(path):
            names = self._names(path)
            try:
                reader = self._reader(path, 0, names)
                if reader is None:
                    raise StopIteration
                try:
                    first = reader.read_next_batch()
                finally:
                    reader.close()
            except StopIteration:
                raise SchemaError("no rows to infer a schema from", source=path) from None
            except pa.ArrowInvalid as e:
                raise self._locate_error(path, 0, None, e)[0] from None
        names = first.schema.names
        if not all(
            pa.types.is_integer(t)
            or pa.types.is_boolean(t)
            or pa.types.is_floating(t)
            or pa.types.is_null(t)
            for t in first.schema.types
        ):
            # a token pyarrow read as text or a date: name its row and column
            raise self._locate_error(path, 0, None, ValueError("non-numeric column"))[0]
        maxima = table_column_max(first, names)
        cards = [2 if n not in maxima else max(maxima[n] + 1, 2) for n in names]
        probe = Schema.from_cardinalities([255] * len(names), names).with_missing(self.missing)
        record_batch_to_rows(first, probe, 0, path)  # nulls and non-integers fail here
        return Schema.from_cardinalities(cards, names)

    def _read_file(self, index: int, start_row: int) -> Iterator[np.ndarray]:
        path = self.paths[index]
        n = self.schema.n_vars
        names = self._names(path)
        if not self.header and len(names) != n:
            raise SchemaError(f"expected {n} columns, got {len(names)}", row=0, source=path)
        types = {name: pa.int64() for name in (self.columns or names)}
        row = start_row
        reader = None
        try:
            while True:
                try:
                    if reader is None:  # opening already parses the first block
                        reader = self._reader(path, start_row, names, column_types=types)
                        if reader is None:
                            return
                    rb = reader.read_next_batch()
                except StopIteration:
                    return
                except pa.ArrowInvalid as e:
                    error, good = self._locate_error(path, row, self.schema, e)
                    if good:  # the block's rows before the bad line are fine: keep them
                        yield self.schema.validate(
                            np.array(good, dtype=np.int64), row_offset=row, source=path
                        )
                    raise error from None
                if self.header and self.columns is None and rb.schema.names != self.schema.names:
                    raise SchemaError(
                        f"header {rb.schema.names[:8]} does not match the "
                        f"schema's variables {self.schema.names[:8]}",
                        row=0,
                        source=path,
                    )
                yield from record_batch_rows(rb, self.schema, row_offset=row, source=path)
                row += rb.num_rows
        finally:
            # stop pyarrow's read-ahead threads now: left to interpreter exit (a bad row ends
            # the run), a thread still running there aborts the process (exit -6)
            if reader is not None:
                reader.close()

    def _locate_error(
        self, path: str, start_row: int, schema: Schema | None, cause: Exception
    ) -> tuple[Exception, list[list[int]]]:
        """Find the first bad row from ``start_row`` on: a SchemaError describing it, and the
        parsed good rows before it."""
        width = schema.n_vars if schema is not None else None
        good: list[list[int]] = []
        with pa.input_stream(path, compression="detect") as f:
            head = b""
            keep = None
            if self.header:
                line, head = next_line(f)
                header_row = [
                    t.strip().strip('"') for t in _text(line or b"", 0, path).split(self.delimiter)
                ]
                if self.columns is not None:
                    keep = [header_row.index(c) for c in self.columns if c in header_row]
            _, head = skip_rows(f, start_row, head)
            for r, line in enumerate(data_lines(f, head), start=start_row):
                try:
                    tokens = _text(line, r, path).split(self.delimiter)
                except SchemaError as e:
                    return e, good
                if keep is not None and len(tokens) == len(header_row):
                    tokens = [tokens[k] for k in keep]
                if width is None:
                    width = len(tokens)
                if len(tokens) != width:
                    return SchemaError(
                        f"expected {width} columns, got {len(tokens)} "
                        f"(truncated or malformed line)",
                        row=r,
                        source=path,
                    ), good
                values = []
                for c, tok in enumerate(tokens):
                    tok = tok.strip()
                    if len(tok) >= 2 and tok[0] == tok[-1] == '"':
                        tok = tok[1:-1].strip()
                    if tok in self.null_tokens and self.missing:
                        values.append(MISSING)
                        continue
                    if tok in self.null_tokens:
                        return SchemaError("null value", row=r, column=c, source=path), good
                    try:
                        values.append(int(tok))
                    except ValueError:
                        return SchemaError(
                            f"non-integer value {tok[:40]!r}", row=r, column=c, source=path
                        ), good
                good.append(values)
        return SourceError(f"{path}: cannot parse ({cause})"), []


def _text(line: bytes, row: int, path: str) -> str:
    """A row's bytes as text; bytes that are not UTF-8 are a located SchemaError."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SchemaError(
            f"byte 0x{line[e.start]:02x} at character {e.start} is not UTF-8 text "
            f"(a binary, compressed or Latin-1 file?)",
            row=row,
            source=path,
        ) from None
