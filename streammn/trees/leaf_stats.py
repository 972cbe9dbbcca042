"""Per-leaf split statistics both tree learners share.

:class:`LeafStats` owns the slots of the active leaves (see :mod:`streammn.trees.kernels` for
the layout), feeds batches through the accumulation kernel and scores each slot's best split;
:mod:`streammn.trees.criterion` decides whether that split's gain is enough.
"""

from __future__ import annotations

import functools

import numba
import numpy as np

from streammn.blas import blas_threads
from streammn.trees import leaf_counting, kernels, missing, pipeline, replay
from streammn.trees.forest import Forest

# A step runs on several threads when its estimated one-thread time reaches PARALLEL_NS: a
# parallel step first wakes the other threads (10-60 us) and waits for the slowest, so it
# gains only when its work is several times that. The estimates below are fitted to one-thread
# timings of every step of 1M-row default passes (16, 100 and 300 binary variables), so that
# one threshold serves all shapes. With the earlier flat cost per row and tree, a threshold
# low enough for the 100-variable passes to gain (3% at 500 us) also sent the 16-variable
# count parallel, where it lost 27%.
PARALLEL_NS = 400_000
TREE_NS = 2000  # the streaming count: a tree's fixed cost per batch (walk, groups, flushes) ...
ROW_BLOCK_NS = 1.5  # ... and per row and 64-lane block of its indicators
ROW_TREE_NS = 5  # exact mode's cached count of a row into a tree
SLOT_NS = 400  # scoring a slot: its fixed cost ...
SLOT_COLUMN_NS = 4  # ... and per indicator column
REPLAY_ROWS_PER_NS = 5  # the buffered rows a split node's replay scans in a nanosecond
PREPARED_ROWS = 16384  # batches up to this many rows are prepared in kept arrays (prepare)
GRAM_BLOCK = 8192  # rows per float32 block of add_at_roots: sums stay exact (< 2**24)
LOG_TABLE = 1 << 15  # split scoring looks up the logarithms of counts below this


@functools.cache
def _log_tables(prior: float, values: tuple) -> np.ndarray:
    """:func:`kernels.log_tables` of ``prior`` for targets of the cardinalities ``values``,
    made once per process and setting (every rebuild makes new statistics)."""
    return kernels.log_tables(prior, np.array(values, dtype=np.int64), LOG_TABLE)


@numba.njit(cache=True)
def _claim_slots(
    nodes, node_tree, node_slot, slot_node, slot_target, tot, stats, n, last_attempt, attempts
):
    """Give leaf ``nodes[i]`` the ``i``-th lowest free slot, emptied; False (and nothing
    changed) when there are fewer free slots than nodes. One scan that stops at the last slot
    it needs, where finding the free slots with numpy scanned them all at every split."""
    slots = np.empty(nodes.shape[0], dtype=np.int64)
    found = 0
    for s in range(slot_node.shape[0]):
        if found == nodes.shape[0]:
            break
        if slot_node[s] < 0:
            slots[found] = s
            found += 1
    if found < nodes.shape[0]:
        return False
    for i in range(nodes.shape[0]):
        s = slots[i]
        tot[s] = 0
        stats[s] = 0
        n[s] = 0
        last_attempt[s] = 0
        attempts[s] = 0
        slot_node[s] = nodes[i]
        slot_target[s] = node_tree[nodes[i]]
        node_slot[nodes[i]] = s
    return True


@numba.njit(cache=True)
def _derive_slots(slots, sibling_slots, parent_rows, parent_tot, parent_stats, tot, stats):
    """``tot[slots[i]]``, ``stats[slots[i]]``: row ``parent_rows[i]`` of ``parent_tot``,
    ``parent_stats`` minus the same of slot ``sibling_slots[i]``; one pass, no temporaries."""
    for i in range(slots.shape[0]):
        s, b, p = slots[i], sibling_slots[i], parent_rows[i]
        for y in range(tot.shape[1]):
            tot[s, y] = parent_tot[p, y] - tot[b, y]
            for k in range(stats.shape[2]):
                stats[s, y, k] = parent_stats[p, y, k] - stats[b, y, k]


@numba.njit(cache=True)
def _put_slots(slots, rows, from_tot, from_stats, tot, stats):
    """``tot[slots[i]]``, ``stats[slots[i]]``: row ``rows[i]`` of ``from_tot``,
    ``from_stats``; one pass, no temporaries."""
    for i in range(slots.shape[0]):
        s, r = slots[i], rows[i]
        for y in range(tot.shape[1]):
            tot[s, y] = from_tot[r, y]
            for k in range(stats.shape[2]):
                stats[s, y, k] = from_stats[r, y, k]


