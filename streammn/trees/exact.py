"""Exact greedy tree growth, level by level, one pass over the data per level.

Greedy DTSL (LEARNTREE, paper Table II) decides each leaf from that leaf's rows alone, so the
order in which leaves are expanded does not matter: growing every tree breadth-first gives the
same trees as the depth-first recursion. One pass over the data counts the statistics of every
frontier leaf of every tree at once; the frontier's splits are then decided and the children
form the next level's frontier. The data is never held in memory, only the frontier's
statistics; when the frontier needs more than ``max_leaves`` slots a level takes several passes.

How a pass counts is pluggable: :class:`SourcePasses` reads a re-iterable source in this
process; :class:`streammn.connectors.distributed.DaskPasses` runs the pass as Dask tasks over a
Parquet dataset's partitions and adds their statistics. Both fill the same :class:`LeafStats` slots,
and :func:`grow_level_wise` scores and splits them the same way.

Sibling subtraction: a split leaf's statistics are the sum of its children's, so when a
level's frontier fits in the statistics budget together with the statistics of the leaves
that just split, only the smaller child of each pair is counted and the larger one's
statistics are its parent's minus the smaller's (integer counts: exact, so the trees are the
same). A pass then counts each row only where it went to the smaller side, at most half the
rows of every split leaf, and the counting is most of a pass.

When ``cache_bytes`` allows (4 bytes per row and tree), :class:`SourcePasses` remembers every
row's current node in every tree between passes (rows are identified by their order in the
source, which a rewound source repeats), so a pass moves each row down one level instead of
routing it from the root: deep trees then cost no more per level than shallow ones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

import numpy as np

from streammn.stream.source import SourceError
from streammn.trees.forest import Forest
from streammn.trees.criterion import exact_threshold
from streammn.trees.settings import TreeSettings
from streammn.trees.leaf_stats import LeafStats

# count_pass(forest, stats, chunk, trees): add one pass over the data to the statistics slots
# that ``stats`` holds for the frontier leaves ``chunk`` (activated and empty) of ``trees``.
CountPass = Callable[[Forest, LeafStats, np.ndarray, np.ndarray], None]


class SamplingPasses(ABC):
    """A :data:`CountPass` whose rows are read elsewhere
    (:class:`streammn.connectors.distributed.DaskPasses`) and that can also sample them: the
    role exact DTSL's logistic conditionals need from passes made elsewhere, whose fit is on a
    sample of the rows (:mod:`streammn.logistic.sample`). A pass that cannot sample gets trees
    only."""

    @abstractmethod
    def __call__(
        self, forest: Forest, stats: LeafStats, chunk: np.ndarray, trees: np.ndarray
    ) -> None:
        """One pass: the frontier statistics (:data:`CountPass`)."""

    @abstractmethod
    def offer_rows(self, sample) -> None:
        """Offer every row of the data, at its position in the order a single process reads
        it, to the empty mergeable ``sample``
        (:class:`~streammn.logistic.sample.PositionSample`): parts of the data offered to
        copies of it, merged into it. It ends as one process offering every row would leave
        it."""


def _can_split(forest: Forest, nodes: np.ndarray, min_count: int, max_depth) -> np.ndarray:
    """Which of the leaves ``nodes`` could still split: enough rows for two sides and below
    the depth limit."""
    ok = forest.counts[nodes].sum(axis=1) >= 2 * min_count
    if max_depth is not None:
        ok &= forest.depth[nodes] < max_depth
    return ok


def _splittable(forest: Forest, nodes: np.ndarray, min_count: int, max_depth) -> np.ndarray:
    """The leaves of ``nodes`` that could still split (:func:`_can_split`)."""
    return nodes[_can_split(forest, nodes, min_count, max_depth)]


class SourcePasses:
    """Count frontier statistics by reading a rewindable ``source`` in this process.

    ``cache_bytes`` bounds the row -> node cache (see module docstring); the source must yield
    the same rows in the same order on every pass (checked by row count).
    ``on_first_pass(rows, first)`` sees every batch of the first pass (stream rows ``first ..``),
    e.g. to sample them.
    """

    def __init__(self, source, cache_bytes: int = 256 * 2**20, on_first_pass=None):
        self.source = source
        self.cache_bytes = int(cache_bytes)
        self.on_first_pass = on_first_pass
        self.n_passes = 0
        # current node per tree and row, once the first pass gave the count
        self.row_node: np.ndarray | None = None

    def __call__(
        self, forest: Forest, stats: LeafStats, chunk: np.ndarray, trees: np.ndarray
    ) -> None:
        source, row_node = self.source, self.row_node
        at_roots = row_node is None and np.array_equal(chunk, forest.roots[trees])
        source.rewind()
        offset = 0
        for batch in source:
            if self.n_passes == 0 and self.on_first_pass is not None:
                self.on_first_pass(batch.rows, offset)
            if at_roots:
                stats.add_at_roots(batch.rows, trees)
            elif row_node is None:
                stats.add(batch.rows, count_leaves=False, trees=trees)
            else:
                view = row_node[:, offset : offset + batch.n_rows]
                if view.shape[1] != batch.n_rows:
                    raise SourceError(
                        f"{source.describe()} yielded more rows than in its "
                        "first pass; exact mode needs the same rows each pass"
                    )
                stats.add_cached(batch.rows, trees, view)
            offset += batch.n_rows
        if row_node is not None and offset != row_node.shape[1]:
            raise SourceError(
                f"{source.describe()} yielded {offset} rows, not the "
                f"{row_node.shape[1]} of its first pass"
            )
        self.n_passes += 1
        if self.n_passes == 1 and offset * forest.schema.n_vars * 4 <= self.cache_bytes:
            self.row_node = np.empty((forest.roots.shape[0], offset), dtype=np.int32)
            self.row_node[:] = forest.roots[:, None]


def grow_level_wise(
    forest: Forest,
    source,
    settings: TreeSettings,
    max_leaves: int,
    n_threads: int = 1,
    cache_bytes: int = 256 * 2**20,
    on_pass: Callable[[int, int], None] | None = None,
    count_pass: CountPass | None = None,
    on_stats: Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None = None,
    max_rows: int | None = None,
) -> int:
    """Grow every tree of a fresh ``forest`` to completion; return the passes made.

    ``source`` is a :class:`streammn.stream.source.Source`, rewound before each pass, read through a
    :class:`SourcePasses` with ``cache_bytes``; or give ``count_pass`` (see :data:`CountPass`,
    e.g. :class:`streammn.connectors.distributed.DaskPasses`) and ``source=None``. ``n_threads``
    blocks of trees are counted in parallel by a local pass. ``on_pass(level, frontier_size)`` is
    called after each level (progress reporting). The split rule is ``settings``' (its ``kappa``,
    ``split_alpha``, ``min_gain_per_row``, ``min_count`` and ``max_depth``;
    :mod:`streammn.trees.criterion`); ``max_leaves`` statistics slots are counted per pass.
    ``on_stats(nodes, tot, stats)`` receives the statistics of the frontier's nodes, split or
    not (copies, by slot layout): those of the final leaves are for a caller that goes on
    counting from them, and those of all are for a caller that grows trees again on more
    rows (a Hoeffding rebuild). ``max_rows``: a bound on the rows any node holds, when the
    caller knows one (a Hoeffding rebuild: the rows seen); else it is learned from the roots.
    """
    if count_pass is None:
        count_pass = SourcePasses(source, cache_bytes)
    # int32 counts where no node can reach 2**31 rows: half the memory traffic, and one
    # specialisation of the counting kernels rather than two (int64 for the roots otherwise)
    narrow = max_rows is not None and max_rows < 2**31
    stats = LeafStats(
        forest, capacity=max_leaves, dtype=np.int32 if narrow else np.int64, n_threads=n_threads
    )
    frontier = forest.roots.copy()  # roots go in whatever their size: the pass counts them
    split_stats = None  # statistics of the leaves that split at the last level, by node
    penalty = None  # the relevance floor needs the row count: known after the first pass
    level = 0
    passes = 0
    while frontier.size:
        next_frontier, split_parents = [], []
        derived, parents = _derivable(forest, frontier, split_stats, max_leaves)
        counted = frontier[~forest.marked(derived)[frontier]]
        for start in range(0, counted.size, max_leaves):
            chunk = counted[start : start + max_leaves]
            stats.release_all()
            stats.activate(chunk)
            trees = np.unique(forest.tree[chunk]).astype(np.int64)  # finished trees skipped
            count_pass(forest, stats, chunk, trees)
            passes += 1
            if derived.size:  # then the frontier and the parents fit: one chunk
                chunk = _subtract(stats, chunk, derived, parents, split_stats)
            slots = forest.slot[chunk].astype(np.int64)
            forest.counts[chunk] = stats.tot[slots]
            cand = _can_split(forest, chunk, settings.min_count, settings.max_depth)
            bvar, bval, bgain, _, tcounts = stats.score(slots, settings.min_count)
            if penalty is None:
                n_rows = int(forest.counts[forest.roots].sum(axis=1).max())  # missing mode
                penalty = exact_threshold(
                    settings.kappa,
                    settings.split_alpha,
                    forest.cards,
                    n_rows,
                    settings.min_gain_per_row,
                )
            go = cand & (bvar >= 0) & (bgain > penalty[forest.tree[chunk]])
            split_parents.append((chunk[go], stats.tot[slots[go]], stats.stats[slots[go]]))
            if on_stats is not None:
                on_stats(chunk, stats.tot[slots], stats.stats[slots])
            t_ids, f_ids = forest.split(chunk[go], bvar[go], bval[go], tcounts[go])
            children = np.concatenate([t_ids, f_ids])
            next_frontier.append(
                _splittable(forest, children, settings.min_count, settings.max_depth)
            )
        split_stats = _by_node(split_parents)
        stats.release_all()
        if level == 0 and not narrow and forest.counts[forest.roots[0]].sum() < 2**31:
            # no leaf can reach 2**31 rows: int32 counts halve the memory traffic of a pass
            stats = LeafStats(forest, capacity=max_leaves, dtype=np.int32, n_threads=n_threads)
        if on_pass is not None:
            on_pass(level, int(frontier.size))
        frontier = np.sort(np.concatenate(next_frontier)).astype(np.int32)
        level += 1
    return passes


def _by_node(split_parents):
    """The split leaves' statistics, ``(nodes, tot, stats)`` sorted by node (a level counted
    in one chunk gives them sorted already: its chunk is)."""
    if len(split_parents) == 1:
        return split_parents[0]
    nodes = np.concatenate([p[0] for p in split_parents])
    order = np.argsort(nodes)
    return (
        nodes[order],
        np.concatenate([p[1] for p in split_parents])[order],
        np.concatenate([p[2] for p in split_parents])[order],
    )


def _derivable(forest: Forest, frontier: np.ndarray, split_stats, max_leaves: int):
    """The frontier leaves whose statistics will be their parent's minus their sibling's, and
    those parents: the larger child of every pair both of whose children are in the frontier
    (ties: the false child), when the frontier and the parents' statistics fit in
    ``max_leaves`` slots together, so the pass counts every sibling in one chunk."""
    none = np.zeros(0, dtype=np.int32)
    if split_stats is None or frontier.size + split_stats[0].size > max_leaves:
        return none, none
    parent = forest.parent[frontier]
    sibling = np.where(forest.true[parent] == frontier, forest.false[parent], forest.true[parent])
    paired = forest.marked(frontier)[sibling]
    rows = forest.counts[frontier].sum(axis=1)
    sibling_rows = forest.counts[sibling].sum(axis=1)
    is_false = forest.false[parent] == frontier
    larger = (rows > sibling_rows) | ((rows == sibling_rows) & is_false)
    take = paired & larger
    return frontier[take], parent[take]


def _subtract(
    stats: LeafStats, counted: np.ndarray, derived: np.ndarray, parents: np.ndarray, split_stats
) -> np.ndarray:
    """Give each ``derived`` leaf a slot holding its parent's statistics minus its sibling's
    (counted by the pass); return ``counted`` and ``derived`` together, sorted."""
    forest = stats.forest
    stats.activate(derived)
    slots = forest.slot[derived].astype(np.int64)
    sibling = np.where(forest.true[parents] == derived, forest.false[parents], forest.true[parents])
    sib_slots = forest.slot[sibling].astype(np.int64)
    at = np.searchsorted(split_stats[0], parents)
    stats.derive(slots, sib_slots, split_stats[1], split_stats[2], at)
    return np.sort(np.concatenate([counted, derived])).astype(np.int32)
