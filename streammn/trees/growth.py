"""New values mid-stream: the growing schema of one-pass DTSL (opt-in).

By default a schema's cardinalities are fixed and a value outside them is a bad row that stops
the run (everything learned before it is kept). A schema in growth mode
(:meth:`Schema.with_growth <streammn.schema.Schema.with_growth>`, CLI ``--grow-values``)
declares a maximum cardinality per variable instead: a value at or above a variable's current
cardinality but below its maximum is a *new value*, and the learner adds it; a value at or
above the maximum is still a bad row (a :class:`~streammn.schema.SchemaError` naming the
file, row, column and value). The choices:

- **Codes.** A value is its own state: streammn's rows are already integer codes ``0 ..
  card-1`` (``.data``, CSV and Parquet integer columns), so value ``v`` is state ``v`` before
  and after growth, in every file and model, and no value-to-code map has to be kept, shipped
  with the model or restored on resume. When value ``v`` first appears the cardinality
  becomes ``v + 1``; values between the old cardinality and ``v`` that were never seen
  become states too (with no counts). Text categories would need such a map and are not
  supported (the CSV reader reads integers).
- **When.** Growth happens at the row where a new value first appears: the rows before it
  are learned under the old cardinalities, that row and those after it under the new ones
  (:func:`first_new_value`). So the model is a function of the rows alone, not of how the
  stream was cut into batches, and ``version`` (the schema's count of growth events, recorded
  in the learner state and the snapshot manifest) is too.
- **Statistics are extended, not allocated at the maximum.** Allocating every store at the
  declared maxima would make a schema declared with room (say 255 values) cost 255 states of
  split statistics per variable from the first row, and the split criterion would count
  candidate tests on values never seen; it would also change the model of a stream in which
  nothing grows. Instead the learner state is rewritten at a growth event
  (:func:`extend_state`): every count of a new value is zero, which is exact, since no row
  so far held it. Leaf target counts (and missing mode's observed counts, the drift
  detector's count copies) get zero columns for the target's new values; the split
  statistics of the active leaves get zero target rows and zero indicator columns (the tests
  ``X_j = v`` of the new values) inserted in the layout of :mod:`streammn.trees.kernels`.
  The grown state is then loaded like a resumed one, so the grower's derived settings (the
  candidate count of the split test, the Hoeffding range ``ln d``, the memory a statistics
  slot takes) follow the new cardinalities, exactly as for a learner declared with them. A
  growth event costs a few copies of the learner state (the split statistics dominate): it
  is rare, at most one per variable and value up to the maxima.
  The engine's marginal counts, a few integers per state, are kept at the maxima.
- **Existing trees.** Trees keep their structure; a leaf gives a new value of its target the
  smoothing prior's share, ``(0 + prior/d) / (n + prior)`` with the new ``d``, until rows
  with it arrive; the new tests ``X_j = v`` become split candidates at every active leaf
  (and a binary variable that grows gains the test ``X_j = 0``, no longer the same partition
  as ``X_j = 1``).
- **Models.** The Markov network, dependency network and every exported file (native JSON,
  Libra ``.mn``, UAI) are over the *current* cardinalities (:meth:`Schema.fixed`): a
  consumer sees the values learned so far, never the declared headroom.
- **Scoring.** The learner's own score (``DTSL.pll_terms``, the prequential score) scores a
  row holding a value beyond the current cardinality (within the maximum) as the learner
  would right after adding it: the leaf's prior share for that value. A Markov network
  taken from a snapshot has fixed cardinalities and rejects such a row with a
  :class:`~streammn.schema.SchemaError`; the engine scores its validation rows on those the
  model can hold (:func:`streammn.schema.rows_within`).
- Only Hoeffding DTSL grows (the engine's streaming learner). Exact DTSL learns a finite
  file whose values can be declared, and grafting, ET and CSGS refuse a growing schema.
"""

from __future__ import annotations

import numpy as np

from streammn.schema import MISSING, Schema
from streammn.errors import GrowthStateError

# learner-state arrays whose axis 1 runs over target values (width: the largest cardinality)
_VALUE_COLUMNS = ("node_counts", "node_observed", "slot_tot", "loss_snap")
# the split statistics (slot, target value, indicator column): both axes grow
_SPLIT_STATS = "slot_stats"


def first_new_value(schema: Schema, rows: np.ndarray) -> tuple[int | None, np.ndarray]:
    """The first row of ``rows`` (validated against the growing ``schema``) holding a value at
    or above its column's cardinality, and the cardinalities that row needs; ``(None, current
    cardinalities)`` when there is none. Missing values (255) are not values."""
    cards = schema.cardinalities
    if rows.shape[0] == 0:
        return None, cards
    values = _values(schema, rows)
    if not (values.max(axis=0) >= cards).any():
        return None, cards
    over = values >= cards.astype(np.uint16)[None, :]
    r = int(np.argmax(over.any(axis=1)))
    needed = np.where(over[r], values[r].astype(np.int64) + 1, cards)
    return r, needed


def cardinalities_of(schema: Schema, rows: np.ndarray) -> np.ndarray:
    """The cardinalities a model needs to score ``rows``: the current ones, raised to every
    value the rows hold (missing values aside)."""
    if rows.shape[0] == 0:
        return schema.cardinalities
    return np.maximum(schema.cardinalities, _values(schema, rows).max(axis=0).astype(np.int64) + 1)


def _values(schema: Schema, rows: np.ndarray) -> np.ndarray:
    """``rows`` with missing values (in missing mode) read as 0, which never grows anything."""
    return np.where(rows == MISSING, 0, rows) if schema.missing else rows


def extend_state(arrays: dict, old: Schema, new: Schema) -> dict:
    """The learner-state ``arrays`` of a forest over ``old``, rewritten for the grown schema
    ``new``: zero counts for every new value (see the module docstring)."""
    old_width, new_width = int(old.cardinalities.max()), int(new.cardinalities.max())
    out = {}
    for name, a in arrays.items():
        if name.endswith(_VALUE_COLUMNS) and a.ndim == 2:
            a = _widen(a, 1, old_width, new_width)
        elif name.endswith(_SPLIT_STATS):
            a = _insert_indicators(_widen(a, 1, old_width, new_width), old, new)
        out[name] = a
    return out


def _widen(a: np.ndarray, axis: int, old: int, new: int) -> np.ndarray:
    if a.shape[axis] != old:
        raise GrowthStateError(f"state array of width {a.shape[axis]}, expected {old}")
    pad = [(0, 0)] * a.ndim
    pad[axis] = (0, new - old)
    return np.pad(a, pad)


def _insert_indicators(stats: np.ndarray, old: Schema, new: Schema) -> np.ndarray:
    """Zero indicator columns for the new values of every grown variable, after that
    variable's existing columns (column ``offsets[j] + v - 1`` is ``X_j = v``)."""
    old_cards, new_cards = old.cardinalities, new.cardinalities
    offsets = np.concatenate([[0], np.cumsum(old_cards - 1)])
    if stats.shape[2] != offsets[-1]:
        raise GrowthStateError(
            f"split statistics with {stats.shape[2]} indicator columns, expected {offsets[-1]}"
        )
    at = np.repeat(offsets[1:], new_cards - old_cards)  # after variable j's last column
    return np.insert(stats, at, 0, axis=2)