class LeafStats:
    """Statistics slots for up to ``capacity`` active leaves of a :class:`Forest`."""

    def __init__(self, forest: Forest, capacity: int, dtype=np.int64, n_threads: int | None = None):
        """``dtype`` of the counts: int64, or int32 when the caller keeps every slot below
        2**31 rows (Hoeffding mode, half the memory traffic). ``n_threads`` blocks of trees are
        counted in parallel (default: numba's thread count)."""
        self.forest = forest
        self.n_threads = numba.get_num_threads() if n_threads is None else int(n_threads)
        cards = forest.cards
        self.offsets = np.concatenate([[0], np.cumsum(cards - 1)[:-1]]).astype(np.int64)
        self.K = int((cards - 1).sum())
        self._lane_blocks = max(1, -(-self.K // leaf_counting.LANE_BLOCK))  # of the count's lanes
        # kept value bitmaps and indicator lanes, written over batch after batch: those of
        # prepare, then two that add_and_stage prepares the next chunk in, in turn
        self._kept = [
            (
                np.zeros((forest.schema.n_vars, forest.max_card, 0), dtype=np.uint64),
                leaf_counting.aligned_zeros(0, self._lane_blocks * leaf_counting.LANE_BLOCK),
            )
            for _ in range(3)
        ]
        self._stage_turn = 0  # the kept arrays add_and_stage prepared in last: 1 + turn
        self.missing = forest.schema.missing  # see streammn.trees.missing
        self.binary = bool((cards == 2).all()) and not self.missing
        self._all_trees = np.arange(forest.schema.n_vars, dtype=np.int64)
        self.capacity = int(capacity)
        self.dtype = np.dtype(dtype)
        self.tot = np.zeros((0, forest.max_card), dtype=self.dtype)
        self.stats = np.zeros((0, forest.max_card, self.K), dtype=self.dtype)
        self.slot_node = np.zeros(0, dtype=np.int32)  # node owning the slot, -1 when free
        self.slot_target = np.zeros(0, dtype=np.int32)  # that node's tree (target variable)
        self.n = np.zeros(0, dtype=np.int64)  # rows counted in the slot
        self.last_attempt = np.zeros(0, dtype=np.int64)  # self.n at the last split attempt
        self.attempts = np.zeros(0, dtype=np.int64)  # split attempts on this slot's rows
        # the logarithms scoring takes of counts (kernels.log_tables), at the first score
        self._logs: np.ndarray | None = None
        self._log_row = np.zeros(forest.max_card + 1, dtype=np.int64)

    @staticmethod
    def slot_bytes(forest: Forest, dtype=np.int64) -> int:
        """Memory one active leaf's statistics take."""
        K = int((forest.cards - 1).sum())
        return np.dtype(dtype).itemsize * forest.max_card * (K + 1) + 24

    @property
    def n_active(self) -> int:
        return int((self.slot_node >= 0).sum())

    def indicators(self, rows: np.ndarray) -> np.ndarray:
        if self.binary:
            return rows
        if self.missing:
            return missing.indicator_matrix(rows, self.forest.cards, self.offsets, self.K)
        return kernels.indicator_matrix(rows, self.forest.cards, self.offsets, self.K)

    def activate(self, nodes: np.ndarray) -> None:
        """Give each leaf in ``nodes`` an empty slot (reusing free slots, then growing).

        The caller keeps the number of active leaves within the memory budget.
        """
        nodes = np.asarray(nodes, dtype=np.int32)
        if nodes.size == 0:
            return
        f = self.forest
        args = (nodes, f.tree, f.slot)
        if not _claim_slots(*args, *self._slot_arrays()):
            self._grow(self.slot_node.shape[0] + nodes.size - (self.slot_node < 0).sum())
            _claim_slots(*args, *self._slot_arrays())

    def _slot_arrays(self):
        """The per-slot arrays, in :func:`_claim_slots`' order."""
        return (
            self.slot_node,
            self.slot_target,
            self.tot,
            self.stats,
            self.n,
            self.last_attempt,
            self.attempts,
        )

    def derive(
        self,
        slots: np.ndarray,
        sibling_slots: np.ndarray,
        parent_tot: np.ndarray,
        parent_stats: np.ndarray,
        parent_rows: np.ndarray,
    ) -> None:
        """Give each of ``slots`` the statistics in row ``parent_rows[i]`` of ``parent_tot``
        and ``parent_stats`` minus those of ``sibling_slots[i]``: sibling subtraction
        (integer counts, exact), in one pass without numpy's gathered temporaries."""
        _derive_slots(
            slots.astype(np.int64),
            sibling_slots.astype(np.int64),
            parent_rows.astype(np.int64),
            parent_tot,
            parent_stats,
            self.tot,
            self.stats,
        )

    def put(self, slots: np.ndarray, tot: np.ndarray, stats: np.ndarray, rows: np.ndarray) -> None:
        """Give each of ``slots`` the statistics in row ``rows[i]`` of ``tot`` and ``stats``
        (statistics counted before), in one pass without numpy's gathered temporaries."""
        _put_slots(slots.astype(np.int64), rows.astype(np.int64), tot, stats, self.tot, self.stats)

    def release(self, slots: np.ndarray) -> None:
        """Free the given slots; their leaves keep their counts but stop collecting stats."""
        slots = np.asarray(slots, dtype=np.int64)
        if slots.size == 0:
            return
        self.forest.slot[self.slot_node[slots]] = -1
        self.slot_node[slots] = -1

    def release_all(self) -> None:
        self.release(np.flatnonzero(self.slot_node >= 0))

    def _grow(self, size: int) -> None:
        old = self.slot_node.shape[0]
        size = min(max(size, 2 * old, 16), max(size, self.capacity))
        C = self.forest.max_card
        for name, shape, fill, dtype in (
            ("tot", (size, C), 0, self.dtype),
            ("stats", (size, C, self.K), 0, self.dtype),
            ("slot_node", (size,), -1, np.int32),
            ("slot_target", (size,), 0, np.int32),
            ("n", (size,), 0, np.int64),
            ("last_attempt", (size,), 0, np.int64),
            ("attempts", (size,), 0, np.int64),
        ):
            # zeros come from fresh pages, not written: a big statistics array costs only
            # the pages its slots use
            grown = np.zeros(shape, dtype=dtype) if fill == 0 else np.full(shape, fill, dtype)
            grown[:old] = getattr(self, name)
            setattr(self, name, grown)

    def prepare(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What :meth:`add` derives from ``rows`` (their value bitmaps and indicator lanes,
        see :mod:`streammn.trees.leaf_counting`), for a caller that adds the same rows again.

        Up to ``PREPARED_ROWS`` rows, both are written over the last call's, in arrays this
        object keeps (valid until the next call), which stay in the caches from batch to
        batch: arrays made anew for every batch (zeroed, at other addresses) cost 3% of a
        default pass at 100 binary variables."""
        if rows.shape[0] > PREPARED_ROWS:  # big batches (exact passes): arrays of their own
            return (
                leaf_counting.value_bits(rows, self.forest.max_card, not self.missing),
                leaf_counting.lanes(self.indicators(rows)),
            )
        bits, lanes = self._kept_arrays(0, rows)
        pipeline.prepare(rows, self.indicators(rows), not self.missing, bits, lanes)
        return bits, lanes

    def _kept_arrays(self, i: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Kept arrays ``i`` (see ``__init__``) shaped for the value bitmaps and lanes of
        ``rows`` (at most ``PREPARED_ROWS``), made bigger when they are too small."""
        bits, lanes = self._kept[i]
        n = rows.shape[0]
        if lanes.shape[0] < n:
            rows_kept = max(n, min(PREPARED_ROWS, 2 * lanes.shape[0]))
            lanes = leaf_counting.aligned_zeros(rows_kept, lanes.shape[1])
        W = (n + 63) // 64
        if bits.shape[2] != W:
            bits = np.empty((rows.shape[1], self.forest.max_card, W), dtype=np.uint64)
        self._kept[i] = bits, lanes
        return bits, lanes[:n]

    def add(
        self,
        rows: np.ndarray,
        grace: int = 0,
        count_leaves: bool = True,
        trees: np.ndarray | None = None,
        node_slot: np.ndarray | None = None,
        prepared: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """Route ``rows`` through the given trees (default all) and count them at their leaves
        (target counts of every leaf when ``count_leaves``, statistics of active leaves); with
        ``grace > 0`` return the slots whose rows since ``last_attempt`` reached exactly
        ``grace`` during the call (each slot at most once, as the count passes it once; in
        no particular order).
        ``node_slot``: count only at the leaves it gives a slot (default: every active leaf);
        ``prepared``: :meth:`prepare` of ``rows``."""
        due, count = self._count_args(rows, grace, count_leaves, trees, node_slot, prepared)
        if due.shape[0] == 1:
            return due[0, : leaf_counting.accumulate(count)]
        return due[0, : leaf_counting.accumulate_parallel(count)]

    def _count_args(
        self,
        rows: np.ndarray,
        grace: int,
        count_leaves: bool,
        trees: np.ndarray | None,
        node_slot: np.ndarray | None,
        prepared: tuple[np.ndarray, np.ndarray] | None,
    ) -> tuple[np.ndarray, leaf_counting.Count]:
        """The count of :meth:`add` (a :class:`leaf_counting.Count`), with its array of due
        slots, one row per parallel block."""
        f = self.forest
        if self.tot.shape[0] == 0:  # kernels need at least one (unused) slot row
            self._grow(1)
        if trees is None:
            trees = self._all_trees
        n_blocks = self._count_blocks(rows.shape[0], trees)
        due = np.empty((n_blocks, self.slot_node.shape[0] if grace > 0 else 1), dtype=np.int64)
        bits, lanes = self.prepare(rows) if prepared is None else prepared
        n = f.n_nodes
        return due, leaf_counting.Count(
            rows=rows,
            bits=bits,
            lanes=lanes,
            K=self.K,
            cards=f.cards,
            trees=trees,
            roots=f.roots,
            links=f.links,
            node_tree=f.tree[:n],
            node_depth=f.depth[:n],
            node_slot=f.slot if node_slot is None else node_slot,
            node_counts=f.counts,
            count_leaves=count_leaves,
            tot=self.tot,
            stats=self.stats,
            slot_n=self.n,
            slot_last=self.last_attempt,
            grace=grace,
            due=due,
        )

    def add_and_stage(
        self,
        rows: np.ndarray,
        prepared: tuple[np.ndarray, np.ndarray] | None,
        ahead: np.ndarray,
        grace: int,
        trees: np.ndarray | None,
        buffer: tuple[np.ndarray, np.ndarray, np.ndarray],
        runs: np.ndarray,
    ) -> tuple[np.ndarray, tuple | None]:
        """:meth:`add` of ``rows`` (``prepared``: their :meth:`prepare`, or None), which also
        writes them to a replay buffer (``buffer``: its rows, value bitmaps and packed rows;
        ``runs``: where, see :func:`pipeline.remember`) and prepares the rows ``ahead`` (the
        next chunk), inside the count's parallel step when it has one
        (:mod:`streammn.trees.pipeline`). Returns the due slots and the prepared arrays of
        ``ahead`` (valid until the call after next), or None when they were not prepared: the
        count ran on one thread, or a chunk was too big for kept arrays."""
        rows = np.ascontiguousarray(rows)  # (as pipeline.remember reads them)
        n_blocks = self._count_blocks(rows.shape[0], self._all_trees if trees is None else trees)
        staged = (
            n_blocks > 1
            and 0 < ahead.shape[0]
            and max(rows.shape[0], ahead.shape[0]) <= PREPARED_ROWS
        )
        if prepared is None:
            prepared = self.prepare(rows)
        if not staged:
            due = self.add(rows, grace=grace, trees=trees, prepared=prepared)
            pipeline.remember(rows, prepared[0], *buffer, runs, self.forest.cards, self.offsets)
            return due, None
        self._stage_turn = 1 - self._stage_turn  # not the arrays ``prepared`` may be
        ahead_bits, ahead_lanes = self._kept_arrays(1 + self._stage_turn, ahead)
        due, count = self._count_args(rows, grace, True, trees, None, prepared)
        n_due = pipeline.count_and_stage(
            count,
            ahead,
            self.indicators(ahead),
            not self.missing,
            ahead_bits,
            ahead_lanes,
            *buffer,
            runs,
            self.offsets,
        )
        return due[0, :n_due], (ahead_bits, ahead_lanes)

    def add_at_roots(self, rows: np.ndarray, trees: np.ndarray) -> None:
        """Add ``rows`` to the statistics of the roots of ``trees`` (which must hold slots), as
        a co-occurrence count: at a root, ``stats[s, y, k]`` counts the rows with ``x_t = y``
        and indicator ``k``, which for ``y >= 1`` is entry ``(offsets[t] + y - 1, k)`` of the
        indicator matrix's Gram matrix ``I.T @ I`` and for ``y = 0`` the column sums minus the
        other values. One BLAS product per block of rows instead of a pass over every tree:
        the first pass of exact growth costs no more than ``X.T @ X``. Exact: the products of
        0/1 entries are summed in float32 over at most ``GRAM_BLOCK`` rows, so every partial
        sum is an integer below 2**24. The column sums are the Gram matrix's diagonal (an
        indicator is its own square)."""
        f = self.forest
        if self.tot.shape[0] == 0:
            self._grow(1)
        cards, offsets = f.cards, self.offsets
        gram = np.zeros((self.K, self.K), dtype=np.int64)
        n_rows = np.full(f.schema.n_vars, rows.shape[0], dtype=np.int64)  # target observed
        miss_by_col = np.zeros((f.schema.n_vars, self.K), dtype=np.int64)
        # one BLAS thread whatever n_threads: the blocks' products are too small to gain from
        # two (measured: slower), and BLAS threads that spin after a product fight the
        # learner's own threads for the cores (8x slower with another job running)
        with blas_threads(1):
            for start in range(0, rows.shape[0], GRAM_BLOCK):
                block_rows = rows[start : start + GRAM_BLOCK]
                block = self.indicators(block_rows).astype(np.float32)
                gram += (block.T @ block).astype(np.int64)
                if self.missing:
                    n_missing, with_col = missing.missing_by_indicator(block_rows, block)
                    n_rows -= n_missing
                    miss_by_col += with_col
        colsum = gram.diagonal()
        for t in trees:
            s = f.slot[f.roots[t]]
            d, first = cards[t], offsets[t]
            by_value = gram[first : first + d - 1]  # rows with x_t = 1 .. d-1
            self.stats[s, 1:d] += by_value.astype(self.dtype)
            self.stats[s, 0] += (colsum - by_value.sum(axis=0) - miss_by_col[t]).astype(self.dtype)
            n_value = colsum[first : first + d - 1]
            self.tot[s, 1:d] += n_value.astype(self.dtype)
            self.tot[s, 0] += n_rows[t] - n_value.sum()

    def count_roots(self, bits: np.ndarray, n_rows: int, trees: np.ndarray, first: int = 0) -> None:
        """Add the rows ``first .. n_rows - 1`` of which ``bits`` are the value bitmaps
        (:func:`leaf_counting.value_bits`) to the statistics of the roots of ``trees`` (which must
        hold slots), from the bitmaps (:func:`replay.count_roots`): :meth:`add_at_roots` for
        rows whose bitmaps are at hand."""
        f = self.forest
        if self.tot.shape[0] == 0:
            self._grow(1)
        trees = np.asarray(trees, dtype=np.int64)
        replay.count_roots(
            bits,
            n_rows,
            first,
            trees,
            f.slot[f.roots[trees]].astype(np.int64),
            f.cards,
            self.offsets,
            self.tot,
            self.stats,
        )

    def add_cached(
        self,
        rows: np.ndarray,
        trees: np.ndarray,
        row_node: np.ndarray,
        node_slot: np.ndarray | None = None,
    ) -> None:
        """Exact mode: add ``rows`` to the active leaves' statistics, moving each row down
        from its remembered node ``row_node[t, r]`` (updated in place). ``node_slot``: count
        only at the leaves it gives a slot (default: every active leaf, the forest's slots)."""
        f = self.forest
        if self.tot.shape[0] == 0:
            self._grow(1)
        n_blocks = self._blocks(trees.shape[0], rows.shape[0] * trees.shape[0] * ROW_TREE_NS)
        args = (
            rows,
            self.indicators(rows),
            trees,
            f.links,
            f.slot if node_slot is None else node_slot,
            self.tot,
            self.stats,
            row_node,
        )
        # a parallel launch costs milliseconds on a busy machine
        count = kernels.accumulate_cached if n_blocks == 1 else kernels.accumulate_cached_parallel
        count(*args, n_blocks)

    def replay(
        self,
        packed: np.ndarray,
        bits: np.ndarray,
        parents: np.ndarray,
        node_slot: np.ndarray | None = None,
        first: int = 0,
    ) -> None:
        """Add the past rows (``packed``: their indicator vectors as bits,
        :func:`replay.pack_rows`; ``bits``: their :func:`leaf_counting.value_bits`; from row
        ``first`` on) that reach the just-split nodes ``parents`` to their children's
        statistics (see :func:`replay.replay`). ``node_slot``: count only at the children it
        gives a slot (default: every active child, the forest's slots)."""
        n = packed.shape[0]
        if n <= first or parents.size == 0:
            return
        f = self.forest
        job = replay.Replay(
            packed=packed,
            bits=bits,
            n=n,
            offsets=self.offsets,
            parents=parents.astype(np.int64),
            links=f.links,
            node_parent=f.parent,
            node_tree=f.tree,
            cards=f.cards,
            node_slot=f.slot if node_slot is None else node_slot,
            tot=self.tot,
            stats=self.stats,
            slot_n=self.n,
            first=first,
        )
        n_blocks = self._blocks(parents.size, (n - first) * parents.size // REPLAY_ROWS_PER_NS)
        # a parallel launch wakes (and spins) every thread
        kernel = replay.replay if n_blocks == 1 else replay.replay_parallel
        kernel(job, n_blocks)

    def pack(self, rows: np.ndarray, first: int, count: int, packed: np.ndarray) -> None:
        """Pack rows ``first .. first + count - 1`` of ``rows`` into the same rows of
        ``packed`` (:func:`replay.pack_rows`, ``replay.packed_words(self.K)`` words a row;
        ``rows`` must be followed by 63 readable bytes)."""
        replay.pack_rows(rows, first, count, self.forest.cards, self.offsets, packed)

    def score(self, slots: np.ndarray, min_count: int):
        """Best split of each slot: see :func:`kernels.score_slots`."""
        slots = np.asarray(slots, dtype=np.int64)
        if self._logs is None:
            values = np.unique(self.forest.cards)
            self._logs = _log_tables(float(self.forest.prior), tuple(values.tolist()))
            self._log_row[values] = np.arange(1, values.size + 1)
        cards = self.forest.cards
        args = (
            slots,
            self.slot_target,
            self.tot,
            self.stats,
            cards,
            self.offsets,
            int(min_count),
            self.forest.prior,
            not self.missing,
            self._logs,
            self._log_row,
            bool((cards == 2).all()),
        )
        n_blocks = self._blocks(slots.size, slots.size * (SLOT_NS + self.K * SLOT_COLUMN_NS))
        score = kernels.score_slots if n_blocks == 1 else kernels.score_slots_parallel
        return score(*args, n_blocks)

    def _count_blocks(self, n_rows: int, trees: np.ndarray) -> int:
        """Blocks the count of ``n_rows`` rows into ``trees`` runs in (see :meth:`_blocks`)."""
        work = trees.shape[0] * (TREE_NS + n_rows * self._lane_blocks * ROW_BLOCK_NS)
        return self._blocks(trees.shape[0], int(work))

    def _blocks(self, n_items: int, work_ns: int) -> int:
        """Blocks a parallel kernel cuts ``n_items`` independent items into, given the call's
        estimated one-thread time ``work_ns``. One when that is below ``PARALLEL_NS``: a
        parallel step waits for all its threads, and on a busy machine a descheduled thread
        costs more than a small step saves. Otherwise one per thread, but no more than the
        items, and none with less than half of ``PARALLEL_NS`` of work (many cores)."""
        if work_ns < PARALLEL_NS:
            return 1
        shares = work_ns // max(1, PARALLEL_NS // 2)
        return max(1, min(self.n_threads, n_items, shares))

    # state ----------------------------------------------------------------------------------
    def get_state(self) -> dict[str, np.ndarray]:
        return {
            "slot_tot": self.tot.copy(),
            "slot_stats": self.stats.copy(),
            "slot_node": self.slot_node.copy(),
            "slot_target": self.slot_target.copy(),
            "slot_n": self.n.copy(),
            "slot_last_attempt": self.last_attempt.copy(),
            "slot_attempts": self.attempts.copy(),
        }

    def set_state(self, state: dict) -> None:
        self.tot = np.array(state["slot_tot"], dtype=self.dtype)
        self.stats = np.array(state["slot_stats"], dtype=self.dtype)
        self.slot_node = np.array(state["slot_node"], dtype=np.int32)
        self.slot_target = np.array(state["slot_target"], dtype=np.int32)
        self.n = np.array(state["slot_n"], dtype=np.int64)
        self.last_attempt = np.array(state["slot_last_attempt"], dtype=np.int64)
        # states written before attempts were counted: one attempt per ``last_attempt`` > 0
        self.attempts = np.array(state.get("slot_attempts", self.last_attempt > 0), dtype=np.int64)
