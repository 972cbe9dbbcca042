"""One-pass Hoeffding growth of all trees from a stream of row batches.

Every row updates the target counts of the leaf it reaches in every tree and, when that leaf is
active, its split statistics. Once ``grace_period`` new rows have reached an active leaf since
its last attempt, its best and second-best tests (second best: the best test on another
variable) are compared with the Hoeffding bound on the per-row gain,
``eps = sqrt(R^2 ln(1/delta) / (2 n))`` with ``R = ln(d)`` the range of the per-row
log-likelihood gain of a ``d``-valued target and ``n`` the rows in the leaf's statistics. The
leaf splits when ``best - second > eps`` or ``eps < tau``, and the best gain beats the structure
prior (:func:`~streammn.trees.stats.split_penalty`), as in exact mode. Children start with the
target counts the parent saw on their side and empty statistics.

Optional replay (``replay_rows > 0``): the last ``replay_rows`` rows of the stream are kept in a
ring buffer; a new leaf's statistics are seeded with the buffered rows that reach it, and a
seeded leaf with ``grace_period`` rows is attempted at once. Without it a child learns its split
only from rows arriving after its birth, which on short streams keeps trees shallow. Memory:
``replay_rows * n_vars`` bytes plus the current leaf of every buffered row in every tree
(``4 * replay_rows * n_vars``); cost: one extra routing per row, and a scan of the buffer for
every tree that split.

Rows are processed in chunks whose boundaries fall at multiples of ``grace_period`` rows of the
whole stream, so the model does not depend on how the stream was cut into batches.

``max_tree_leaves`` caps every tree: splits that would pass it are dropped (the largest gains
win) and a tree at the cap stops collecting split statistics, so model size and memory stay
bounded on an endless stream.

A memory budget of ``max_leaves`` active leaves holds: when splits exceed it, all leaves are
ranked by promise (rows the leaf's majority value misclassifies, as river does) and only the
most promising keep (or get fresh) statistics; the others still update their target counts.
"""

from __future__ import annotations

import math

import numpy as np

from streammn.trees import kernels
from streammn.trees.forest import Forest
from streammn.trees.stats import LeafStats, split_penalty


STATS_DTYPE = np.int32  # half the memory traffic of int64; see _retire_full_slots
_FULL = np.iinfo(STATS_DTYPE).max


