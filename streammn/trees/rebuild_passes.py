"""The count passes of a Hoeffding grower's exact rebuilds, over its replay buffer.

While the replay buffer holds every row of the stream, :class:`HoeffdingGrower
<streammn.trees.hoeffding.HoeffdingGrower>` regrows its trees exactly from it at doubling row
counts (level-wise growth, :func:`streammn.trees.exact.grow_level_wise`). The passes that growth
asks for are made here: the roots' as one co-occurrence count, each later level as a replay of
the buffer's value bitmaps for the nodes that just split, and a node that the last rebuild grew
too starts from the statistics counted then, counting only the rows added since.
"""

from __future__ import annotations

import numpy as np

from streammn.trees.forest import Forest
from streammn.trees.leaf_stats import LeafStats


class EarlierGrowth:
    """The trees of the last rebuild and the statistics its exact growth counted at every node
    it counted (or derived), on the buffer's first ``n_rows`` rows: the next rebuild, on the
    same rows and more, starts from them where it grows the same nodes. Derived, like the
    buffer's bitmaps: not part of the grower's state (a resumed grower's next rebuild counts
    every row, with the same result)."""

    def __init__(self, forest: Forest, n_rows: int, counted: list):
        """``counted``: the ``(nodes, tot, stats)`` chunks exact growth gave ``on_stats``, kept
        as they are (no copy of them all)."""
        self.links = forest.links[: forest.n_nodes].copy()
        self.roots = forest.roots.copy()
        self.n_rows = n_rows
        self.counted = [(tot, stats) for _, tot, stats in counted]
        self.chunk = np.full(forest.n_nodes, -1, dtype=np.int32)  # node -> its chunk ...
        self.row = np.zeros(forest.n_nodes, dtype=np.int64)  # ... and row there
        for i, (nodes, _, _) in enumerate(counted):
            self.chunk[nodes] = i
            self.row[nodes] = np.arange(nodes.size)

    @property
    def nbytes(self) -> int:
        return (
            self.links.nbytes
            + self.chunk.nbytes
            + self.row.nbytes
            + sum(tot.nbytes + stats.nbytes for tot, stats in self.counted)
        )

    def copy_to(self, stats: LeafStats, nodes: np.ndarray, slots: np.ndarray) -> None:
        """Write the statistics of ``nodes`` (counted ones) to ``slots`` of ``stats``."""
        chunk = self.chunk[nodes]
        for i in np.unique(chunk):
            at = chunk == i
            tot, node_stats = self.counted[i]
            stats.put(slots[at], tot, node_stats, self.row[nodes[at]])


class BufferPasses:
    """Exact growth's passes (:data:`streammn.trees.exact.CountPass`) over the replay buffer's
    rows, held in memory as their value bitmaps and packed indicator vectors: the first at the
    roots as a co-occurrence count in popcounts (:meth:`LeafStats.count_roots`), the others as a
    replay (:func:`streammn.trees.replay.replay`) of the split nodes whose children the pass
    counts. Level-wise growth counts a level's leaves right after their parents split, so the
    rows at each parent are the AND of the bitmaps of its path's tests, and only the children
    that hold slots (after sibling subtraction, the smaller of each pair) have their rows
    summed: no routing of the whole buffer through every tree at every level.

    With the ``earlier`` growth of the last rebuild (on the buffer's first rows, which are the
    same), a node that is the same node there (the same root, or the same child of the same
    node split by the same test) starts from the statistics counted there, and only the rows
    added since are counted: the roots' and the top splits, which hold most rows, rarely
    change between rebuilds at doubling row counts, so about half the counting is saved."""

    def __init__(self, bits: np.ndarray, packed: np.ndarray, earlier: EarlierGrowth | None):
        """The buffer's rows as their value bitmaps ``bits`` and their packed indicator
        vectors ``packed`` (:func:`streammn.trees.replay.pack_rows`)."""
        self.bits = bits
        self.packed = packed
        self.earlier = earlier
        self.same = np.zeros(0, dtype=np.int64)  # node -> the same node of earlier, or -1

    def replay(self, stats: LeafStats, parents: np.ndarray, **options) -> None:
        """:meth:`LeafStats.replay` of the buffer's rows."""
        stats.replay(self.packed, self.bits, parents, **options)

    def __call__(
        self, forest: Forest, stats: LeafStats, chunk: np.ndarray, trees: np.ndarray
    ) -> None:
        at_roots = np.array_equal(chunk, forest.roots[trees])
        parents = None if at_roots else np.unique(forest.parent[chunk])
        resumed = self._resume(forest, stats, chunk, parents)
        first = 0 if self.earlier is None else self.earlier.n_rows
        if at_roots:  # (every root had statistics in the earlier growth: its first pass)
            for start, of in ((first, trees[resumed]), (0, trees[~resumed])):
                if of.size:
                    stats.count_roots(self.bits, self.packed.shape[0], of, first=start)
        else:
            assert parents is not None  # None at the roots only
            self.replay(stats, parents[resumed], first=first)
            self.replay(stats, parents[~resumed])

    def _resume(
        self, forest: Forest, stats: LeafStats, chunk: np.ndarray, parents: np.ndarray | None
    ) -> np.ndarray:
        """Which of ``parents`` (the roots ``chunk`` when None) have the same node in the
        earlier growth, with statistics for every child in ``chunk``; give those children's
        (those roots') slots the earlier statistics."""
        if self.earlier is None:
            return np.zeros(chunk.size if parents is None else parents.size, dtype=bool)
        earlier = self.earlier
        if self.same.size < forest.n_nodes:
            self.same = np.concatenate([self.same, np.full(forest.n_nodes - self.same.size, -1)])
        if parents is None:
            self.same[chunk] = earlier.roots[forest.tree[chunk]]
        else:  # the children of the same node split by the same test are the same
            old = self.same[parents]
            kept = old >= 0
            same_test = earlier.links[old[kept], :2] == forest.links[parents[kept], :2]
            kept[kept] = same_test.all(axis=1)
            for side in (2, 3):
                self.same[forest.links[parents[kept], side]] = earlier.links[old[kept], side]
        old = self.same[chunk]
        counted = np.where(old >= 0, earlier.chunk[old], -1) >= 0
        if parents is None:
            resumed = counted
            known = resumed
        else:
            incomplete = forest.parent[chunk[~counted]]
            resumed = ~forest.marked(incomplete)[parents]
            known = forest.marked(parents[resumed])[forest.parent[chunk]]
        earlier.copy_to(stats, old[known], forest.slot[chunk[known]])
        return resumed
