"""Exact greedy tree growth, level by level, one pass over a re-iterable source per level.

Greedy DTSL (LEARNTREE, paper Table II) decides each leaf from that leaf's rows alone, so the
order in which leaves are expanded does not matter: growing every tree breadth-first gives the
same trees as the depth-first recursion. One pass over the data counts the statistics of every
frontier leaf of every tree at once; the frontier's splits are then decided and the children
form the next level's frontier. The data is never held in memory, only the frontier's
statistics; when the frontier needs more than ``max_leaves`` slots a level takes several passes.

When ``cache_bytes`` allows (4 bytes per row and tree), every row's current node in every tree
is remembered between passes (rows are identified by their order in the source, which a
rewound source repeats), so a pass moves each row down one level instead of routing it from
the root: deep trees then cost no more per level than shallow ones.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from connectors.base import SourceError
from streammn.trees.forest import Forest
from streammn.trees.stats import LeafStats, split_penalty


def _splittable(forest: Forest, nodes: np.ndarray, min_count: int, max_depth) -> np.ndarray:
    """Leaves that could still split: enough rows for two sides and below the depth limit."""
    ok = forest.counts[nodes].sum(axis=1) >= 2 * min_count
    if max_depth is not None:
        ok &= forest.depth[nodes] < max_depth
    return nodes[ok]


def grow_level_wise(forest: Forest, source, kappa: float, min_count: int, max_depth,
                    max_leaves: int, n_threads: int = 1, cache_bytes: int = 256 * 2 ** 20,
                    on_pass: Callable[[int, int], None] | None = None) -> int:
    """Grow every tree of a fresh ``forest`` to completion from ``source``; return passes made.

    ``source`` is a :class:`connectors.base.Source`; it is rewound before each pass.
    ``n_threads`` blocks of trees are counted in parallel; ``cache_bytes`` bounds the memory of
    the row -> node cache (see module docstring). ``on_pass(level, frontier_size)`` is called
    after each pass (progress reporting).
    """
    stats = LeafStats(forest, capacity=max_leaves, n_threads=n_threads)
    frontier = forest.roots.copy()  # roots go in whatever their size: the pass counts them
    penalty = split_penalty(kappa, forest.cards)
    level = 0
    passes = 0
    row_node = None  # row -> current node per tree, once the first pass gave the row count
    while frontier.size:
        next_frontier = []
        for start in range(0, frontier.size, max_leaves):
            chunk = frontier[start:start + max_leaves]
            stats.release_all()
            stats.activate(chunk)
            trees = np.unique(forest.tree[chunk]).astype(np.int64)  # finished trees skipped
            source.rewind()
            offset = 0
            for batch in source:
                if row_node is None:
                    stats.add(batch.rows, count_leaves=False, trees=trees)
                else:
                    view = row_node[offset:offset + batch.n_rows]
                    if view.shape[0] != batch.n_rows:
                        raise SourceError(f"{source.describe()} yielded more rows than in its "
                                          "first pass; exact mode needs the same rows each pass")
                    stats.add_cached(batch.rows, trees, view)
                offset += batch.n_rows
            if row_node is not None and offset != row_node.shape[0]:
                raise SourceError(f"{source.describe()} yielded {offset} rows, not the "
                                  f"{row_node.shape[0]} of its first pass")
            passes += 1
            if passes == 1:
                n_rows = offset
                if n_rows * forest.schema.n_vars * 4 <= cache_bytes:
                    row_node = np.tile(forest.roots, (n_rows, 1))
            slots = forest.slot[chunk].astype(np.int64)
            forest.counts[chunk] = stats.tot[slots]
            cand = np.isin(chunk, _splittable(forest, chunk, min_count, max_depth))
            bvar, bval, bgain, _, tcounts = stats.score(slots, min_count)
            go = cand & (bvar >= 0) & (bgain > penalty[forest.tree[chunk]])
            t_ids, f_ids = forest.split(chunk[go], bvar[go], bval[go], tcounts[go])
            children = np.concatenate([t_ids, f_ids])
            next_frontier.append(_splittable(forest, children, min_count, max_depth))
        stats.release_all()
        if on_pass is not None:
            on_pass(level, int(frontier.size))
        frontier = np.sort(np.concatenate(next_frontier)).astype(np.int32)
        level += 1
    return passes
