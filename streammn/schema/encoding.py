"""Columns of values as users write them, to state numbers and back, a whole column at a time.

Every source that reads named values (CSV text, Parquet string, dictionary and float columns,
Arrow tables and DataFrames handed to ``fit``/``partial_fit``) turns each column into state
numbers here, with pyarrow's kernels or numpy over the whole column, never a Python loop over
rows (:mod:`streammn.schema.vocabulary` says what the names are):

- **names**: a column whose every cell is written exactly as a name is matched in one pass
  (:mod:`streammn.schema.text_lookup`); otherwise ``pyarrow.compute.index_in`` against the
  variable's names (a dictionary column: against its dictionary, then a take of the
  indices). Text is compared as written for string names, trimmed for codes (``404``) and
  trimmed and lower-cased for booleans (``true``, ``False``); a typed column is cast to the
  names' type first.
- **bins**: the values as float64, then ``numpy.searchsorted`` over the edges; a text cell may
  also be a bin's label (``[12.5, 40)``, as ``sample`` writes it). A text cell that is neither
  is a :class:`~streammn.schema.SchemaError` naming it.
- a null (or NaN) is the missing state in missing mode (:data:`~streammn.schema.MISSING`),
  else a located error; an unknown name is a located error, or, when the variable grows
  (:meth:`Schema.with_growth <streammn.schema.Schema.with_growth>`), a new state numbered
  after the known ones in the order the names first appear in the stream. The new names are
  returned, not recorded: the caller records them once the whole block is accepted, so a
  rejected block leaves the vocabulary as it was.

What a column of a first block is (names, bins or state numbers) is decided by
:mod:`streammn.schema.inference`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from streammn.errors import SchemaError
from streammn.schema.text_lookup import exact_states
from streammn.schema.vocabulary import MISSING, name_text

SHOWN_NAMES = 8  # the names an unknown-name error lists
# a decimal number as text: what a numeric column's cells must look like
NUMBER = r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$"


def is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _mask(array: pa.Array) -> np.ndarray:
    return array.to_numpy(zero_copy_only=False).astype(bool, copy=False)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


# encoding -----------------------------------------------------------------------------------
def encode_column(
    col: pa.Array, j: int, schema, row_offset: int = 0, source: str | None = None
) -> tuple[np.ndarray, tuple]:
    """The named or binned column ``j`` of ``schema`` as ``uint8`` states, and the names it
    added (growth mode; empty otherwise). Errors name row ``row_offset + i``, column ``j``
    and ``source``."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    var = schema[j]
    nulls = _mask(col.is_null()) if col.null_count else None
    if var.bins is not None:
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        values = _plain_numbers(col) if is_text(col.type) else None  # the common case
        labels = None
        if values is None:
            labels = _positions(col, var.state_names) if is_text(col.type) else None
            if labels is not None and (labels >= 0).any():  # bins written as their labels
                col = pc.if_else(pa.array(labels >= 0), "0", col)
            values = _numbers(col, var, j, row_offset, source)
        nan = np.isnan(values)
        nulls = nan if nulls is None else nulls | nan
        states = np.searchsorted(np.asarray(var.bins), values, side="right").astype(np.uint8)
        if labels is not None:
            states = np.where(labels >= 0, labels, states).astype(np.uint8)
        added = ()
    else:
        states, added = _named(col, j, schema, nulls, row_offset, source)
    if nulls is not None and nulls.any():
        if not schema.missing:
            raise SchemaError(
                f"null value for variable {var.name!r}",
                row=row_offset + _first(nulls),
                column=j,
                source=source,
            )
        states[nulls] = MISSING
    return states, added


def _numbers(col, var, j: int, row_offset: int, source) -> np.ndarray:
    """A column as float64 values (NaN for nulls); a text cell that is no number is refused.
    Text is cast at once when its cells are plain finite numbers (the common case), else
    checked against :data:`NUMBER` first, which also finds the cell to refuse."""
    if is_text(col.type):
        values = _plain_numbers(col)
        if values is not None:
            return values
        ok = pc.fill_null(pc.match_substring_regex(col, NUMBER), True)
        if not pc.all(ok).as_py():
            i = _first(~_mask(ok))
            raise SchemaError(
                f"not a number: {_shown(col[i].as_py())} for variable {var.name!r}",
                row=row_offset + i,
                column=j,
                source=source,
            )
        col = pc.utf8_trim_whitespace(col)
    elif not (
        pa.types.is_integer(col.type)
        or pa.types.is_floating(col.type)
        or pa.types.is_boolean(col.type)
    ):
        raise SchemaError(
            f"column of type {col.type} holds no numbers (variable {var.name!r})",
            row=row_offset,
            column=j,
            source=source,
        )
    values = pc.cast(col, pa.float64(), safe=False).fill_null(np.nan)  # 2**53 + 1: nearest
    return values.to_numpy(zero_copy_only=False)


