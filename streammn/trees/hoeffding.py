"""One-pass Hoeffding growth of all trees from a stream of row batches.

Every row updates the target counts of the leaf it reaches in every tree and, when that leaf is
active, its split statistics. Active leaves are looked at on a schedule, and at a look the best
split is tested.

With ``kappa='auto'`` (the default) a leaf is first looked at when its statistics hold
``FIRST_LOOK`` rows and then whenever they have grown by half (``LOOK_GROWTH``): small leaves
early, so finite streams reach the resolution of exact trees, and a leaf of ``n`` rows has had
only ``O(log n)`` looks. At a look the best candidate splits when its gain passes the split
criterion (:mod:`streammn.trees.criterion`): a likelihood-ratio test corrected for the
candidates tried and for the looks taken, plus a relevance floor, so noise splits stay rare
however long the stream and the trees converge. Which of two near-tied candidates is taken does
not matter for the Markov network the trees become, so there is no best-vs-second test.

With a fixed ``kappa`` (river's Hoeffding trees, kept bit-identical): a leaf is looked at every
``grace_period`` new rows; its best and second-best tests (second best: the best test on another
variable) are compared with the Hoeffding bound on the per-row gain, ``eps = sqrt(R^2
ln(1/delta) / (2 n))`` with ``R = ln(d)`` the range of the per-row log-likelihood gain of a
``d``-valued target and ``n`` the rows in the leaf's statistics; the leaf splits when ``best -
second > eps`` or ``eps < tau``, and the best gain beats the structure prior.

Statistics inheritance (``replay_rows > 0``): the last ``replay_rows`` rows of the stream are kept
in a ring buffer; a new leaf's statistics are seeded with the buffered rows that reach it, and a
seeded leaf with ``grace_period`` rows is attempted at once, so children do not start blind and a
finite stream that fits in the buffer grows trees close to exact ones. The buffer keeps its
rows and their value bitmaps (a bit per row for every variable and value, copied from the
bitmaps the segmented count makes of every batch): the rows that reach a just-split node are
the AND of the bitmaps of the tests on its path, a few words per 64 buffered rows and level
(:mod:`streammn.trees.replay`), so no leaf per buffered row and tree is stored or kept current.
Replay reads the rows as their indicator vectors packed as bits (:func:`replay.pack_rows
<streammn.trees.replay.pack_rows>`), packed as they enter the buffer. Memory: ``replay_rows *
n_vars`` bytes of rows plus ``replay_rows * n_vars *
max_card / 8`` of bitmaps, and ``replay_rows * K / 8`` of packed rows (``K`` indicator
columns, rounded up to 64 a row), all three within ``memory_bytes``.

Exact rebuilds (``'auto'`` with a replay buffer): a Hoeffding tree never revisits a split, and
a split taken on the first hundred rows is often not the one the whole stream supports. While
the buffer still holds every row of the stream, the trees are regrown exactly from it at
``REBUILD_FIRST * 2**k`` rows and at the last boundary the buffer can hold, so one pass over a
file of up to ``replay_rows`` rows ends close to (at a rebuild point: equal to) exact DTSL on
the same rows; see :meth:`HoeffdingGrower._rebuild`. A rebuild's passes are replays of the
buffer's bitmaps (a level's nodes are counted just after their parents split), and a node the
last rebuild grew too starts from the statistics counted then and counts only the rows added
since (:mod:`streammn.trees.rebuild_passes`).

Rows are processed in chunks whose boundaries are fixed positions of the whole stream, and the
leaves that came due within a chunk are looked at at its end, so the model does not depend on
how the stream was cut into batches. With a fixed ``kappa`` the boundaries are the multiples of
``grace_period``. With ``'auto'`` the spacing doubles with the stream, ``grace_period * 2**j``
for ``2**j <= n / (CHUNK_FRACTION * grace_period)``, up to ``MAX_CHUNK_GRACES`` grace periods: a
look waits at most about ``1/CHUNK_FRACTION`` of the stream seen, a small delay against looks
spaced by half a leaf's rows, while the per-chunk work (a kernel launch, scoring the due leaves,
one scan of the buffer per tree that split) is paid every few thousand rows rather than every
200, and chunks are long enough for the parallel kernels to pay off. Every threshold where the
spacing doubles is a boundary under both spacings, so the next boundary is a function of the
row count alone (see :meth:`HoeffdingGrower._spacing`).

Memory budget: ``memory_bytes`` covers the forest, the replay buffer (rows, bitmaps and packed
rows) and the split statistics: the trees' share of DTSL's ``memory_mb``
(:mod:`streammn.trees.budget`).
Whatever the forest and buffer leave is given to statistics slots (or ``max_leaves`` slots when
set): when splits want more, all leaves are ranked by promise (rows the leaf's majority value
misclassifies, as river does) and only the most promising keep (or get fresh) statistics; the
others still update their target counts. As the forest grows the slots shrink, and a forest that
fills the budget on its own stops growing. The statistics arrays keep their high-water size.

``max_tree_leaves`` (off by default) optionally caps every tree: splits that would pass it are
dropped (the largest gains win) and a tree at the cap stops collecting split statistics.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import cast

import numpy as np

from streammn.trees import leaf_counting, looks, missing, replay
from streammn.trees.exact import grow_level_wise
from streammn.trees.forest import Forest
from streammn.trees.rebuild_passes import BufferPasses, EarlierGrowth
from streammn.trees.settings import TreeSettings
from streammn.trees.criterion import (
    AUTO,
    SignificanceThresholds,
    split_penalty,
)
from streammn.trees.leaf_stats import LeafStats


FIRST_LOOK = 20  # 'auto': a leaf is first looked at when it holds this many rows ...
LOOK_GROWTH = 1.5  # ... and again when its rows have grown by half
REBUILD_FIRST = 1000  # 'auto' with replay: trees rebuilt exactly at 1000 * 2**k rows ...
REBUILD_GROWTH = 2  # ... while the replay buffer still holds every row of the stream
CHUNK_FRACTION = 32  # 'auto': chunks of at most 1/32 of the stream ...
MAX_CHUNK_GRACES = 32  # ... and at most 32 grace periods
STATS_DTYPE = np.int32  # half the memory traffic of int64; see _retire_full_slots
_FULL = np.iinfo(STATS_DTYPE).max


def _padded_buffer(n_rows: int, n_vars: int) -> np.ndarray:
    """An empty replay buffer of ``n_rows`` rows, followed in memory by at least
    ``leaf_counting.LANE_BLOCK`` zero bytes: replay packs a binary buffer's rows with vector
    compares that read up to 63 bytes past a row (:func:`streammn.trees.replay.pack_rows`)."""
    padding = -(-leaf_counting.LANE_BLOCK // max(1, n_vars))
    return np.zeros((n_rows + padding, n_vars), dtype=np.uint8)[:n_rows]


class HoeffdingGrower:
    """Hoeffding-tree growth state for a :class:`Forest` (see module docstring).

    ``state`` (from :meth:`get_state`, with the forest restored from the same snapshot) resumes
    a grower exactly where it was.
    """

    def __init__(
        self,
        forest: Forest,
        settings: TreeSettings,
        n_threads: int = 1,
        state: dict | None = None,
    ):
        """Grow ``forest`` by ``settings`` (:class:`~streammn.trees.settings.TreeSettings`),
        counting on ``n_threads`` blocks of trees."""
        self.forest = forest
        self.settings = settings
        # the accumulation kernel reports a slot as due when its rows since ``last_attempt``
        # reach this gap: every grace_period rows (fixed kappa), or at the scheduled look
        # (``last_attempt = next_look - 1``) of the geometric schedule ('auto')
        self._look_gap = 1 if settings.kappa == AUTO else settings.grace_period
        self._first_look = max(FIRST_LOOK, 2 * settings.min_count)  # rows at a leaf's first look
        self._slot_bytes = LeafStats.slot_bytes(forest, STATS_DTYPE)
        self.rows_seen = 0
        self.trees = None  # trees that learn (None: all); drift alternates grow a subset
        self.rebuilds = True  # exact rebuilds allowed (drift adaptation turns them off)
        self.rebuild_count = 0  # rebuilds made by this object (not state: callers compare)
        if settings.kappa == AUTO:
            self._significance = SignificanceThresholds(settings.split_alpha, forest.cards)
        else:
            self._penalty = split_penalty(cast(float, settings.kappa), forest.cards)  # not AUTO
        self._range = np.log(forest.cards.astype(np.float64))
        self._has_inactive = False  # some eligible leaf was denied statistics by the budget
        self._due = []  # due slots found since the last grace-period boundary
        self._buf = _padded_buffer(settings.replay_rows, forest.schema.n_vars)
        self._buf_len = 0  # rows held (at most replay_rows)
        self._buf_pos = 0  # next row to overwrite
        # the last rebuild's growth, while the buffer's rows are the same
        self._earlier: EarlierGrowth | None = None
        # value bitmaps of the buffered rows (leaf_counting.value_bits), bit i: buffer row i
        self._buf_bits = np.zeros(
            (forest.schema.n_vars, forest.max_card, -(-settings.replay_rows // 64)), dtype=np.uint64
        )
        # the buffered rows' indicator vectors as bits (replay.pack_rows), read by replay
        self._buf_packed = np.zeros(
            (settings.replay_rows, replay.packed_words(int((forest.cards - 1).sum()))),
            dtype=np.uint64,
        )
        self.stats = LeafStats(
            forest, capacity=self.leaf_budget, dtype=STATS_DTYPE, n_threads=n_threads
        )
        if state is None:
            self._enforce_budget(self._eligible(forest.roots))
        else:  # resume: the forest's leaf -> slot links come with it
            self.stats.set_state(state)
            self.rows_seen = int(state["rows_seen"])
            self._has_inactive = bool(state["has_inactive"])
            self._due = [np.asarray(state["pending_due"], dtype=np.int64)]
            buf = np.asarray(state["replay_buffer"], dtype=np.uint8)
            self._buf = _padded_buffer(*buf.shape)
            self._buf[:] = buf
            self._buf_len, self._buf_pos = (int(v) for v in state["replay_len_pos"])
            self.index_buffer()  # derived, not stored

    @property
    def leaf_budget(self) -> int:
        """Statistics slots allowed now: ``max_leaves``, or what the memory budget leaves."""
        if self.settings.max_leaves is not None:
            return self.settings.max_leaves
        free = (
            self.settings.memory_bytes
            - self.forest.nbytes
            - self._buf.nbytes
            - self._buf_bits.nbytes
            - self._buf_packed.nbytes
        )
        return max(0, free // self._slot_bytes)

    @property
    def budget_binds(self) -> bool:
        """Whether some leaf that may still split is denied statistics (by the budget, or
        retired at a count that could overflow until the budget gives it fresh ones)."""
        return self._has_inactive

    def _eligible(self, leaves: np.ndarray) -> np.ndarray:
        """The leaves that may still split: within the depth limit, in trees below the cap."""
        f = self.forest
        if self.settings.max_depth is not None:
            leaves = leaves[f.depth[leaves] < self.settings.max_depth]
        if self.settings.max_tree_leaves is not None:
            leaves = leaves[f.n_leaves()[f.tree[leaves]] < self.settings.max_tree_leaves]
        if self.trees is not None:
            leaves = leaves[np.isin(f.tree[leaves], self.trees)]
        return leaves

    def learn(self, rows: np.ndarray) -> None:
        """Learn from validated rows, in chunks between fixed stream positions (module
        docstring); the due leaves are looked at at each chunk's end. A chunk's count also
        writes it to the replay buffer and prepares the next chunk, on the side when it runs
        in parallel (:mod:`streammn.trees.pipeline`)."""
        start = 0
        n = rows.shape[0]
        prepared = None  # the chunk's bitmaps and lanes, when the last count prepared them
        while start < n:
            boundary = self._next_boundary()
            stop = min(n, start + boundary - self.rows_seen)
            ahead = rows[stop : stop + self._next_boundary(boundary) - boundary]  # next chunk
            due, prepared = self.stats.add_and_stage(
                rows[start:stop],
                prepared,
                ahead,
                self._look_gap,
                self.trees,
                (self._buf, self._buf_bits, self._buf_packed),
                self._buffer_runs(stop - start),
            )
            self._due.append(due)
            if self.forest.observed is not None:  # missing mode (streammn.trees.missing)
                missing.count_observed(
                    rows[start:stop], self.forest.roots, self.forest.links, self.forest.observed
                )
            self.rows_seen += stop - start
            start = stop
            if self.rows_seen == boundary:
                if self._rebuild_due():
                    self._rebuild()
                else:  # each slot once: halved counts (decay) can pass a look twice
                    self._grow(np.unique(np.concatenate(self._due)))
                self._due = []

    def _next_boundary(self, n: int | None = None) -> int:
        """The first chunk boundary after row count ``n`` (default ``rows_seen``): the next
        multiple of the spacing."""
        n = self.rows_seen if n is None else n
        spacing = self._spacing(n)
        return (n // spacing + 1) * spacing

    def _spacing(self, n: int) -> int:
        """Rows between chunk boundaries around row count ``n``: ``grace_period`` under a
        fixed kappa; with 'auto' ``grace_period * m``, ``m`` the largest power of two up to
        ``n / (CHUNK_FRACTION * grace_period)`` (at least 1, at most ``MAX_CHUNK_GRACES``).
        ``m`` doubles only at multiples of the doubled spacing, so every row count inside a
        chunk gives that chunk's end."""
        g = self.settings.grace_period
        if self.settings.kappa != AUTO:
            return g
        m = min(MAX_CHUNK_GRACES, max(1, n // (CHUNK_FRACTION * g)))
        return g << (m.bit_length() - 1)

    def _rebuild_due(self) -> bool:
        """Whether the chunk boundary just reached is a rebuild point: 'auto', no tree cap,
        rebuilds on, the buffer holding every row so far, and ``REBUILD_FIRST *
        REBUILD_GROWTH**k`` rows passed within the chunk that just ended, or the next boundary
        past the buffer."""
        n, W = self.rows_seen, self.settings.replay_rows
        if (
            self.settings.kappa != AUTO
            or self.settings.max_tree_leaves is not None
            or not self.rebuilds
            or not 0 < n <= W
        ):
            return False
        if self._last_rebuild_point(n):
            return True
        chunk_start = n - self._spacing(n - 1)
        point = REBUILD_FIRST
        while point <= n:
            if point > chunk_start:
                return True
            point *= REBUILD_GROWTH
        return False

    def _last_rebuild_point(self, n: int) -> bool:
        """Whether ``n`` rows is the last chunk boundary at which the buffer holds the whole
        stream (the next one lies past it)."""
        return n + self._spacing(n) > self.settings.replay_rows

    def _rebuild(self) -> None:
        """Regrow every tree exactly from the buffered rows (the whole stream so far), then
        give the new leaves statistics seeded from the same rows.

        Early splits are decided on few rows, and on data with many near-equivalent tests
        (mushrooms) the test that is best on the first hundred rows is often not the one that
        is best on all of them; a Hoeffding tree never revisits a split. While the stream fits
        in the buffer, exact growth on everything seen is affordable and is what one pass
        over a finite file of up to ``replay_rows`` rows should give, so it replaces the trees
        at doubling row counts. Each leaf of the rebuilt trees has had one look (the exact
        pass), so its looks go on from ``k = 2``. The new leaves keep the statistics the exact
        pass that decided them counted; the leaves too small to have been tried are counted
        last, by a replay of their parents. Costs an exact fit on the buffer; summed over the
        doubling points, about twice that for the full buffer, once per stream, less what each
        rebuild takes over from the last (:class:`rebuild_passes.BufferPasses`). Afterwards
        growth is plain Hoeffding growth."""
        f, st = self.forest, self.stats
        self.rebuild_count += 1
        rows = self._buf[: self._buf_len]
        fresh = Forest(f.schema, prior=f.prior)
        passes = BufferPasses(self._buf_bits, self._buf_packed[: self._buf_len], self._earlier)
        counted = []  # statistics of every node the exact passes counted (or derived)
        grow_level_wise(
            fresh,
            None,
            replace(self.settings, kappa=AUTO),
            max(1, self.leaf_budget),
            st.n_threads,
            count_pass=passes,
            on_stats=lambda *node_stats: counted.append(node_stats),
            max_rows=self.rows_seen,  # no count exceeds the rows seen
        )
        st.release_all()
        f.replace_with(fresh)
        if f.observed is not None:
            missing.recount_observed(f, [rows])
        self._has_inactive = False
        self._enforce_budget(self._eligible(f.leaves()))
        growth = EarlierGrowth(f, rows.shape[0], counted)
        # the leaves the exact passes counted keep those statistics; the others (too small to
        # be tried; every root was counted, so children of split nodes) are replayed
        was_counted = growth.chunk >= 0
        unknown = np.where(was_counted, -1, f.slot[: f.n_nodes]).astype(f.slot.dtype)
        passes.replay(st, np.unique(f.parent[np.flatnonzero(unknown >= 0)]), node_slot=unknown)
        known = np.flatnonzero(was_counted & (f.slot[: f.n_nodes] >= 0))
        growth.copy_to(st, known, f.slot[known])
        # kept for the next rebuild, if there is one, in statistics memory the slots leave free
        free = (self.leaf_budget - st.n_active) * self._slot_bytes
        last = self._last_rebuild_point(self.rows_seen)
        self._earlier = None if last or growth.nbytes > free else growth
        slots = np.flatnonzero(st.slot_node >= 0).astype(np.int64)
        st.n[slots] = st.tot[slots].sum(axis=1)
        st.attempts[slots] = 1
        self._schedule(slots)

    def _buffer_runs(self, n_rows: int) -> np.ndarray:
        """Where the replay ring buffer keeps the next ``n_rows`` rows of the stream (the last
        ``replay_rows`` of them, the rows before do not fit): at most two runs, up to the
        ring's end and then from its start, as (first row, buffer row, rows) for
        :func:`pipeline.remember <streammn.trees.pipeline.remember>`; the buffer's length
        and position move on past them."""
        W = self.settings.replay_rows
        kept = min(W, n_rows)
        first = n_rows - kept
        runs = np.zeros((2, 3), dtype=np.int64)
        n_runs = 0
        while kept:
            run = min(kept, W - self._buf_pos)
            runs[n_runs] = first, self._buf_pos, run
            n_runs += 1
            self._buf_pos = (self._buf_pos + run) % W
            self._buf_len = min(W, self._buf_len + run)
            first += run
            kept -= run
        return runs[:n_runs]

    def index_buffer(self) -> None:
        """Make the buffer's value bitmaps and packed rows from its rows (after they were
        restored or rewritten); the last rebuild's growth no longer describes them."""
        self._earlier = None
        self._buf_bits[:] = 0
        if self._buf_len:
            bits = leaf_counting.value_bits(
                self._buf[: self._buf_len], self.forest.max_card, not self.forest.schema.missing
            )
            self._buf_bits[:, :, : bits.shape[2]] = bits
            self.stats.pack(self._buf, 0, self._buf_len, self._buf_packed)

    def _grow(self, due: np.ndarray) -> None:
        """Attempt the due leaves; seed new children from the replay buffer, attempt those
        that got ``grace_period`` rows from it, and so on until no leaf splits."""
        st = self.stats
        while due.size:
            children = self._attempt_splits(due)
            if children.size == 0 or self._buf_len == 0:
                return
            parents = np.unique(self.forest.parent[children])
            st.replay(self._buf_packed[: self._buf_len], self._buf_bits, parents)
            slots = self.forest.slot[children]
            slots = np.sort(slots[slots >= 0]).astype(np.int64)
            due = slots[st.n[slots] - st.last_attempt[slots] >= self._look_gap]

    def _attempt_splits(self, due: np.ndarray) -> np.ndarray:
        """Try to split the leaves of the ``due`` slots; return all new children."""
        if due.size == 0:
            return np.zeros(0, dtype=np.int32)
        st = self.stats
        f = self.forest
        if self.settings.kappa == AUTO:  # significance, and relevance (see looks.passing)
            most = looks.begin(
                due, st.n, st.last_attempt, st.attempts, LOOK_GROWTH, self._first_look
            )
            bvar, bval, bgain, sgain, tcounts = st.score(due, self.settings.min_count)
            go = looks.passing(
                due,
                bvar,
                bgain,
                st.n,
                st.slot_target,
                st.attempts,
                self._significance.up_to(most),
                st.slot_node,
                f.counts,
                self.settings.min_gain_per_row * self.stream_weight,
            )
        else:  # the Hoeffding bound: best clear of the runner-up, or a near tie
            self._schedule(due)
            st.attempts[due] += 1
            bvar, bval, bgain, sgain, tcounts = st.score(due, self.settings.min_count)
            targets = st.slot_target[due]
            n = st.n[due].astype(np.float64)
            go = (bvar >= 0) & (bgain > self._penalty[targets])
            eps = np.sqrt(
                self._range[targets] ** 2 * math.log(1.0 / self.settings.delta) / (2.0 * n)
            )
            with np.errstate(invalid="ignore"):
                margin = (bgain - sgain) / n
            go &= (margin > eps) | (eps < self.settings.tau)
        if self.settings.max_tree_leaves is not None:
            go &= self._within_tree_cap(st.slot_node[due], bgain, go)
        self._retire_full_slots(due[~go])
        if not go.any():
            return np.zeros(0, dtype=np.int32)
        nodes = st.slot_node[due[go]]
        st.release(due[go])
        t_ids, f_ids = f.split(nodes, bvar[go], bval[go], tcounts[go])
        children = np.concatenate([t_ids, f_ids])
        if (
            self.settings.max_tree_leaves is not None
        ):  # trees now at the cap stop collecting statistics
            full = f.n_leaves() >= self.settings.max_tree_leaves
            leaves = f.leaves()
            capped = leaves[full[f.tree[leaves]] & (f.slot[leaves] >= 0)]
            st.release(f.slot[capped])
        self._enforce_budget(self._eligible(children))
        return children

    @property
    def stream_weight(self) -> float:
        """The rows the relevance floor measures a split's share against: every row seen
        (a forgetting grower counts its decayed weight instead)."""
        return self.rows_seen

    def _schedule(self, slots: np.ndarray) -> None:
        """Set when each slot is next looked at. Fixed kappa: after ``grace_period`` more rows.
        'auto': when its rows have grown by half (``LOOK_GROWTH``), and first at
        ``FIRST_LOOK`` rows (or two sides of ``min_count``): small leaves are looked at early,
        large ones rarely, so a leaf of ``n`` rows has had ``O(log n)`` looks and the alpha
        spent on them stays small."""
        st = self.stats
        if self.settings.kappa != AUTO:
            st.last_attempt[slots] = st.n[slots]
            return
        looks.schedule(slots, st.n, st.last_attempt, LOOK_GROWTH, self._first_look)

    def _activate(self, leaves: np.ndarray) -> None:
        self.stats.activate(leaves)
        self._schedule(self.forest.slot[leaves].astype(np.int64))

    def _within_tree_cap(self, nodes: np.ndarray, gain: np.ndarray, go: np.ndarray) -> np.ndarray:
        """Which of the splits that passed keep every tree within ``max_tree_leaves`` (each
        split adds one leaf): per tree, the largest gains first."""
        f = self.forest
        trees = f.tree[nodes]
        room = self.settings.max_tree_leaves - f.n_leaves()
        order = np.lexsort((-gain, trees))  # by tree, then by decreasing gain
        ranked = np.zeros(nodes.size, dtype=np.int64)
        passing = go[order]
        sorted_trees = trees[order]
        # rank of each passing split within its tree
        csum = np.cumsum(passing)
        first = np.searchsorted(sorted_trees, sorted_trees, side="left")
        before = np.where(first > 0, csum[first - 1], 0)
        ranked[order] = csum - before - 1
        return ranked < room[trees]

    def _retire_full_slots(self, slots: np.ndarray) -> None:
        """Stop collecting statistics at leaves that could overflow int32 before the next
        attempt (2**31 rows without a split); the budget may later give them fresh ones."""
        full = slots[self.stats.n[slots] > _FULL - MAX_CHUNK_GRACES * self.settings.grace_period]
        if full.size:
            self.stats.release(full)
            self._has_inactive = True

    def _enforce_budget(self, new_leaves: np.ndarray) -> None:
        """Activate ``new_leaves``; past ``max_leaves``, keep only the most promising active."""
        st = self.stats
        budget = self.leaf_budget
        if st.n_active + new_leaves.size <= budget and not self._has_inactive:
            self._activate(new_leaves)
            return
        f = self.forest
        leaves = self._eligible(f.leaves())
        counts = f.counts[leaves]
        promise = counts.sum(axis=1) - counts.max(axis=1)
        order = np.lexsort((leaves, -promise))  # most promising first, ties by node id
        keep = np.zeros(leaves.size, dtype=bool)
        keep[order[:budget]] = True
        active = f.slot[leaves] >= 0
        st.release(f.slot[leaves[active & ~keep]])
        self._activate(leaves[keep & ~active])
        self._has_inactive = bool((~keep).any())

    # state ----------------------------------------------------------------------------------
    def get_state(self) -> dict:
        state = self.stats.get_state()
        state["rows_seen"] = np.array(self.rows_seen, dtype=np.int64)
        state["has_inactive"] = np.array(self._has_inactive)
        # slots come due once per chunk; sorted, so the state does not depend on the batches
        state["pending_due"] = (
            np.unique(np.concatenate(self._due)) if self._due else np.zeros(0, dtype=np.int64)
        )
        state["replay_buffer"] = self._buf.copy()
        state["replay_len_pos"] = np.array([self._buf_len, self._buf_pos], dtype=np.int64)
        return state
