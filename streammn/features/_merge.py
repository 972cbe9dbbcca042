"""Duplicate features in a flat feature array (for merge_duplicates).

Each condition ``(var, val, eq)`` is encoded as one integer and features are grouped by their
lists of codes with :func:`streammn.features.grouping.group_keys`: a hash table whose equal hashes
are confirmed by comparing the conditions themselves, so two different features are never merged
even if their hashes collide. Groups are numbered in order of first occurrence.
"""

from __future__ import annotations

import numpy as np

from streammn.features.grouping import group_keys


def duplicate_groups(ptr, var, val, eq):
    """``(group[F], first[G])``: group id of each feature (groups numbered in order of first
    occurrence) and the index of each group's first feature."""
    val = np.asarray(val, dtype=np.int64)
    radix = int(val.max()) + 1 if val.size else 1  # codes are distinct for values 0..radix-1
    codes = (np.asarray(var, dtype=np.int64) * radix + val) * 2 + np.asarray(eq, dtype=np.int64)
    return group_keys(np.asarray(ptr, dtype=np.int64), codes)