def _plain_numbers(col) -> np.ndarray | None:
    """Text whose every cell is a plain finite number (or null) as float64 values (NaN for
    nulls), cast at once; None when some cell is not."""
    try:
        values = pc.cast(col, pa.float64())
    except pa.ArrowInvalid:
        return None
    if pc.all(pc.is_finite(values)).as_py() is False:  # nulls aside
        return None
    return values.fill_null(np.nan).to_numpy(zero_copy_only=False)


def _keys(col, schema, j: int, row_offset: int, source) -> pa.Array:
    """The column's cells as keys to look up among variable ``j``'s names (see the module
    docstring); a column that cannot hold them is refused."""
    names = schema.known_states(j)
    if is_text(col.type) and not isinstance(names[0], str):
        keys = pc.utf8_trim_whitespace(col)
        return pc.utf8_lower(keys) if isinstance(names[0], bool) else keys
    kind = pa.array(names[:1]).type
    try:
        return col if col.type == kind else pc.cast(col, kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise SchemaError(
            f"column of type {col.type} holds no names of variable {schema[j].name!r} "
            f"(its states are {type(names[0]).__name__}s)",
            row=row_offset,
            column=j,
            source=source,
        ) from None


def _positions(keys: pa.Array, names) -> np.ndarray:
    """The position of each key among ``names`` (-1: unknown or null)."""
    value_set = (
        pa.array([name_text(n) for n in names], pa.string())
        if is_text(keys.type) and not isinstance(names[0], str)
        else pa.array(names, keys.type)
    )
    return pc.index_in(keys, value_set=value_set).fill_null(-1).to_numpy(zero_copy_only=False)


def _named(col, j: int, schema, nulls, row_offset: int, source):
    """States of a column of names (``uint8``; nulls as 0 for the caller) and the names added."""
    known = schema.known_states(j)
    index: np.ndarray | None
    if pa.types.is_dictionary(col.type):  # look up the dictionary once, then take
        index = _positions(_keys(col.dictionary, schema, j, row_offset, source), known)
        index = index[col.indices.fill_null(0).to_numpy(zero_copy_only=False)]
        if not _unknown(index, nulls).any():
            return np.where(index < 0, 0, index).astype(np.uint8), ()
        col = col.dictionary_decode()  # an unknown name: found (or added) in row order
    exact = exact_states(col, known)  # every cell written as a name: the common case
    if exact is not None:
        return exact, ()
    keys = col  # text as written first (no blanks, booleans in lower case)
    index = _positions(keys, known) if is_text(col.type) else None
    if index is None or _unknown(index, nulls).any():
        keys = _keys(col, schema, j, row_offset, source)
        if index is None or keys is not col:
            index = _positions(keys, known)
    unknown = _unknown(index, nulls)
    added = ()
    if unknown.any():
        added = _new_names(keys, unknown, known, j, schema, row_offset, source)
        index = _positions(keys, known + added)
        limit = int(schema.max_cardinalities[j])
        if len(known) + len(added) > limit:
            over = int(np.flatnonzero(index >= limit)[0])
            raise schema.range_error(_shown(keys[over].as_py()), row_offset + over, j, source)
    return np.where(index < 0, 0, index).astype(np.uint8), added


def _unknown(index: np.ndarray, nulls: np.ndarray | None) -> np.ndarray:
    """Where a cell (not a null) is no known name."""
    return index < 0 if nulls is None else (index < 0) & ~nulls


def _new_names(keys, unknown, known, j, schema, row_offset, source) -> tuple:
    """The unknown names of a column in the order they first appear, if the variable may grow;
    else the located error of the first."""
    var = schema[j]
    i = _first(unknown)
    if not schema.grows or isinstance(known[0], bool):
        listed = ", ".join(map(repr, known[:SHOWN_NAMES])) + (
            ", ..." if len(known) > SHOWN_NAMES else ""
        )
        raise SchemaError(
            f"unknown value {_shown(keys[i].as_py())} for variable {var.name!r} (its states: "
            f"{listed}; new values need the growth option, --grow-values)",
            row=row_offset + i,
            column=j,
            source=source,
        )
    new = pc.unique(keys.filter(pa.array(unknown))).to_pylist()  # first appearance order
    if isinstance(known[0], int):
        bad = [n for n in new if not n.strip().isdecimal()] if isinstance(new[0], str) else []
        if bad:
            raise SchemaError(
                f"unknown value {_shown(bad[0])} for variable {var.name!r}: its states are "
                f"integer codes",
                row=row_offset + _first(_mask(pc.equal(keys, bad[0]).fill_null(False))),
                column=j,
                source=source,
            )
        new = [int(n) for n in new]
    return tuple(new)


def encode_table(table, schema, row_offset: int = 0, source: str | None = None):
    """The columns of an Arrow table (or record batch) named as ``schema``'s variables (or, when
    it names none of them, taken in order) as validated ``uint8`` rows. Named and binned
    variables are encoded here; the others are state numbers, checked by
    :meth:`Schema.validate <streammn.schema.Schema.validate>` column by column."""
    names = table.column_names
    if all(n in names for n in schema.names):
        columns = [table.column(n) for n in schema.names]
    elif table.num_columns == schema.n_vars and not set(schema.names) & set(names):
        columns = [table.column(k) for k in range(table.num_columns)]
    else:
        absent = next(n for n in schema.names if n not in names)
        raise SchemaError(
            f"no column named {absent!r} (the table has {', '.join(map(str, names[:8]))})",
            row=row_offset,
            source=source,
        )
    states, added = [], {}
    for j, col in enumerate(columns):
        if schema[j].state_names is not None:
            s, new = encode_column(col, j, schema, row_offset, source)
            if new:
                added[j] = new
        else:
            s = schema.column_states(plain_column(col), j, row_offset, source)
        states.append(s)
    for j, new in added.items():  # the whole block is accepted: record its new names
        schema.add_states(j, new)
    return np.ascontiguousarray(np.stack(states, axis=1))


def plain_column(col) -> np.ndarray:
    """A column of state numbers as numpy (nulls as NaN, strings as objects)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if col.null_count and (pa.types.is_integer(col.type) or pa.types.is_boolean(col.type)):
        col = pc.cast(col, pa.float64(), safe=False)  # beyond 2**53: refused as too large
    return col.to_numpy(zero_copy_only=False)


def table_of(data) -> pa.Table | None:
    """``data`` as an Arrow table when it is a table, record batch or data frame (pandas,
    polars, anything with the Arrow stream interface); None for anything else."""
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return data
    if type(data).__module__.split(".")[0] == "pandas" and hasattr(data, "columns"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    return None


def matrix_table(matrix: np.ndarray, schema, source: str | None = None) -> pa.Table:
    """A 2-D array of objects or text (rows of names) as a table of ``schema``'s columns; a
    column that mixes kinds of values (words and numbers) is a :class:`SchemaError`."""
    columns = {}
    for j, v in enumerate(schema):
        try:
            columns[v.name] = pa.array(matrix[:, j].tolist(), from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise SchemaError(
                f"the values of variable {v.name!r} are of mixed kinds ({e})",
                column=j,
                source=source,
            ) from None
    return pa.table(columns)


# decoding -----------------------------------------------------------------------------------
def decode_column(states: np.ndarray, variable) -> pa.Array:
    """A column of states as the variable's names (its numbers when it has none); the missing
    state is a null."""
    names = variable.state_names
    missing = states == MISSING
    if names is None:
        return pa.array(states.astype(np.int64), mask=missing if missing.any() else None)
    taken = pa.array(list(names)).take(pa.array(np.where(missing, 0, states).astype(np.int64)))
    return pc.if_else(pa.array(missing), pa.nulls(len(states), taken.type), taken)


def decode_rows(rows: np.ndarray, schema) -> pa.Table:
    """Rows of states as a table of the variables' names, one column per variable."""
    return pa.table({v.name: decode_column(rows[:, j], v) for j, v in enumerate(schema)})


def named_csv(rows: np.ndarray, schema) -> str:
    """Rows of states as CSV text: a header of the variables' names, each value as its name
    (booleans ``true``/``false``, a missing value an empty cell)."""
    sink = pa.BufferOutputStream()
    pacsv.write_csv(decode_rows(rows, schema), sink, pacsv.WriteOptions(quoting_style="needed"))
    return sink.getvalue().to_pybytes().decode("utf-8")