class HoeffdingGrower:
    """Hoeffding-tree growth state for a :class:`Forest` (see module docstring).

    ``state`` (from :meth:`get_state`, with the forest restored from the same snapshot) resumes
    a grower exactly where it was.
    """

    def __init__(self, forest: Forest, kappa: float, grace_period: int, delta: float,
                 tau: float, min_count: int, max_depth, max_leaves: int,
                 replay_rows: int = 0, n_threads: int = 1, state: dict | None = None,
                 max_tree_leaves: int | None = None):
        self.forest = forest
        self.max_tree_leaves = max_tree_leaves
        self.kappa = kappa
        self.grace_period = int(grace_period)
        self.delta = delta
        self.tau = tau
        self.min_count = int(min_count)
        self.max_depth = max_depth
        self.max_leaves = int(max_leaves)
        self.rows_seen = 0
        self.stats = LeafStats(forest, capacity=self.max_leaves, dtype=STATS_DTYPE,
                               n_threads=n_threads)
        self._penalty = split_penalty(kappa, forest.cards)
        self._range = np.log(forest.cards.astype(np.float64))
        self._has_inactive = False  # some eligible leaf was denied statistics by the budget
        self._due = []  # due slots found since the last grace-period boundary
        self.replay_rows = int(replay_rows)
        self._buf = np.zeros((self.replay_rows, forest.schema.n_vars), dtype=np.uint8)
        self._buf_len = 0   # rows held (at most replay_rows)
        self._buf_pos = 0   # next row to overwrite
        # current leaf of every buffered row in every tree, kept up to date through splits
        self._buf_leaf = np.zeros((forest.schema.n_vars, self.replay_rows), dtype=np.int32)
        if state is None:
            self._enforce_budget(self._eligible(forest.roots))
        else:  # resume: the forest's leaf -> slot links come with it
            self.stats.set_state(state)
            self.rows_seen = int(state["rows_seen"])
            self._has_inactive = bool(state["has_inactive"])
            self._due = [np.asarray(state["pending_due"], dtype=np.int64)]
            self._buf = np.array(state["replay_buffer"], dtype=np.uint8)
            self._buf_len, self._buf_pos = (int(v) for v in state["replay_len_pos"])
            if self._buf_len:  # derived, not stored: the rows' leaves in the restored forest
                kernels.route_into(self._buf[:self._buf_len], forest.roots, forest.links,
                                   self._buf_leaf, 0)

    def _eligible(self, leaves: np.ndarray) -> np.ndarray:
        """The leaves that may still split: within the depth limit, in trees below the cap."""
        f = self.forest
        if self.max_depth is not None:
            leaves = leaves[f.depth[leaves] < self.max_depth]
        if self.max_tree_leaves is not None:
            leaves = leaves[f.n_leaves()[f.tree[leaves]] < self.max_tree_leaves]
        return leaves

    def learn(self, rows: np.ndarray) -> None:
        """Learn from validated rows, in chunks aligned to multiples of ``grace_period``."""
        g = self.grace_period
        start = 0
        n = rows.shape[0]
        while start < n:
            stop = min(n, start + g - self.rows_seen % g)
            due = self.stats.add(rows[start:stop], grace=g)
            self._due.append(due)
            self._remember(rows[start:stop])
            self.rows_seen += stop - start
            start = stop
            if self.rows_seen % g == 0:
                self._grow(np.sort(np.concatenate(self._due)))
                self._due = []

    def _remember(self, rows: np.ndarray) -> None:
        """Keep the last ``replay_rows`` rows of the stream in a ring buffer."""
        W = self.replay_rows
        rows = rows[-W:] if W else rows[:0]
        for part in (rows[:W - self._buf_pos], rows[W - self._buf_pos:]):
            self._buf[self._buf_pos:self._buf_pos + part.shape[0]] = part
            f = self.forest
            kernels.route_into(part, f.roots, f.links, self._buf_leaf, self._buf_pos)
            self._buf_pos = (self._buf_pos + part.shape[0]) % W if W else 0
        self._buf_len = min(W, self._buf_len + rows.shape[0])

    def _grow(self, due: np.ndarray) -> None:
        """Attempt the due leaves; seed new children from the replay buffer, attempt those
        that got ``grace_period`` rows from it, and so on until no leaf splits."""
        g = self.grace_period
        st = self.stats
        while due.size:
            children = self._attempt_splits(due)
            if children.size == 0 or self._buf_len == 0:
                return
            trees = np.unique(self.forest.tree[self.forest.parent[children]])
            st.replay(self._buf[:self._buf_len], self._buf_leaf, trees)
            slots = self.forest.slot[children]
            slots = np.sort(slots[slots >= 0]).astype(np.int64)
            due = slots[st.n[slots] - st.last_attempt[slots] >= g]

    def _attempt_splits(self, due: np.ndarray) -> np.ndarray:
        """Try to split the leaves of the ``due`` slots; return all new children."""
        if due.size == 0:
            return np.zeros(0, dtype=np.int32)
        st = self.stats
        f = self.forest
        n_stat = st.n
        st.last_attempt[due] = n_stat[due]
        bvar, bval, bgain, sgain, tcounts = st.score(due, self.min_count)
        targets = st.slot_target[due]
        n = n_stat[due].astype(np.float64)
        eps = np.sqrt(self._range[targets] ** 2 * math.log(1.0 / self.delta) / (2.0 * n))
        with np.errstate(invalid="ignore"):
            margin = (bgain - sgain) / n
        confident = (margin > eps) | (eps < self.tau)
        go = (bvar >= 0) & confident & (bgain > self._penalty[targets])
        if self.max_tree_leaves is not None:
            go &= self._within_tree_cap(st.slot_node[due], bgain, go)
        self._retire_full_slots(due[~go])
        if not go.any():
            return np.zeros(0, dtype=np.int32)
        nodes = st.slot_node[due[go]]
        st.release(due[go])
        t_ids, f_ids = f.split(nodes, bvar[go], bval[go], tcounts[go])
        children = np.concatenate([t_ids, f_ids])
        if self.max_tree_leaves is not None:  # trees now at the cap stop collecting statistics
            full = f.n_leaves() >= self.max_tree_leaves
            leaves = f.leaves()
            capped = leaves[full[f.tree[leaves]] & (f.slot[leaves] >= 0)]
            st.release(f.slot[capped])
        self._enforce_budget(self._eligible(children))
        return children

    def _within_tree_cap(self, nodes: np.ndarray, gain: np.ndarray,
                         go: np.ndarray) -> np.ndarray:
        """Which of the splits that passed keep every tree within ``max_tree_leaves`` (each
        split adds one leaf): per tree, the largest gains first."""
        f = self.forest
        trees = f.tree[nodes]
        room = self.max_tree_leaves - f.n_leaves()
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
        full = slots[self.stats.n[slots] > _FULL - self.grace_period]
        if full.size:
            self.stats.release(full)
            self._has_inactive = True

    def _enforce_budget(self, new_leaves: np.ndarray) -> None:
        """Activate ``new_leaves``; past ``max_leaves``, keep only the most promising active."""
        st = self.stats
        if st.n_active + new_leaves.size <= self.max_leaves and not self._has_inactive:
            st.activate(new_leaves)
            return
        f = self.forest
        leaves = self._eligible(f.leaves())
        counts = f.counts[leaves]
        promise = counts.sum(axis=1) - counts.max(axis=1)
        order = np.lexsort((leaves, -promise))  # most promising first, ties by node id
        keep = np.zeros(leaves.size, dtype=bool)
        keep[order[:self.max_leaves]] = True
        active = f.slot[leaves] >= 0
        st.release(f.slot[leaves[active & ~keep]])
        st.activate(leaves[keep & ~active])
        self._has_inactive = bool((~keep).any())

    # state ----------------------------------------------------------------------------------
    def get_state(self) -> dict:
        state = self.stats.get_state()
        state["rows_seen"] = np.array(self.rows_seen, dtype=np.int64)
        state["has_inactive"] = np.array(self._has_inactive)
        state["pending_due"] = (np.concatenate(self._due) if self._due
                                else np.zeros(0, dtype=np.int64))
        state["replay_buffer"] = self._buf.copy()
        state["replay_len_pos"] = np.array([self._buf_len, self._buf_pos], dtype=np.int64)
        return state
