"""What the values of a stream are: its variables, their names, and how data becomes states.

- :mod:`~streammn.schema.variables`: :class:`Variable` and :class:`Schema`, and the validation
  every batch passes before a learner sees it.
- :mod:`~streammn.schema.vocabulary`: the names a variable's states may carry (categories,
  booleans, codes) or the bins of a number.
- :mod:`~streammn.schema.encoding`: Arrow columns of names, numbers and nulls to state numbers,
  and back.
- :mod:`~streammn.schema.inference`: a schema read from a table's first rows.
- :mod:`~streammn.schema.file`: a schema declared in a JSON file (``--schema``).
"""

from streammn.errors import GrowthUnsupported, SchemaError
from streammn.schema.variables import (
    MIN_CARDINALITY,
    MIN_INFERRED_CARDINALITY,
    Rows,
    Schema,
    Validated,
    Variable,
    complete_rows,
    require_observed,
    rows_within,
)
from streammn.schema.vocabulary import MAX_CARDINALITY, MISSING

__all__ = [
    "MAX_CARDINALITY",
    "MIN_CARDINALITY",
    "MIN_INFERRED_CARDINALITY",
    "MISSING",
    "GrowthUnsupported",
    "Rows",
    "Schema",
    "SchemaError",
    "Validated",
    "Variable",
    "complete_rows",
    "require_observed",
    "rows_within",
]
