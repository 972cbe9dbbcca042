"""A forest of probabilistic decision trees stored as flat node arrays.

One tree per variable ``t`` predicts ``X_t`` from the others. All trees share one set of node
arrays so that numba kernels route a whole batch through every tree at once. Routing reads
``links[node] = (var, val, true, false)``, packed so that one step touches one cache line::

    var[node]      tested variable j, or -1 at a leaf          (views of the links columns)
    val[node]      tested value a (the test is X_j = a)
    true[node]     child taken when X_j = a      false[node]   child taken otherwise
    parent[node]   parent node (-1 at a root)    depth[node]   0 at a root
    tree[node]     the tree (= target variable) the node belongs to
    counts[node, y]  training rows at the node with target value y
    slot[node]     statistics slot of an active leaf, or -1

Leaves hold a Dirichlet-smoothed multinomial over the target: ``P(y) = (counts[y] + prior/d) /
(n + prior)`` with ``d`` the target's cardinality; ``prior=1`` is Libra's ``(count + 1/d) /
(total + 1)``, ``prior=d`` the paper's Dirichlet(alpha=1).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.kernel_mode import serial_kernels_only
from streammn.schema import Schema
from streammn.trees import kernels

_LINKS = ("var", "val", "true", "false")
SCORE_CHUNK_ROWS = 1024  # left_out_log_prob scores this many rows at a time
_NODE_FIELDS = ("parent", "depth", "tree", "slot")


class Forest:
    """All trees of a DTSL model; grows by splitting leaves, never shrinks."""

    def __init__(self, schema: Schema, prior: float = 1.0, capacity: int = 1024):
        self.schema = schema
        self.prior = float(prior)
        self.cards = schema.cardinalities.astype(np.int32)
        self.max_card = int(self.cards.max())
        n = schema.n_vars
        capacity = max(capacity, 2 * n)
        self.links = np.full((capacity, 4), -1, dtype=np.int32)
        self.links[:, 1] = 0
        self.parent = np.full(capacity, -1, dtype=np.int32)
        self.depth = np.zeros(capacity, dtype=np.int32)
        self.tree = np.zeros(capacity, dtype=np.int32)
        self.slot = np.full(capacity, -1, dtype=np.int32)
        self.counts = np.zeros((capacity, self.max_card), dtype=np.int64)
        # missing mode: leaf counts of the rows whose path tests were all observed, the
        # leaf distributions (streammn.trees.missing); None otherwise
        self.observed = np.zeros_like(self.counts) if schema.missing else None
        self.n_nodes = n
        self.roots = np.arange(n, dtype=np.int32)
        self.tree[:n] = self.roots

    var = property(lambda self: self.links[:, 0])
    val = property(lambda self: self.links[:, 1])
    true = property(lambda self: self.links[:, 2])
    false = property(lambda self: self.links[:, 3])

    # growth ---------------------------------------------------------------------------------
    def _reserve(self, extra: int) -> None:
        need = self.n_nodes + extra
        cap = self.links.shape[0]
        if need <= cap:
            return
        new_cap = max(need, 2 * cap)
        links = np.full((new_cap, 4), -1, dtype=np.int32)
        links[:, 1] = 0
        links[:cap] = self.links
        self.links = links
        for name in _NODE_FIELDS:
            old = getattr(self, name)
            fill = -1 if name in ("parent", "slot") else 0
            grown = np.full(new_cap, fill, dtype=old.dtype)
            grown[:cap] = old
            setattr(self, name, grown)
        grown = np.zeros((new_cap, self.max_card), dtype=np.int64)
        grown[:cap] = self.counts
        self.counts = grown
        if self.observed is not None:
            grown = np.zeros_like(self.counts)
            grown[:cap] = self.observed
            self.observed = grown

    def split(self, nodes, var, val, true_counts) -> tuple[np.ndarray, np.ndarray]:
        """Split the given leaves on ``X_var = val``; children get their share of the counts.

        ``true_counts[i]`` are the target counts of leaf ``nodes[i]``'s rows with
        ``X_var = val``; the false child gets the rest. Returns the (true, false) child ids.
        """
        nodes = np.asarray(nodes, dtype=np.int32)
        k = nodes.shape[0]
        self._reserve(2 * k)
        first = self.n_nodes
        self.n_nodes += 2 * k
        observed = self.observed
        _link_children(
            nodes,
            np.asarray(var),
            np.asarray(val),
            np.asarray(true_counts, dtype=np.int64),
            first,
            self.links,
            self.parent,
            self.depth,
            self.tree,
            self.counts,
            self.counts if observed is None else observed,
            observed is not None,
        )
        t_ids = np.arange(first, first + 2 * k, 2, dtype=np.int32)
        f_ids = t_ids + 1
        return t_ids, f_ids

    def replace_with(self, other: "Forest") -> None:
        """Become a copy of ``other`` (same schema and prior), in place, so that everything
        holding this forest sees the new trees (a Hoeffding grower rebuilding its trees)."""
        for name in ("links", "counts", "observed") + _NODE_FIELDS:
            value = getattr(other, name)
            setattr(self, name, None if value is None else value.copy())
        self.n_nodes = other.n_nodes

    # reading --------------------------------------------------------------------------------

    def leaves(self, t: int | None = None) -> np.ndarray:
        """Leaf node ids, of one tree or of all trees, in increasing id order."""
        n = self.n_nodes
        mask = self.var[:n] < 0
        if t is not None:
            mask &= self.tree[:n] == t
        return np.flatnonzero(mask).astype(np.int32)

    def marked(self, nodes: np.ndarray) -> np.ndarray:
        """A flag per node, set at ``nodes``: ``marked(b)[a]`` is ``np.isin(a, b)`` for node
        ids, without the sort (or table) ``np.isin`` makes on every call, which level-wise
        growth and rebuilds make hundreds of times."""
        flags = np.zeros(self.n_nodes, dtype=bool)
        flags[nodes] = True
        return flags

    def log_probs(self, cards: np.ndarray | None = None) -> np.ndarray:
        """Smoothed ``log P(y)`` at every node, shape (n_nodes, max card); -inf past card.
        ``cards``: cardinalities at least the forest's, whose values past the forest's have
        no counts (a growing schema scoring values it has not added yet, trees.growth)."""
        n = self.n_nodes
        cards = self.cards if cards is None else cards
        width = int(cards.max())
        d = cards[self.tree[:n]].astype(np.float64)[:, None]
        c = np.zeros((n, width))
        c[:, : self.max_card] = (self.counts if self.observed is None else self.observed)[:n]
        tot = c.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore"):
            out = np.log(c + self.prior / d) - np.log(tot + self.prior)
        out[np.arange(width)[None, :] >= d] = -np.inf
        return out

    def route(self, rows: np.ndarray) -> np.ndarray:
        """Leaf reached by every row in every tree, shape (n_rows, n_trees) (serially in a
        forked snapshot writer: :mod:`streammn.kernel_mode`)."""
        route = kernels.route_serial if serial_kernels_only() else kernels.route
        return route(rows, self.roots, self.links)

    def leaf_log_prob(self, rows: np.ndarray, cards: np.ndarray | None = None) -> np.ndarray:
        """``log P(x_t | x_-t)`` under every tree ``t``: shape (n_rows, n_vars); ``cards`` as
        in :meth:`log_probs`."""
        return kernels.leaf_log_prob(rows, self.roots, self.links, self.log_probs(cards))

    def left_out_log_prob(self, rows: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Like :meth:`leaf_log_prob`, with each leaf's counts leaving ``rows`` out (clipped at
        zero: a stream's leaf may not have counted a row that reaches it now): how the leaves
        score rows they did not learn from, as far as their counts go (the tests were chosen
        with them). ``weights``: what each row still counts for (forgetting halves old rows,
        :mod:`streammn.trees.decay`); default 1."""
        counts = (self.counts if self.observed is None else self.observed)[: self.n_nodes]
        own = np.zeros_like(counts, dtype=np.float64)
        pieces = range(0, rows.shape[0], SCORE_CHUNK_ROWS)  # bounded temporaries, same result
        for a in pieces:
            part = rows[a : a + SCORE_CHUNK_ROWS]
            weight = 1.0 if weights is None else weights[a : a + SCORE_CHUNK_ROWS, None]
            np.add.at(own, (self.route(part), part.astype(np.int64)), weight)
        left = np.maximum(counts - own, 0.0)
        out = np.empty(rows.shape, dtype=np.float64)
        for a in pieces:
            part = rows[a : a + SCORE_CHUNK_ROWS]
            leaves, targets = self.route(part), part.astype(np.int64)
            d = self.cards[self.tree[leaves]].astype(np.float64)
            mine = left[leaves, targets]
            total = left[leaves].sum(axis=2)
            log_total = np.log(total + self.prior)
            out[a : a + SCORE_CHUNK_ROWS] = np.log(mine + self.prior / d) - log_total
        return out

    def path(self, node: int) -> list[tuple[int, int, bool]]:
        """Test outcomes from the root down to ``node``: ``(var, value, outcome)`` triples."""
        out = []
        while self.parent[node] >= 0:
            p = self.parent[node]
            out.append((int(self.var[p]), int(self.val[p]), bool(self.true[p] == node)))
            node = p
        out.reverse()
        return out

    # statistics -----------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        """Memory the nodes take (``n_nodes`` of them, not the allocated capacity, so that a
        budget computed from it does not depend on the order in which the arrays grew)."""
        per_node = sum(
            a.itemsize * (a.size // a.shape[0])
            for a in (self.links, self.parent, self.depth, self.tree, self.slot, self.counts)
        )
        return self.n_nodes * per_node

    def n_leaves(self) -> np.ndarray:
        n = self.n_nodes
        return np.bincount(self.tree[:n][self.var[:n] < 0], minlength=self.schema.n_vars)

    def depths(self) -> np.ndarray:
        """Depth of each tree (0 for a single leaf)."""
        n = self.n_nodes
        out = np.zeros(self.schema.n_vars, dtype=np.int64)
        np.maximum.at(out, self.tree[:n], self.depth[:n])
        return out

    def leaf_rows(self, t: int) -> np.ndarray:
        """Rows counted at each leaf of tree ``t`` (in :meth:`leaves` order)."""
        return self.counts[self.leaves(t)].sum(axis=1)

    # state ----------------------------------------------------------------------------------
    def get_state(self) -> dict[str, np.ndarray]:
        n = self.n_nodes
        state = {f"node_{name}": getattr(self, name)[:n].copy() for name in _LINKS + _NODE_FIELDS}
        state["node_counts"] = self.counts[:n].copy()
        if self.observed is not None:
            state["node_observed"] = self.observed[:n].copy()
        return state

    @classmethod
    def from_state(cls, schema: Schema, prior: float, state: dict) -> "Forest":
        n = int(state["node_var"].shape[0])
        forest = cls(schema, prior=prior, capacity=max(n, 1024))
        for name in _LINKS + _NODE_FIELDS:
            getattr(forest, name)[:n] = state[f"node_{name}"]
        forest.counts[:n] = state["node_counts"]
        if forest.observed is not None:
            forest.observed[:n] = state["node_observed"]
        forest.n_nodes = n
        return forest

    def equals(self, other: "Forest") -> bool:
        a, b = self.get_state(), other.get_state()
        return self.prior == other.prior and all(np.array_equal(a[k], b[k]) for k in a)


@nb.njit(cache=True)
def _link_children(
    nodes, var, val, true_counts, first, links, parent, depth, tree, counts, observed, has_observed
):
    """:meth:`Forest.split` on the node arrays: leaf ``nodes[i]`` tests ``X_var[i] = val[i]``
    and gets children ``first + 2 i`` (true, with target counts ``true_counts[i]``) and
    ``first + 2 i + 1`` (the rest), which inherit its tree and sit one level deeper. One
    kernel instead of a dozen fancy-indexed assignments: a stream splits a few leaves at a
    time, hundreds of times."""
    for i in range(nodes.shape[0]):
        p = nodes[i]
        links[p, 0] = var[i]
        links[p, 1] = val[i]
        for c in range(2):
            child = first + 2 * i + c
            links[p, 2 + c] = child
            parent[child] = p
            depth[child] = depth[p] + 1
            tree[child] = tree[p]
            for y in range(counts.shape[1]):
                n = true_counts[i, y] if c == 0 else counts[p, y] - true_counts[i, y]
                counts[child, y] = n
                if has_observed:
                    observed[child, y] = n
