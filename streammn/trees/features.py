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

from streammn.features import FeatureSet
from streammn.trees.forest import Forest
from streammn.errors import SettingsError

METHODS = ("default", "prune", "prune-5", "prune-10", "nonzero")


class FeatureMethodError(SettingsError):
    """An unknown feature-generation method name."""


def _parse(method: str) -> tuple[str, int | None]:
    m = method.lower()
    if m in ("default", "prune", "nonzero"):
        return m, None
    match = re.fullmatch(r"prune-(\d+)", m)
    if match and int(match.group(1)) >= 1:
        return "prune", int(match.group(1))
    raise FeatureMethodError(f"unknown feature method {method!r}: use one of "
                             f"{', '.join(METHODS)} or 'prune-k' with k >= 1")


def _paths(forest: Forest, t: int, max_depth):
    """Yield ``(node, path conditions, is_leaf)`` for tree ``t`` in depth-first order."""
    stack = [(int(forest.roots[t]), ())]
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
    feats = [(logp[node, y], path + ((t, y, True),))
             for node, path in leaves + interior for y in range(d)]
    if kind == "nonzero":
        feats = [(w, tuple(c for c in conds if c[2] and c[1] != 0)) for w, conds in feats]
        feats = [(w, conds) for w, conds in feats if conds]
        return FeatureSet.from_features(forest.schema, feats).merge_duplicates(drop_zero=False)
    return FeatureSet.from_features(forest.schema, feats)


def forest_features(forest: Forest, method: str = "default") -> list[FeatureSet]:
    """:func:`tree_features` of every tree, in variable order."""
    _parse(method)
    logp = forest.log_probs()
    return [tree_features(forest, t, method, logp) for t in range(forest.schema.n_vars)]
