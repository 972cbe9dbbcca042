"""Message payloads from logs (Kafka, Redis Streams) to validated rows, and dead letters.

A log delivers many small messages; decoding them one by one would spend its time in Python.
:class:`MessageDecoder` decodes a whole poll's worth at once:

- ``csv``: one row per message, a line of comma-separated states. The lines are joined and
  parsed by pyarrow's CSV reader in one call (quoting off, so a message can never spill into
  the next one) into text cells, which :mod:`streammn.connectors.tokens` converts as it does those
  of CSV files (one definition of an integer token for every text source); when every cell is a
  single digit the joined bytes are read as a character matrix by numpy instead, several times
  faster.
- ``json``: one row per message, an object ``{column: state}``. The payloads of a whole poll
  are joined and parsed by one numba pass (:mod:`streammn.connectors.flatjson`) straight into state
  rows: on 100 integer fields ~20x faster than pyarrow's JSON reader, orjson or msgspec when
  every state has one digit, 2.5-3.5x when they have more (figures there and in
  ``benchmarks/results/sources.md``). That kernel reads only flat
  objects of unsigned integers and nulls and declines every other message, so the general
  reader stays the one definition of what a JSON message means: the declined messages are
  parsed together by pyarrow's JSON reader against an explicit ``int64`` schema (each message
  flattened to one line; unknown keys are errors, missing keys nulls, which validation
  rejects unless the schema is in missing mode) and validated as Arrow columns.
- ``arrow``: many rows per message, an Arrow IPC stream whose columns are the schema's
  variables (by name, any order). Messages are read one by one (each holds many rows) and
  their tables concatenated before one conversion to rows.

Only the error path works message by message: a chunk that fails to parse is bisected to its
first unparseable message, and a validation error is mapped from its row back to the message
that holds it. A bad message is then either a :class:`~streammn.schema.SchemaError` naming the
message (topic/partition/offset or stream/entry id) or, with a :class:`DeadLetterFile`, written
there while the rest of the chunk flows on. Nothing is skipped silently.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson

from streammn.connectors.arrow import record_batch_to_rows
from streammn.connectors.csv import NULL_TOKENS
from streammn.connectors.flatjson import FlatJsonRows
from streammn.schema import Schema, SchemaError
from streammn.errors import DataError, SettingsError

FORMATS = ("csv", "json", "arrow")
_BOM = b"\xef\xbb\xbf"


def check_log_settings(
    batch_size: int,
    format: str,
    start: str,
    poll_timeout: float,
    max_wait: float,
    broker_timeout: float,
) -> None:
    """The settings every log source shares; a ValueError names the one out of range."""
    if batch_size < 1:
        raise SettingsError(f"batch_size must be positive, got {batch_size}")
    if format not in FORMATS:
        raise SettingsError(f"format must be one of {FORMATS}, got {format!r}")
    if start not in ("earliest", "latest"):
        raise SettingsError(f"start must be 'earliest' or 'latest', got {start!r}")
    if min(poll_timeout, max_wait, broker_timeout) <= 0:
        raise SettingsError("poll_timeout, max_wait and broker_timeout must be positive")


def _json_line(value: bytes) -> bytes:
    """A JSON message as one line that reads the same wherever it stands in the joined text:
    its line breaks made spaces (they never occur inside JSON strings) and a leading
    byte-order mark dropped (pyarrow skips one only at the start of its input)."""
    return value.removeprefix(_BOM).replace(b"\n", b" ").replace(b"\r", b" ")


class _BadMessage(Exception):
    """Message ``index`` of a chunk cannot be decoded; ``column`` when known."""

    def __init__(self, index: int, reason: str, column: int | None = None):
        super().__init__(reason)
        self.index, self.reason, self.column = index, reason, column


class DeadLetterFile:
    """Append-only JSON-lines file receiving messages that failed to decode.

    Each line holds the message's location (e.g. ``topic``, ``partition``, ``offset``), the
    ``error`` and the payload: ``value`` when it is UTF-8 text, ``value_base64`` otherwise.
    :meth:`sync` makes the lines durable; sources call it before committing offsets past them.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._file = open(self.path, "a", encoding="utf-8")
        self.count = 0

    def write(self, where: dict, error: str, value: bytes | None) -> None:
        record = dict(where)
        record["error"] = error
        if value is None:
            record["value"] = None
        else:
            try:
                record["value"] = value.decode("utf-8")
            except UnicodeDecodeError:
                record["value_base64"] = base64.b64encode(value).decode("ascii")
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        self.count += 1

    def sync(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self.sync()
            self._file.close()

    def __repr__(self) -> str:
        return f"DeadLetterFile({self.path!r})"


def describe_where(where: dict) -> str:
    """``{"topic": "t", "partition": 0, "offset": 5}`` -> ``topic 't' partition 0 offset 5``."""
    return " ".join(f"{k} {v!r}" if isinstance(v, str) else f"{k} {v}" for k, v in where.items())


def _json_type(variable) -> pa.DataType:
    """The JSON value type of ``variable``'s field: its names' kind (strings, booleans,
    integer codes), a number for a binned variable, else an integer state."""
    if variable.bins is not None:
        return pa.float64()
    if variable.states is not None and isinstance(variable.states[0], (bool, str)):
        return pa.bool_() if isinstance(variable.states[0], bool) else pa.string()
    return pa.int64()


class MessageDecoder:
    """Decode chunks of message payloads in one ``format`` into rows of ``schema``."""

    #: JSON: decode the messages the numba kernel accepts with it (False: all with pyarrow,
    #: the reference the tests compare the kernel against)
    _use_kernel = True

    def __init__(self, format: str, schema: Schema):
        if format not in FORMATS:
            raise SettingsError(f"format must be one of {FORMATS}, got {format!r}")
        if not isinstance(schema, Schema):
            raise SettingsError(f"a log source needs a declared Schema, got {schema!r}")
        self.format = format
        self.schema = schema
        names = schema.names
        self._int_schema = pa.schema([(n, pa.int64()) for n in names])
        self._csv_read = pacsv.ReadOptions(column_names=names, use_threads=False)
        self._csv_parse = pacsv.ParseOptions(
            quote_char=False, double_quote=False, escape_char=False, newlines_in_values=False
        )
        self._csv_convert = pacsv.ConvertOptions(
            column_types={n: pa.string() for n in names},
            null_values=NULL_TOKENS,
            strings_can_be_null=True,
        )
        self._json_parse = pajson.ParseOptions(
            explicit_schema=pa.schema([(v.name, _json_type(v)) for v in schema]),
            unexpected_field_behavior="error",
        )
        # the kernel reads state numbers; names, booleans and numbers: pyarrow, then the schema
        kernel = format == "json" and self._use_kernel and not schema.named
        self._flat_json = FlatJsonRows(schema) if kernel else None

    def __repr__(self) -> str:
        return f"MessageDecoder({self.format!r}, {self.schema!r})"

    # public -------------------------------------------------------------------------------
    def decode(
        self,
        values: Sequence[bytes | None],
        where: Callable[[int], dict],
        row_offset: int,
        dead_letter: DeadLetterFile | None = None,
    ) -> np.ndarray:
        """Rows of all messages in ``values``, in order.

        ``where(i)`` locates message ``i`` for errors and dead letters; ``row_offset`` is the
        absolute index of the first row (for error messages). A bad message raises
        :class:`SchemaError` (earliest bad message first) unless ``dead_letter`` is given, in
        which case it is written there and left out of the result.
        """
        blocks = self._decode_range(values, 0, len(values), where, row_offset, dead_letter)
        if not blocks:
            return np.empty((0, self.schema.n_vars), dtype=np.uint8)
        return blocks[0] if len(blocks) == 1 else np.ascontiguousarray(np.concatenate(blocks))

    # recursion over good stretches --------------------------------------------------------
    def _decode_range(self, values, lo, hi, where, row_offset, dead_letter) -> list[np.ndarray]:
        if lo >= hi:
            return []
        try:
            return [self._rows(values[lo:hi])]
        except _BadMessage as e:
            bad = e
        i = lo + bad.index
        left = self._decode_range(values, lo, i, where, row_offset, dead_letter)
        loc = where(i)
        if dead_letter is None:
            raise SchemaError(
                f"bad message: {bad.reason}",
                column=bad.column,
                row=row_offset + sum(b.shape[0] for b in left),
                source=describe_where(loc),
            )
        dead_letter.write(loc, bad.reason, values[i])
        right = self._decode_range(
            values, i + 1, hi, where, row_offset + sum(b.shape[0] for b in left), dead_letter
        )
        return left + right

    def _rows(self, values) -> np.ndarray:
        """Rows of a chunk, or :class:`_BadMessage` for (one of) its first bad message(s)."""
        if self._flat_json is None:
            return self._general_rows(values)
        rows, declined = self._flat_json.decode(values)
        if declined.any():  # their rows and errors: the general reader's
            index = np.flatnonzero(declined)
            try:
                rows[index] = self._general_rows([values[i] for i in index])
            except _BadMessage as bad:
                raise _BadMessage(int(index[bad.index]), bad.reason, bad.column) from None
        return rows

    def _general_rows(self, values) -> np.ndarray:
        """:meth:`_rows` by pyarrow (and numpy for single-digit CSV lines)."""
        digits = (
            self._digit_rows(values) if self.format == "csv" and not self.schema.named else None
        )
        try:
            if digits is not None:
                counts = np.ones(len(values), dtype=np.int64)
                return self.schema.validate(digits)
            table, counts = self._parse_chunk(values)
            return self._table_rows(table)
        except SchemaError as e:
            row = e.row if e.row is not None else 0
            index = int(np.searchsorted(np.cumsum(counts), row, side="right"))
            raise _BadMessage(index, e.reason, e.column) from None

    def _table_rows(self, table: pa.Table) -> np.ndarray:
        if table.num_rows == 0:
            return np.empty((0, self.schema.n_vars), dtype=np.uint8)
        rb = pa.RecordBatch.from_arrays(
            [c.combine_chunks() for c in table.columns], names=table.column_names
        )
        return record_batch_to_rows(rb, self.schema, 0)

    # parsing ------------------------------------------------------------------------------
    def _digit_rows(self, values) -> np.ndarray | None:
        """Fast path for CSV lines whose cells are all single digits (binary data, any
        cardinality up to 10): the joined bytes form an ``n x 2d`` character matrix with
        commas and newlines at fixed places, read with numpy alone. ``None`` when the chunk
        has any other shape (then pyarrow parses it, and finds any error).

        Exactly ``n`` newlines at the ends of the matrix rows means no message holds a newline,
        so matrix row ``i`` is message ``i``.
        """
        d = self.schema.n_vars
        if None in values:  # a missing payload: the general path reports it
            return None
        buf = b"\n".join(values) + b"\n"
        if len(buf) != 2 * d * len(values):
            return None
        chars = np.frombuffer(buf, dtype=np.uint8).reshape(len(values), 2 * d)
        seps = chars[:, 1::2]
        if not ((seps[:, :-1] == ord(",")).all() and (seps[:, -1] == ord("\n")).all()):
            return None
        cells = chars[:, 0::2] - np.uint8(ord("0"))
        if (cells > 9).any():  # a non-digit (uint8 wraps the ones below '0' around)
            return None
        return np.ascontiguousarray(cells)

    def _parse_chunk(self, values) -> tuple[pa.Table, np.ndarray]:
        if self.format == "arrow":
            return self._parse_arrow(values)
        try:
            return self._parse_lines(values), np.ones(len(values), dtype=np.int64)
        except _BadMessage:
            raise
        except (pa.ArrowInvalid, ValueError) as e:
            if len(values) == 1:
                raise _BadMessage(0, str(e)) from None
        return self._bisect(values)

    def _bisect(self, values):
        """Find the first message of a failing chunk that fails on its own."""
        offset = 0
        while len(values) > 1:
            half = len(values) // 2
            try:
                self._parse_lines(values[:half])
            except (pa.ArrowInvalid, ValueError, _BadMessage):
                values = values[:half]
                continue
            offset += half
            values = values[half:]
        try:
            self._parse_lines(values)
        except _BadMessage as bad:
            raise _BadMessage(offset, bad.reason) from None
        except (pa.ArrowInvalid, ValueError) as e:
            raise _BadMessage(offset, str(e)) from None
        raise _BadMessage(offset, "message does not decode together with its neighbours")

    def _parse_lines(self, values) -> pa.Table:
        """CSV or JSON: one row per message, all messages parsed in one pyarrow call.

        The rows of the joined text are mapped to messages by position, which is right only
        if each message holds exactly one row. A message holding none is refused here, so
        every message holds at least one and a row count equal to the message count proves
        it (otherwise a message of two rows next to a blank one would shift the rows of
        every later message by one)."""
        for i, v in enumerate(values):
            if not v:  # an empty line would silently vanish in the joined text
                raise _BadMessage(i, "empty message")
            if v[0] in b"\r\n" and not v.strip(b"\r\n"):  # only blank lines: no row
                raise _BadMessage(i, "message holds 0 rows, expected one")
        if self.format == "csv":
            buf = b"\n".join(values)
            table = pacsv.read_csv(
                pa.BufferReader(buf),
                read_options=self._csv_read,
                parse_options=self._csv_parse,
                convert_options=self._csv_convert,
            )
        else:
            lines = [_json_line(v) for v in values]
            for i, line in enumerate(lines):
                text = line.lstrip(b" \t")
                if not text:
                    raise _BadMessage(i, "message holds 0 rows, expected one")
                if text.startswith(b"null"):
                    raise _BadMessage(i, "message is a JSON null, not an object")
            buf = b"\n".join(lines)
            read = pajson.ReadOptions(use_threads=False, block_size=max(len(buf) + 1, 1 << 16))
            table = pajson.read_json(
                pa.BufferReader(buf), read_options=read, parse_options=self._json_parse
            )
        if table.num_rows != len(values):
            if len(values) == 1:
                raise _BadMessage(0, f"message holds {table.num_rows} rows, expected one")
            raise DataError("row count differs from message count")
        return table

    def _parse_arrow(self, values) -> tuple[pa.Table, np.ndarray]:
        names = self.schema.names
        tables = []
        for i, v in enumerate(values):
            if not v:
                raise _BadMessage(i, "empty message")
            try:
                t = pa.ipc.open_stream(v).read_all()
            except pa.ArrowInvalid as e:
                raise _BadMessage(i, f"not an Arrow IPC stream ({e})") from None
            if sorted(t.column_names) != sorted(names):
                missing = [n for n in names if n not in t.column_names]
                extra = [n for n in t.column_names if n not in names]
                raise _BadMessage(
                    i,
                    f"Arrow columns do not match the schema (missing "
                    f"{missing[:5]}, unknown {extra[:5]})",
                )
            tables.append(t.select(names))
        counts = np.array([t.num_rows for t in tables], dtype=np.int64)
        if not tables:
            return self._int_schema.empty_table(), counts
        try:
            table = pa.concat_tables(tables, promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            # incompatible column types across messages: convert message by message
            return self._concat_rows(tables), counts
        return table, counts

    def _concat_rows(self, tables) -> pa.Table:
        blocks = []
        for i, t in enumerate(tables):
            try:
                blocks.append(self._table_rows(t))
            except SchemaError as e:
                raise _BadMessage(i, e.reason, e.column) from None
        rows = np.concatenate(blocks)
        return pa.table({n: rows[:, j] for j, n in enumerate(self.schema.names)})
