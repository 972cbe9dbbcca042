"""When a Hoeffding leaf is looked at, and whether the split found at a look passes ('auto').

A grower looks at some dozens of leaves at a time, a few times per batch; done as numpy steps
on those few slots, each step's call cost more than its arithmetic (about 5% of a default pass
at 100 binary variables went to such steps). These kernels do each stage of a look in one
call, with the same arithmetic as the numpy steps they replace, so the decisions are the same
to the bit (see :class:`streammn.trees.hoeffding.HoeffdingGrower` for what they mean).
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def schedule(slots, slot_n, last_attempt, growth, first):
    """Schedule the next look at each of ``slots``: when its rows ``slot_n`` have grown by the
    factor ``growth`` (at least one row), and not before ``first`` rows; ``last_attempt`` is
    set one row short of it (the count reports a slot when it passes ``last_attempt``)."""
    for i in range(slots.shape[0]):
        s = slots[i]
        n = slot_n[s]
        following = max(np.int64(np.ceil(n * growth)), n + 1)
        last_attempt[s] = max(following, first) - 1


@nb.njit(cache=True)
def begin(slots, slot_n, last_attempt, attempts, growth, first):
    """A look at each of the distinct ``slots``: its next one scheduled (:func:`schedule`)
    and its looks counted; returns the most looks any of them has had."""
    schedule(slots, slot_n, last_attempt, growth, first)
    most = 0
    for i in range(slots.shape[0]):
        attempts[slots[i]] += 1
        most = max(most, attempts[slots[i]])
    return most


@nb.njit(cache=True, error_model="numpy")  # a slot of no rows: gain / 0 as numpy has it
def passing(
    slots,
    best_var,
    best_gain,
    slot_n,
    slot_target,
    attempts,
    thresholds,
    slot_node,
    node_counts,
    floor,
):
    """Whether the best split found at each slot's look passes: it exists, its gain exceeds
    ``thresholds[target, look]`` (the significance test), and its gain per row of the slot,
    times the rows of its leaf, reaches ``floor`` (the relevance floor: the split's share of
    the stream's log-likelihood)."""
    go = np.empty(slots.shape[0], dtype=np.bool_)
    for i in range(slots.shape[0]):
        s = slots[i]
        leaf_rows = 0
        for y in range(node_counts.shape[1]):
            leaf_rows += node_counts[slot_node[s], y]
        go[i] = (
            best_var[i] >= 0
            and best_gain[i] > thresholds[slot_target[s], attempts[s]]
            and best_gain[i] / np.float64(slot_n[s]) * leaf_rows >= floor
        )
    return go
