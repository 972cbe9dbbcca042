"""Decision trees to weighted conjunctive features (DTSL paper, Section III.B).

Methods, for the tree of target ``X_t`` with ``d`` values:

- ``default``: for every leaf and every value ``y``, the conjunction of the tests on the path
  from the root (``X_j = a`` on a true edge, ``X_j != a`` on a false edge) and ``X_t = y``,
  weighted by the leaf's ``log P(y)``. Exactly one feature per value holds on any row, so these
  features reproduce the tree's conditional distribution.
- ``prune``: ``default`` plus the same ``d`` features for the path to every interior node other
  than the root (DEFAULT applied to every pruned version of the tree), weighted by that node's
  own ``log P(y)``.
- ``prune-k`` (``prune-5``, ``prune-10``, any ``k >= 1``): ``prune`` on the tree cut at depth
  ``k``: nodes at depth ``k`` act as leaves.
- ``nonzero``: ``default`` with every "false" condition removed: the false side of a test
  (``X_j != a``) and any ``X_v = 0``; features left with no condition are dropped and duplicates
  merged (weights summed). Meant for sparse binary data.

Only ``default`` yields a normalised CPD; the other methods give a structure whose weights (node
log-probabilities) are starting values for weight learning.
"""

from __future__ import annotations

import re

import numpy as np

from streammn.features._canonical import canonical_flat
from streammn.features import FeatureSet
from streammn.trees.forest import Forest
from streammn.errors import FeatureMethodError

METHODS = ("default", "prune", "prune-5", "prune-10", "nonzero")


def _parse(method: str) -> tuple[str, int | None]:
    m = method.lower()
    if m in ("default", "prune", "nonzero"):
        return m, None
    match = re.fullmatch(r"prune-(\d+)", m)
    if match and int(match.group(1)) >= 1:
        return "prune", int(match.group(1))
    raise FeatureMethodError(
        f"unknown feature method {method!r}: use one of "
        f"{', '.join(METHODS)} or 'prune-k' with k >= 1"
    )


def _paths(forest: Forest, t: int, max_depth):
    """Yield ``(node, path conditions, is_leaf)`` for tree ``t`` in depth-first order."""
    stack: list[tuple[int, tuple[tuple[int, int, bool], ...]]] = [(int(forest.roots[t]), ())]
    while stack:
        node, path = stack.pop()
        leaf = forest.var[node] < 0 or (max_depth is not None and forest.depth[node] >= max_depth)
        yield node, path, leaf
        if not leaf:
            j, a = int(forest.var[node]), int(forest.val[node])
            stack.append((int(forest.false[node]), path + ((j, a, False),)))
            stack.append((int(forest.true[node]), path + ((j, a, True),)))


def tree_features(forest: Forest, t: int, method: str = "default", log_probs=None) -> FeatureSet:
    """The features of tree ``t`` under ``method`` (see module docstring)."""
    kind, max_depth = _parse(method)
    logp = forest.log_probs() if log_probs is None else log_probs
    d = int(forest.cards[t])
    root = int(forest.roots[t])
    leaves, interior = [], []
    for node, path, is_leaf in _paths(forest, t, max_depth):
        if is_leaf:
            leaves.append((node, path))
        elif kind == "prune" and node != root:
            interior.append((node, path))
    if kind == "nonzero":
        feats = [(logp[node, y], path + ((t, y, True),)) for node, path in leaves for y in range(d)]
        feats = [(w, tuple(c for c in conds if c[2] and c[1] != 0)) for w, conds in feats]
        feats = [(w, conds) for w, conds in feats if conds]
        return FeatureSet.from_features(forest.schema, feats).merge_duplicates(drop_zero=False)
    return _path_features(forest, t, leaves + interior, logp)


def _path_features(forest: Forest, t: int, nodes, logp) -> FeatureSet:
    """For every ``(node, path)`` and value ``y`` of ``X_t`` in turn, the feature ``path and
    X_t = y`` weighted ``logp[node, y]``, canonicalised (as ``FeatureSet.from_features`` does)
    by one kernel call over flat arrays rather than per feature in Python."""
    d = int(forest.cards[t])
    paths = [path for _, path in nodes]
    lengths = np.array([len(p) for p in paths], dtype=np.int64)
    flat = np.array([c for p in paths for c in p], dtype=np.int64).reshape(-1, 3)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    # conjunction k * d + y: the conditions of path k, then X_t = y
    path_of = np.repeat(np.arange(len(paths)), d)
    sizes = lengths[path_of] + 1
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    within = np.arange(ptr[-1]) - np.repeat(ptr[:-1], sizes)
    target = within == np.repeat(sizes - 1, sizes)
    source = np.where(target, 0, np.repeat(starts[path_of], sizes) + within)
    values = np.repeat(np.tile(np.arange(d), len(paths)), sizes)
    if flat.size:
        var, val, eq = flat[source, 0], flat[source, 1], flat[source, 2].astype(bool)
    else:
        var = val = np.zeros(ptr[-1], dtype=np.int64)
        eq = np.zeros(ptr[-1], dtype=bool)
    var = np.where(target, t, var).astype(np.int32)
    val = np.where(target, values, val).astype(np.uint8)
    eq = np.where(target, True, eq)
    keep, ptr, var, val, eq = canonical_flat(
        ptr, var, val, eq, forest.schema.cardinalities.astype(np.int64)
    )
    node_ids = np.array([node for node, _ in nodes], dtype=np.int64)
    weights = logp[np.repeat(node_ids, d), np.tile(np.arange(d), len(paths))][keep]
    return FeatureSet(forest.schema, weights, ptr, var, val, eq, validate=False)


def forest_features(forest: Forest, method: str = "default") -> list[FeatureSet]:
    """:func:`tree_features` of every tree, in variable order."""
    _parse(method)
    logp = forest.log_probs()
    return [tree_features(forest, t, method, logp) for t in range(forest.schema.n_vars)]
