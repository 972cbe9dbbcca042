"""What a variable's states are called: a vocabulary of names, or the bins of a number.

The learners see state numbers ``0 .. cardinality-1``; a user sees values as written. A
:class:`~streammn.schema.Variable` may carry either

- ``states``: the names of its states in order: strings (categories such as ``"US"``),
  booleans (``False, True``) or integers that are codes rather than counts (``200, 404``);
  one kind per variable, each name once. The state number of a name is its position, fixed
  for the life of a stream (a growing schema appends, :mod:`streammn.trees.growth`);
- ``bins``: the increasing edges ``e1 < ... < ek`` of a number's ``k + 1`` bins; state ``s``
  holds the values in ``[e_s, e_(s+1))`` (the first from minus infinity, the last to plus
  infinity), and its name is that interval as text, e.g. ``"[12.5, 40)"``.

Both are part of the schema's description (:meth:`Schema.to_dict
<streammn.schema.Schema.to_dict>`), so snapshots, checkpoints, model ``.json`` files and
Parquet metadata carry them, and a resumed stream encodes every value as before. Turning
columns into state numbers and back is :mod:`streammn.schema.encoding`'s job; this module only says
what a valid vocabulary is and how a bin is labelled.
"""

from __future__ import annotations

import math

import numpy as np

from streammn.errors import SchemaError

MAX_CARDINALITY = 255
MISSING = 255  # a missing value in missing mode: above every state (states are 0..254)
#: the kinds of state names, as JSON writes them (bool before int: True is an int in Python)
NAME_KINDS = (bool, int, str)


def name_kind(value) -> type | None:
    """The kind of a state name (``bool``, ``int`` or ``str``), None for anything else."""
    value = value.item() if isinstance(value, np.generic) else value
    return next((k for k in NAME_KINDS if isinstance(value, k)), None)


def checked_states(variable: str, states) -> tuple:
    """``states`` as a tuple of plain Python names, all of one kind and each once; otherwise
    a :class:`SchemaError` naming ``variable``."""
    names = tuple(s.item() if isinstance(s, np.generic) else s for s in states)
    kinds = {name_kind(s) for s in names}
    if not names or None in kinds or len(kinds) > 1:
        raise SchemaError(
            f"variable {variable!r}: states must be a non-empty list of strings, booleans "
            f"or integers, all of one kind, got {list(names)[:8]!r}"
        )
    if len(set(names)) != len(names):
        dup = next(s for s in names if names.count(s) > 1)
        raise SchemaError(f"variable {variable!r}: state {dup!r} is named twice")
    return names


def checked_bins(variable: str, bins) -> tuple[float, ...]:
    """``bins`` as a tuple of finite, strictly increasing floats (at least one edge)."""
    try:
        edges = tuple(float(e) for e in bins)
    except (TypeError, ValueError):
        edges = ()
    if (
        not edges
        or not all(math.isfinite(e) for e in edges)
        or any(a >= b for a, b in zip(edges, edges[1:]))
    ):
        raise SchemaError(
            f"variable {variable!r}: bins must be finite, strictly increasing edges "
            f"(at least one), got {bins!r}"
        )
    return edges


def number_text(x: float) -> str:
    """An edge as a label writes it: ``40`` for 40.0, ``12.5``, the shortest exact repr."""
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


def bin_labels(edges: tuple[float, ...]) -> tuple[str, ...]:
    """The names of the bins of ``edges``: ``(-inf, e1)``, ``[e1, e2)``, ..., ``[ek, inf)``."""
    bounds = ["-inf", *map(number_text, edges), "inf"]
    return tuple(
        f"{'(' if i == 0 else '['}{lo}, {hi})" for i, (lo, hi) in enumerate(zip(bounds, bounds[1:]))
    )


def name_text(name) -> str:
    """A state name as a text cell writes it: ``true``/``false`` for booleans."""
    return ("true" if name else "false") if isinstance(name, bool) else str(name)
