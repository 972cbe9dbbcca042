"""Arrow record batches to validated ``uint8`` rows, and schemas from Arrow metadata.

Parquet and CSV both decode through pyarrow, so both sources turn columns into rows here. The
conversion works column by column with vectorised checks (nulls, non-integers, range), then
assembles one C-contiguous row-major matrix; errors name the absolute row and the column. Text
columns (CSV cells, read as strings) of state numbers hold integer tokens, converted by
:mod:`streammn.connectors.tokens`; the columns of named and binned variables are encoded by
:mod:`streammn.schema.encoding`.
"""

from __future__ import annotations

import json
from typing import Iterator

import numpy as np
import pyarrow as pa

from streammn.connectors.layout import columns_to_rows
from streammn.connectors.tokens import is_text, shown_value, text_states
from streammn.schema.encoding import encode_column
from streammn.schema import MAX_CARDINALITY, MISSING, Schema, SchemaError

SCHEMA_METADATA_KEY = b"streammn.schema"


def _first_true(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def plain_values(col: pa.Array) -> np.ndarray:
    """The values of a boolean, integer or floating-point Arrow array without nulls, read from
    its buffers as numpy (read-only; a view where the layout allows). ``to_numpy`` gives the
    same, but its first call in a process imports pandas (37 MB more in every learning process)."""
    data = col.buffers()[1]
    if pa.types.is_boolean(col.type):  # one bit a value, least significant first
        bits = np.frombuffer(data, dtype=np.uint8)
        values = np.unpackbits(bits, count=col.offset + len(col), bitorder="little")
        values = values[col.offset :].view(np.bool_)
    else:
        kind = (
            "f"
            if pa.types.is_floating(col.type)
            else "i"
            if pa.types.is_signed_integer(col.type)
            else "u"
        )
        dtype = np.dtype(f"{kind}{col.type.bit_width // 8}")
        values = np.frombuffer(
            data, dtype=dtype, count=len(col), offset=col.offset * dtype.itemsize
        )
    values.flags.writeable = False
    return values


def column_to_states(
    col: pa.Array, j: int, schema: Schema, row_offset: int, source: str | None
) -> np.ndarray:
    """One Arrow column as a ``uint8`` vector of states of variable ``j``, validated."""
    name = schema[j].name
    t = col.type
    if col.null_count and schema.missing:  # missing mode: a null is the MISSING state
        nulls = col.is_null().to_numpy(zero_copy_only=False)
        filled = col.fill_null("0" if is_text(t) else 0)
        states = column_to_states(filled, j, schema, row_offset, source)
        return np.where(nulls, np.uint8(MISSING), states)
    if col.null_count:
        r = _first_true(col.is_null().to_numpy(zero_copy_only=False))
        raise SchemaError(
            f"null value for variable {name!r}", row=row_offset + r, column=j, source=source
        )
    if pa.types.is_boolean(t):
        values = plain_values(col).view(np.uint8)
    elif is_text(t):  # CSV cells: integer tokens (streammn.connectors.tokens)
        values = text_states(col, name, j, row_offset, source)
    elif pa.types.is_integer(t):
        values = plain_values(col)
    elif pa.types.is_floating(t):
        values = plain_values(col)
        frac = (values != np.floor(values)) | np.isnan(values)
        if frac.any():
            r = _first_true(frac)
            raise SchemaError(
                f"non-integer value {values[r].item()!r} for variable {name!r}",
                row=row_offset + r,
                column=j,
                source=source,
            )
    elif pa.types.is_dictionary(t) and pa.types.is_integer(t.value_type):
        return column_to_states(col.dictionary_decode(), j, schema, row_offset, source)
    else:
        raise SchemaError(
            f"column of type {t} holds no discrete states (variable {name!r})",
            row=row_offset,
            column=j,
            source=source,
        )
    if values.size:
        card = int(schema.value_limits[j])  # the cardinality, or a growing schema's maximum
        lo, hi = values.min(), values.max()
        if lo < 0 or hi >= card:
            r = _first_true((values < 0) | (values >= card))
            value = shown_value(col[r].as_py()) if is_text(t) else values[r]  # as written
            raise schema.range_error(value, row_offset + r, j, source)
    return values.astype(np.uint8, copy=False)


def record_batch_to_rows(
    rb: pa.RecordBatch, schema: Schema, row_offset: int, source: str | None = None
) -> np.ndarray:
    """A record batch whose columns are the schema's variables, in order, as validated rows.
    Named and binned variables are encoded by :func:`streammn.schema.encoding.encode_column`; the
    names a growing schema meets are recorded once every column is accepted."""
    if rb.num_columns != schema.n_vars:
        raise SchemaError(
            f"expected {schema.n_vars} columns, got {rb.num_columns}", row=row_offset, source=source
        )
    columns, added = [], {}
    for j in range(schema.n_vars):
        if schema[j].state_names is None:
            columns.append(column_to_states(rb.column(j), j, schema, row_offset, source))
            continue
        states, new = encode_column(rb.column(j), j, schema, row_offset, source)
        columns.append(states)
        if new:
            added[j] = new
    for j, new in added.items():
        schema.add_states(j, new)
    return columns_to_rows(columns)


def record_batch_rows(
    rb: pa.RecordBatch, schema: Schema, row_offset: int, source: str | None = None
) -> Iterator[np.ndarray]:
    """Yield the record batch as validated rows; if a row is bad, first yield the valid rows
    before it, then raise its :class:`SchemaError`, so a stream keeps every good row.

    Columns are checked one after another, so the first error found may lie below a bad cell
    of a later column: the rows above it are checked again the same way, and the error raised
    is the earliest bad row's."""
    try:
        rows = record_batch_to_rows(rb, schema, row_offset, source)
    except SchemaError as e:
        if e.row is not None and e.column is not None and e.row > row_offset:
            before = rb.slice(0, e.row - row_offset)
            yield from record_batch_rows(before, schema, row_offset, source)
        raise
    yield rows


def schema_to_metadata(schema: Schema) -> dict[bytes, bytes]:
    """Arrow schema metadata that lets :func:`schema_from_arrow` restore ``schema`` exactly."""
    return {SCHEMA_METADATA_KEY: json.dumps(schema.to_dict()).encode()}


def schema_from_arrow(
    arrow_schema: pa.Schema,
    columns: list[str] | None = None,
    column_max: dict[str, int] | None = None,
    source: str | None = None,
) -> Schema:
    """Build a schema from Arrow metadata, column types and known column maxima.

    Order of precedence: a streammn schema stored in the metadata (written by
    :func:`schema_to_metadata`); otherwise boolean columns are binary and integer columns take
    ``max + 1`` (at least 2) from ``column_max`` (Parquet statistics or a first chunk).
    """
    names = columns if columns is not None else arrow_schema.names
    if not names:
        raise SchemaError("no columns: a schema needs at least one variable", source=source)
    meta = arrow_schema.metadata or {}
    if SCHEMA_METADATA_KEY in meta:
        return _stored_schema(meta[SCHEMA_METADATA_KEY], names, source)
    cards = []
    for name in names:
        idx = arrow_schema.get_field_index(name)
        if idx < 0:
            raise SchemaError(f"no column named {name!r}", source=source)
        t = arrow_schema.field(idx).type
        if pa.types.is_boolean(t):
            cards.append(2)
        elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_dictionary(t):
            if column_max is None or name not in column_max:
                raise SchemaError(
                    f"cardinality of column {name!r} unknown: declare a schema", source=source
                )
            hi = int(column_max[name])
            if hi >= MAX_CARDINALITY:
                raise SchemaError(
                    f"column {name!r} has values up to {hi}; at most "
                    f"{MAX_CARDINALITY - 1} is supported",
                    source=source,
                )
            cards.append(max(hi + 1, 2))
        else:
            raise SchemaError(
                f"column {name!r} of type {t} holds no discrete states", source=source
            )
    return Schema.from_cardinalities(cards, names)


def _stored_schema(text: bytes, names: list[str], source: str | None) -> Schema:
    """The variables ``names`` of the streammn schema stored in Arrow metadata, refused with
    a :class:`SchemaError` naming ``source`` when it is not one or lacks a name."""
    try:
        stored = Schema.from_dict(json.loads(text))
        return Schema([stored[stored.index(n)] for n in names])
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError) as e:
        reason = f"not a schema description ({type(e).__name__}: {e})"
    except SchemaError as e:
        reason = e.reason
    raise SchemaError(f"the streammn schema in the file's metadata: {reason}", source=source)
