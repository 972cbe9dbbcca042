"""What the columns of a first block are: named states, the bins of a number, or state numbers.

Inference (:func:`infer_variable`) reads the first :data:`INFER_ROWS` rows of a column
(whatever the source, so CSV, Parquet and a table infer the same schema): booleans, and text
whose every cell is ``true``/``false``, are two named states; text with no number in it and at
least :data:`ODD_VALUES` distinct values is named states, sorted; numbers with at least
:data:`ODD_VALUES` distinct values that are no state numbers (fractions, negatives, values
beyond 254) become :data:`DEFAULT_BINS` bins at their quantiles. Anything else stays state
numbers, as streammn has always read them, and a cell that is none is refused where it is: a
stray ``1.5`` or ``abc`` in a column of states is a bad cell, not a new kind of column. Rows in
memory (:func:`infer_rows_schema`: a learner built without a schema, an ``ArraySource``) have
typed values, so there a column of text is named states even when it holds one word. A schema
file (:mod:`streammn.schema.file`) says otherwise where the data cannot.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streammn.schema.encoding import NUMBER, is_text, plain_column, table_of
from streammn.schema.variables import (
    MAX_CARDINALITY,
    MIN_INFERRED_CARDINALITY,
    MISSING,
    Schema,
    Variable,
)
from streammn.errors import SchemaError

DEFAULT_BINS = 4
EDGE_DIGITS = 3
# distinct values that are no state numbers a column needs to be read as words or numbers: one
# alone, in a column of state numbers (or a file of one row), is a bad cell, refused where it is
ODD_VALUES = 2
INFER_ROWS = 10_000  # the first rows a source reads names and bins from: the same in every format


def check_kinds(kinds: dict, names: list[str], source: str | None) -> None:
    """Refuse what a schema file says of a column the source does not have."""
    absent = [n for n in kinds if n not in names]
    if absent:
        raise SchemaError(
            f"the schema file names {absent[0]!r}, which is no column here (the columns: "
            f"{', '.join(names[:8])})",
            source=source,
        )


def infer_variable(
    name: str, col, declared: Variable | dict | None = None, min_words: int = ODD_VALUES
) -> Variable | None:
    """A named or binned variable for the first rows of a column (see the module docstring),
    or None when the column holds state numbers (or values no variable can hold, which the
    reader of state numbers then refuses where they are). ``declared`` is what a schema file
    says of it (:mod:`streammn.schema.file`): the variable itself, or its ``kind``.
    ``min_words``: the distinct words a text column needs to be named states (a file's one word
    may be a stray cell; in typed rows in memory one word is a name)."""
    if isinstance(declared, Variable):
        return declared
    declared = declared or {}
    kind = declared.get("kind", "number" if "bins" in declared else None)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    col = col.drop_null()
    if kind == "code":
        return None
    if kind == "boolean" or (kind is None and pa.types.is_boolean(col.type)):
        return Variable(name, states=(False, True))
    if kind == "category":
        return _categories(name, col)
    numbers = _numeric_values(col)
    if kind == "number":
        if numbers is None:
            raise SchemaError(f"column {name!r} of kind number holds other values than numbers")
        return Variable(name, bins=quantile_edges(numbers, declared.get("bins", DEFAULT_BINS)))
    if numbers is not None:
        odd = numbers[(numbers % 1 != 0) | (numbers < 0) | (numbers >= MAX_CARDINALITY)]
        if np.unique(odd).size < ODD_VALUES or not np.isfinite(numbers).all():
            return None  # state numbers (infinities: refused there; declared bins take them)
        return Variable(name, bins=quantile_edges(numbers))
    if not is_text(col.type):
        return None
    distinct = pc.unique(col)  # what follows depends on the distinct texts alone
    if pc.any(pc.match_substring_regex(distinct, NUMBER)).as_py():
        return None  # numbers and words mixed: declare the variable in a schema file
    lowered = pc.utf8_lower(pc.utf8_trim_whitespace(distinct))
    if pc.all(pc.is_in(lowered, value_set=pa.array(["false", "true"]))).as_py():
        return Variable(name, states=(False, True))
    return _categories(name, distinct) if len(distinct) >= min_words else None


def _numeric_values(col: pa.Array) -> np.ndarray | None:
    """The non-null values of an integer, float or all-numbers text column as float64 (NaN
    left out); None for any other column."""
    if is_text(col.type):
        if not pc.all(pc.match_substring_regex(pc.unique(col), NUMBER)).as_py():
            return None
        col = pc.utf8_trim_whitespace(col)
    elif not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        return None
    values = pc.cast(col, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    return values[~np.isnan(values)]


def _categories(name: str, col: pa.Array) -> Variable:
    """The variable whose states are the distinct values of ``col``, sorted."""
    names = sorted(pc.unique(col).to_pylist())
    if len(names) > MAX_CARDINALITY:
        raise SchemaError(
            f"column {name!r} has {len(names)} distinct values in its first rows, more than "
            f"the {MAX_CARDINALITY} states a variable may have: declare it in a schema file"
        )
    if not names:
        raise SchemaError(f"column {name!r} has no value in its first rows to name a state")
    return Variable(name, states=tuple(names))


def quantile_edges(values: np.ndarray, n_bins: int = DEFAULT_BINS) -> tuple[float, ...]:
    """Edges of up to ``n_bins`` bins at the quantiles of ``values``, rounded to
    :data:`EDGE_DIGITS` significant digits so that the labels read well (``[12.5, 40)``); a
    constant column gets the one edge at its value."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return (0.0,)
    q = np.quantile(values, np.arange(1, n_bins) / n_bins, method="lower")
    rounded = np.array([float(f"{e:.{EDGE_DIGITS}g}") for e in q])  # n_bins - 1 edges only
    edges = np.unique(rounded[rounded > values.min()])
    return tuple(edges.tolist()) if edges.size else (float(values.min()),)


