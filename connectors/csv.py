"""CSV and Libra ``.data`` files as a streaming source.

Files are decoded block by block with pyarrow's streaming CSV reader. ``.data`` files (the
format of the benchmark datasets and of Libra) have no header; other CSV files have one by
default. Libra's unknown value ``*`` and empty cells are nulls, which the schema rejects
unless the source is in missing mode (``missing=True``, or a ``missing_token`` declaring one
more null token): then they are missing values (:mod:`streammn.trees.missing`).

A reader starts at any data row: the rows before it are skipped by counting newlines
(:mod:`streammn.connectors.lines`), not by pyarrow's ``skip_rows``, which only works within its
first block; so a resumed run seeks to its position in a file of any size.

A file with a header may hold words, booleans and numbers: the schema inferred from its first
rows names their states or bins the numbers (:func:`streammn.schema.inference.infer_variable`), and
their cells are encoded by :mod:`streammn.schema.encoding`. The cells of state numbers are read as
text and converted by :mod:`streammn.connectors.tokens`, the one definition of an integer token
(ASCII digits, blanks around them allowed), never by pyarrow's integer parser, which also reads
``0x10`` as 16; a cell that is not a token is a
:class:`~streammn.schema.SchemaError` naming the file, the row, the column and the cell. A
header must name every column once; a UTF-8 byte order mark before it (or before the first row
of a headerless file) is skipped (:func:`streammn.connectors.lines.skip_bom`).

When pyarrow fails on a block (a wrong column count, bytes that are not UTF-8), the source
re-reads the rows from the last good row one by one to name the exact row in a
:class:`~streammn.schema.SchemaError`; the cells of the good rows before it are converted as
any block is, and yielded first. Only the error path pays for that.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence, cast

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from streammn.connectors.arrow import record_batch_rows
from streammn.connectors.base import DEFAULT_BATCH_SIZE, SourceError
from streammn.connectors.files import FileSource, read_errors, resolve_paths
from streammn.connectors.readahead import ReadAhead
from streammn.connectors.lines import (
    UTF8_BOM,
    Counted,
    data_lines,
    next_line,
    open_at,
    skip_bom,
    skip_rows,
)
from streammn.connectors.tokens import refused
from streammn.schema.inference import INFER_ROWS, check_kinds, infer_variable
from streammn.schema import (
    MAX_CARDINALITY,
    MIN_INFERRED_CARDINALITY,
    MISSING,
    Schema,
    SchemaError,
    Variable,
)
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
    ``missing``). ``kinds``: what a schema file says of some columns, for the inference of the
    others (:func:`streammn.schema.file.read_schema_file`).
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
        kinds: dict | None = None,
    ):
        super().__init__(resolve_paths(path, CSV_SUFFIXES), batch_size)
        self.kinds = dict(kinds or {})
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

    def _reader(self, path: str, start_row: int, column_names: list[str]):
        """A pyarrow CSV reader of the cells, as text, from data row ``start_row`` of ``path``
        on (None when no row follows). The rows before are skipped here
        (:mod:`streammn.connectors.lines`), so any row of a file of any size can be a start,
        whatever pyarrow's block size."""
        with _open_text(path) as (counted, head):
            if self.header:
                _, head = next_line(counted, head)
            skipped, head = skip_rows(counted, start_row, head)
            if skipped < start_row:
                raise SourceError(
                    f"{path}: has {skipped:,} rows, but the position is at row "
                    f"{start_row:,}: the input file changed"
                )
            head = self._check_no_bom(counted, head, path, start_row, column_names)
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
            column_types={name: pa.string() for name in (self.columns or column_names)},
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

    def _check_no_bom(
        self, stream, head: bytes, path: str, row: int, column_names: list[str]
    ) -> bytes:
        """Refuse a UTF-8 byte order mark that starts data row ``row``, where the reader
        starts: pyarrow would drop it, so that its first cell ``\\ufeff1`` would be read as 1,
        though the same cell is refused in any other row (the mark that starts a file is
        skipped before the header, or before the first row of a headerless file). Returns
        ``head`` with at least the mark's length of bytes read ahead, if the file has them."""
        while len(head) < len(UTF8_BOM) and (more := stream.read(len(UTF8_BOM))):
            head += more
        name = column_names[0] if column_names else None
        if not head.startswith(UTF8_BOM) or (self.columns is not None and name not in self.columns):
            return head
        line, _ = next_line(stream, head)
        cell = _text(line, row, path).split(self.delimiter)[0]
        # name is one of self.columns (so not None) when these are given
        column = self.columns.index(cast(str, name)) if self.columns is not None else 0
        raise refused(cell, name, row, column, path)

    def _header(self, line: bytes | None, path: str) -> list[str]:
        """The cells of a first line (a header, or the first row of a headerless file)."""
        if line is None:
            raise SchemaError("empty file", row=0, source=path)
        return [tok.strip().strip('"') for tok in _text(line, 0, path).split(self.delimiter)]

    def _names(self, path: str) -> list[str]:
        """Every column name of ``path``: its header, or ``x0, x1, ...`` for its width. A
        header that names a column twice is a :class:`SchemaError` naming the name."""
        with _open_text(path) as (stream, head):
            line, _ = next_line(stream, head)
        tokens = self._header(line, path)
        if not self.header:
            return [f"x{j}" for j in range(len(tokens))]
        seen: dict[str, int] = {}
        for j, name in enumerate(tokens):
            if name in seen:
                raise SchemaError(
                    f"the header names two columns {name!r} (columns {seen[name]} and {j}); "
                    f"every column needs a name of its own",
                    column=j,
                    source=path,
                )
            seen[name] = j
        return tokens

    def _first_rows(self, path: str, names: list[str]):
        """The first block of text cells of ``path`` (None when it has no row) and, in a file
        with a header, its first :data:`~streammn.schema.inference.INFER_ROWS` rows, which the
        names and bins of its columns are read from: more blocks, up to one pyarrow cannot
        parse (whose error the stream raises when it gets there, after the rows before it)."""
        reader = self._reader(path, 0, names)
        if reader is None:
            return None, None
        try:
            try:
                blocks = [reader.read_next_batch()]
            except StopIteration:
                return None, None
            n_rows = blocks[0].num_rows
            while self.header and n_rows < INFER_ROWS:
                try:
                    blocks.append(reader.read_next_batch())
                except (StopIteration, pa.ArrowInvalid):
                    break
                n_rows += blocks[-1].num_rows
        finally:
            reader.close()
        return blocks[0], pa.concat_batches(blocks).slice(0, INFER_ROWS)

    def _infer_schema(self) -> Schema:
        """The schema of the first file's first rows. In a file with a header, a column of
        words, booleans or numbers gets names or bins (:func:`streammn.schema.inference.
        infer_variable`); any other column (every column of a headerless ``.data`` file) takes
        its largest state number + 1 in the first block (at least 2). A bad row in that block
        is the error (the earliest, if several)."""
        path = self.paths[0]
        with read_errors(path):
            names = self._names(path)
            selected = self.columns or names
            probe = Schema.from_cardinalities([MAX_CARDINALITY] * len(selected), selected)
            probe = probe.with_missing(self.missing)
            try:
                first, sample = self._first_rows(path, names)
            except pa.ArrowInvalid as e:
                list(self._recover(path, 0, e, probe))  # raises
        if first is None:
            raise SchemaError("no rows to infer a schema from", source=path)
        check_kinds(self.kinds, selected, path)
        inferred = [
            infer_variable(name, sample.column(j), self.kinds.get(name)) if self.header else None
            for j, name in enumerate(selected)
        ]
        probe = Schema(
            v or Variable(name, MAX_CARDINALITY) for v, name in zip(inferred, selected)
        ).with_missing(self.missing)
        rows = np.concatenate(list(record_batch_rows(first, probe, 0, path)))
        observed = np.where(rows == MISSING, 0, rows) if self.missing else rows
        cards = np.maximum(observed.max(axis=0).astype(np.int64) + 1, MIN_INFERRED_CARDINALITY)
        return Schema(
            v or Variable(name, int(c)) for v, name, c in zip(inferred, selected, cards.tolist())
        )

    def _read_file(self, index: int, start_row: int) -> Iterator[np.ndarray]:
        path = self.paths[index]
        n = self.schema.n_vars
        names = self._names(path)
        if not self.header and len(names) != n:
            raise SchemaError(f"expected {n} columns, got {len(names)}", row=0, source=path)
        row = start_row
        reader = None
        try:
            while True:
                try:
                    if reader is None:  # opening already parses the first block
                        reader = self._reader(path, start_row, names)
                        if reader is None:
                            return
                        reader = ReadAhead(reader)  # the next blocks parse while this encodes
                    rb = reader.read_next_batch()
                except StopIteration:
                    return
                except pa.ArrowInvalid as e:
                    self._check_header(names, path)
                    yield from self._recover(path, row, e, self.schema)  # then raises
                self._check_header(names, path)  # once a row is there to be read by it
                yield from record_batch_rows(rb, self.schema, row_offset=row, source=path)
                row += rb.num_rows
        finally:
            # stop pyarrow's read-ahead threads now: left to interpreter exit (a bad row ends
            # the run), a thread still running there aborts the process (exit -6)
            if reader is not None:
                reader.close()

    def _check_header(self, names: list[str], path: str) -> None:
        """Refuse a header that is not the schema's variables (when no columns are selected)."""
        if self.header and self.columns is None and names != self.schema.names:
            raise SchemaError(
                f"header {names[:8]} does not match the schema's variables {self.schema.names[:8]}",
                row=0,
                source=path,
            )

    def _recover(
        self, path: str, start_row: int, cause: Exception, schema: Schema
    ) -> Iterator[np.ndarray]:
        """The error path, after pyarrow refused a block starting at data row ``start_row``:
        yield the good rows before the first bad one, then raise its error. The cells of the
        rows before the line pyarrow stumbled on are converted as any block is, so a bad cell
        among them is the error; when no line is at fault, no row is yielded and the error is a
        :class:`SourceError` quoting pyarrow's ``cause``."""
        error, cells = self._locate_error(path, start_row, schema.n_vars)
        rows: list[np.ndarray] = []
        if cells:
            batch = self._cells_batch(cells, schema.names)
            try:
                rows.extend(record_batch_rows(batch, schema, row_offset=start_row, source=path))
            except SchemaError:
                yield from rows
                raise
        if error is None:
            raise SourceError(f"{path}: cannot parse ({cause})") from None
        yield from rows
        raise error from None

    def _locate_error(
        self, path: str, start_row: int, width: int
    ) -> tuple[SchemaError | None, list[list[str | None]]]:
        """Find the first line from data row ``start_row`` on that cannot be split into
        ``width`` cells, or that is not UTF-8: a SchemaError naming it (None when every line
        splits), and the cells of the rows before it (nulls as None)."""
        cells: list[list[str | None]] = []
        with _open_text(path) as (f, head):
            keep = None
            if self.header:
                line, head = next_line(f, head)
                header_row = self._header(line, path)
                if self.columns is not None:
                    keep = [header_row.index(c) for c in self.columns if c in header_row]
            _, head = skip_rows(f, start_row, head)
            for r, line in enumerate(data_lines(f, head), start=start_row):
                try:
                    tokens = _text(line, r, path).split(self.delimiter)
                except SchemaError as e:
                    return e, cells
                if keep is not None and len(tokens) == len(header_row):
                    tokens = [tokens[k] for k in keep]
                if len(tokens) != width:
                    return SchemaError(
                        f"expected {width} columns, got {len(tokens)} "
                        f"(truncated or malformed line)",
                        row=r,
                        source=path,
                    ), cells
                cells.append([self._cell(tok) for tok in tokens])
        return None, cells

    def _cell(self, token: str) -> str | None:
        """A cell as pyarrow reads it into a text column: unquoted, None for a null token."""
        if len(token) >= 2 and token[0] == token[-1] == '"':
            token = token[1:-1].replace('""', '"')
        return None if token in self.null_tokens else token

    @staticmethod
    def _cells_batch(cells: list[list[str | None]], names: list[str]) -> pa.RecordBatch:
        """Rows of cells as a record batch of text columns, like those pyarrow reads."""
        columns = [pa.array(list(column), type=pa.string()) for column in zip(*cells)]
        return pa.RecordBatch.from_arrays(columns, names=list(names))


@contextmanager
def _open_text(path: str):
    """``(stream, head)``: ``path`` opened (decompressed if compressed), counting the bytes read
    from it, and its first bytes past a UTF-8 byte order mark, to hand on as ``head``."""
    with pa.input_stream(path, compression="detect") as stream:
        counted = Counted(stream)
        yield counted, skip_bom(counted)


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