def infer_schema(
    table,
    names=None,
    source: str | None = None,
    first_rows: int | None = INFER_ROWS,
    min_words: int = ODD_VALUES,
) -> Schema:
    """The schema of a first block: a variable per column (named ``names`` when given), with
    names or bins where :func:`infer_variable` finds them in its ``first_rows`` rows (None:
    all; ``min_words`` as there), else the largest state number + 1 (at least 2)."""
    names = [str(n) for n in (names if names is not None else table.column_names)]
    if len(names) != table.num_columns or not names:
        raise SchemaError(f"{len(names)} names for {table.num_columns} columns", source=source)
    variables = []
    for j, name in enumerate(names):
        col = table.column(j)
        first = col if first_rows is None else col.slice(0, first_rows)
        var = infer_variable(name, first, min_words=min_words)
        variables.append(var or numbered_variable(name, col, source))
    return Schema(variables)


def infer_rows_schema(
    data, source: str | None = None, first_rows: int | None = INFER_ROWS
) -> Schema:
    """The schema of rows in memory: a table or data frame's by :func:`infer_schema` (names,
    booleans and bins from its ``first_rows`` rows, None: all; a column of text is named states
    even when it holds one word, as its values are typed), a matrix's by :meth:`Schema.infer
    <streammn.schema.Schema.infer>` (state numbers, as a ``.data`` file's)."""
    table = table_of(data)
    if table is None:
        return Schema.infer(data, source=source)
    return infer_schema(table, source=source, first_rows=first_rows, min_words=1)


def numbered_variable(name: str, col, source: str | None = None) -> Variable:
    """A variable of plain state numbers: the largest in ``col`` + 1 (at least
    ``MIN_INFERRED_CARDINALITY``); a value that is not a state number is a located error."""
    probe = Schema([Variable(name, MAX_CARDINALITY)], missing=True)
    states = probe.column_states(plain_column(col), 0, 0, source)
    observed = states[states != MISSING]
    top = int(observed.max()) + 1 if observed.size else 0
    return Variable(name, max(top, MIN_INFERRED_CARDINALITY))
