"""The simplified ET model of Lin et al. (2009, Section 2.2): theta from the stores, beta, rho.

theta. Node and edge distributions are plug-in estimates from the exact counts of a
:class:`~streammn.stats.PairCounts` (which also holds the node counts). First a symmetric
Dirichlet pseudo-count ``alpha`` (the learner's ``pseudo_count``) spread evenly over the cells
of each table::

    theta_u(a)     = (n_u(a)     + alpha / k_u)       / (N + alpha)
    q_uv(a, b)     = (n_uv(a, b) + alpha / (k_u k_v)) / (N + alpha)

then each pair table is shrunk toward the independence of its two margins::

    theta_uv(a, b) = lambda_uv theta_u(a) theta_v(b) + (1 - lambda_uv) q_uv(a, b)

with the James-Stein shrinkage intensity of Hausser & Strimmer (2009, Eq. 5), computed from the
maximum-likelihood table ``p = n_uv / N`` and the product of its margins ``t``::

    lambda_uv = min(1, (1 - sum p^2) / ((N - 1) sum (t - p)^2))

Why shrink. A plug-in pair table departs from independence by sampling noise of order
``1 / sqrt(N)`` on every pair, and ET's likelihood rewards that noise with beta weight: on the
paper's 50-node, 3-neighbour binary networks at 250 rows the support of beta held 114 pairs for
75 true edges, half of them false, whatever the stopping tolerance (PGD run to 1e-8 kept 117),
so no threshold on rho fixed it (Hamming 76 at ``rho > 2/M``, 48 at the best fixed threshold,
against 65 for L1-regularised logistic regression). The James-Stein intensity is the estimated
minimiser of the table's mean squared error; it depends on N and on the pair's own evidence: it
is 1 when the departure from independence is within the noise (for a 2x2 table: when
``N r^2`` is below about 3, ``r`` the correlation, i.e. a chi-square test at about 10%), which
makes ``w_uv(x) = 1`` for every row so the pair carries no structural signal and PGD leaves it
at zero weight, and it falls as ``1 / N`` for a real dependence, so a long stream gets the plain
plug-in estimates back. Same networks with shrinkage: Hamming 52-56 at 250 rows, 27-30 at 500,
10-15 at 1,000 (see ``benchmarks/results/et.md``). Hausser & Strimmer give the formula for a
fixed target; here the target (the product of the margins) is itself estimated, a second-order
difference. ``lambda_uv`` is the same for ``uv`` and ``vu``.

Both steps keep every cell at least ``alpha / (k_u k_v (N + alpha)) > 0`` (a convex combination
of two positive tables), so no log(0) can occur, and both satisfy Eq. 7's constraint
``sum_b theta_uv(a, b) = theta_u(a)`` (each of ``q_uv`` and the product table has margin
``theta_u``), so every tree of the ensemble is a proper distribution and Eq. 6 stays exactly
normalised.

beta. The structural weights live on the simplex. :func:`initial_beta` maximises the concave
data term of Eq. 14 (the convex upper bound), :func:`refine_beta` then runs projected gradient
ascent on Eq. 9 from a start point (Armijo, gamma 0.5, eta 0.01), both on a row sample.

rho. The edge appearance probability of Eq. 8 is ``beta_uv`` times the effective resistance of
``uv`` in the graph weighted by beta (the same quantity as the normaliser's gradient), and the
rho of all pairs sum to ``M - 1`` (every spanning tree has ``M - 1`` edges).

Graph. The paper's graph is the support of beta (PGD's projection sets weights exactly to
zero). The shrinkage above removes the pairs whose dependence is noise, but pairs joined by a
path of strong edges are really dependent at the margin, and PGD leaves them small weights: on
a planted 8-variable tree with 6,000 rows the true edges have rho >= 0.977, the support adds 10
non-edges with rho <= 0.031. So the default keeps an edge when its appearance probability
exceeds what the uniform ensemble over all spanning trees of the complete graph gives every
pair, ``2 / M`` (the rho sum to ``M - 1`` over ``M (M - 1) / 2`` pairs): an edge is selected
when the learned mixture uses it more than a structure-blind one. It scales with M; the
dependence on N is carried by the shrinkage, not by the threshold. On the paper's 50-node
networks it selects nearly the support (within 3 edges), and a higher threshold only loses
true edges there (6 neighbours, 1,000 rows: Hamming 59 at ``2 / M``, 98 at the majority rule
rho > 1/2, which caps the graph near ``2 (M - 1)`` edges). ``rho_threshold=0`` gives the raw
support.

What the model leaves out. On dense, weakly coupled networks the Eq. 9 optimum itself omits
the weakest true edges; neither the sample, the shrinkage, PGD nor the threshold is the cause
(``benchmarks/results/et_diagnosis.md``). On the paper's 50-node, 6-neighbour networks with beta
on all rows, ET misses 59/55 of 150 edges at 1,000 rows, 50/47 at 4,000 and 50/49 at 16,000
(plug-in tables: 51/49, 49/46, 47/47), adding at most one false edge: the misses do not fall
with N, so they are the model's limit, not sampling noise (on a 200-node, 4-neighbour network
they fall slowly: 77 of 400 at 4,000 rows, 62 at 16,000). The missed edges are the weak
couplings (mean ``|theta_uv|`` 0.14 against 0.22 for the found ones); at the fitted beta their
Eq. 9 gradient is negative (the optimum excludes them) for all but one or two, and PGD run to
1e-8 (about 500 iterations) leaves the Hamming distance unchanged. Many missed edges are not
hidden in the noise (with 4,000 rows, 9-30 of the 46-50 missed on 50-6 and 49-53 of the 74-77
missed on a 200-node network have more plug-in mutual information than all but nine
non-edges): a mixture of trees spends ``sum rho = M - 1``, and a weak edge of a loopy graph
adds less likelihood than its share of that budget costs the strong edges. L1 logistic
regression tests conditional dependence and keeps improving with N, so it overtakes ET at the
larger sample sizes (50-6 at 1,000 rows, the 200-node networks at 4,000). The
shrinkage costs 50-6 5-7 edges of Hamming distance at every size and is kept because without
it 50-3 loses 20-27 at 250 and 500 rows, where ET then falls behind L1 logistic regression.
Neither random PGD restarts (objectives within 0.015 nats per row of this start, Hamming
59-63 and 52-57) change that. Learning the edge tables with beta (the full model of Eq. 7,
``learn_theta``, :mod:`streammn.et.edge_tables`) does: a weak edge's table becomes more
dependent than its marginal table, and the same fits miss 17 and 11 edges (Hamming 42 and 32
against L1 logistic regression's 44 and 39) for about 10x the CPU.

Chow-Liu. ET with all of beta on one spanning tree is that tree's distribution, so
:func:`chow_liu_beta` (maximum mutual-information spanning tree of the same theta) gives the
Chow-Liu model through the same likelihood code.
"""

from __future__ import annotations


import numpy as np

from streammn.errors import ETDensityError
from streammn.packed_state import pack_state, unpack_state
from streammn.et.kernels import (
    effective_resistances,
    et_log_likelihood,
    projected_gradient_ascent,
    ratio_table,
)
from streammn.schema import Schema

DEFAULT_PSEUDO_COUNT = 1.0
FORMAT = "streammn-et-density-1"


def smoothed_theta(pairs, pseudo_count: float = DEFAULT_PSEUDO_COUNT, shrink: bool = True):
    """``(node_probs (M, K), pair_probs (M, M, K, K))`` from a PairCounts, smoothed and shrunk
    toward independence as above (``shrink=False``: the Dirichlet step only, the paper's plug-in
    estimate up to the pseudo-count).

    ``K`` is the largest cardinality; cells beyond a variable's states are 1 and never read.
    """
    schema = pairs.schema
    cards = schema.cardinalities.astype(np.int64)
    m, k = len(cards), int(cards.max())
    n = pairs.n_rows
    total = n + pseudo_count
    node = np.ones((m, k))
    pair = np.ones((m, m, k, k))
    joint = pairs.joint().astype(np.float64)
    offsets = np.concatenate([[0], np.cumsum(cards)])
    counts = np.diagonal(joint)
    for u in range(m):  # loops over variables, not rows
        node[u, : cards[u]] = (
            counts[offsets[u] : offsets[u + 1]] + pseudo_count / cards[u]
        ) / total
    for u in range(m):
        su = slice(offsets[u], offsets[u + 1])
        for v in range(u + 1, m):
            sv = slice(offsets[v], offsets[v + 1])
            table = joint[su, sv]
            dirichlet = (table + pseudo_count / (cards[u] * cards[v])) / total
            independent = np.outer(node[u, : cards[u]], node[v, : cards[v]])
            lam = independence_shrinkage(table, n) if shrink else 0.0
            pair[u, v, : cards[u], : cards[v]] = lam * independent + (1.0 - lam) * dirichlet
            pair[v, u, : cards[v], : cards[u]] = pair[u, v, : cards[u], : cards[v]].T
        pair[u, u, : cards[u], : cards[u]] = (
            joint[su, su] + pseudo_count / cards[u] ** 2
        ) / total  # unused
    return node, pair


def independence_shrinkage(table, n: int) -> float:
    """James-Stein intensity (Hausser & Strimmer 2009) shrinking a pair's count table toward the
    product of its margins: 1 when its dependence is within sampling noise (or n < 2)."""
    if n < 2:
        return 1.0
    p = table / n
    departure = ((np.outer(p.sum(axis=1), p.sum(axis=0)) - p) ** 2).sum()
    if departure == 0.0:
        return 1.0
    return float(min(1.0, (1.0 - (p**2).sum()) / ((n - 1) * departure)))


def initial_beta(rows, table, max_iter: int = 100, tol: float = 1e-9, should_stop=None):
    """Eq. 14's maximiser over the simplex by PGD from uniform weights on all pairs."""
    m = table.shape[0]
    start = np.ones((m, m)) / (m * (m - 1) / 2)
    np.fill_diagonal(start, 0.0)
    beta, _ = projected_gradient_ascent(
        start, rows, table, max_iter=max_iter, tol=tol, bound=True, should_stop=should_stop
    )
    return beta


def refine_beta(beta, rows, table, max_iter: int = 100, tol: float = 1e-4, should_stop=None):
    """PGD with Armijo steps on Eq. 9 from ``beta``; returns ``(beta, objective history)``."""
    return projected_gradient_ascent(
        beta, rows, table, max_iter=max_iter, tol=tol, should_stop=should_stop
    )


def edge_appearance(beta) -> np.ndarray:
    """rho_uv of Eq. 8 for every pair, (M, M) symmetric, zero diagonal; sums to 2 (M - 1)."""
    rho = beta * effective_resistances(np.asarray(beta, dtype=np.float64)[None])[0]
    np.fill_diagonal(rho, 0.0)
    return rho


def default_rho_threshold(n_vars: int) -> float:
    """rho of every pair under the uniform ensemble of all spanning trees: ``2 / M``."""
    return 2.0 / n_vars


def graph_edges(rho, threshold: float | None = None) -> list[tuple[int, int]]:
    """Pairs ``(u, v)``, ``u < v``, whose edge appearance probability exceeds ``threshold``
    (default :func:`default_rho_threshold`)."""
    if threshold is None:
        threshold = default_rho_threshold(rho.shape[0])
    u, v = np.nonzero(np.triu(rho, 1) > threshold)
    return [(int(a), int(b)) for a, b in zip(u, v)]


def mutual_information(node, pair, cards) -> np.ndarray:
    """Mutual information of every pair under the smoothed theta, (M, M)."""
    m = len(cards)
    mi = np.zeros((m, m))
    for u in range(m):
        for v in range(u + 1, m):
            p = pair[u, v, : cards[u], : cards[v]]
            q = node[u, : cards[u], None] * node[v, None, : cards[v]]
            mi[u, v] = mi[v, u] = float((p * np.log(p / q)).sum())
    return mi


def chow_liu_beta(node, pair, cards) -> np.ndarray:
    """beta spread evenly over the maximum mutual-information spanning tree (Chow-Liu)."""
    # imported here: scipy.sparse.csgraph brings scipy.linalg (9 MB of the process floor), and
    # `streammn learn` imports every learner's module to build its options
    from scipy.sparse.csgraph import minimum_spanning_tree

    mi = mutual_information(node, pair, cards)
    m = len(cards)
    # maximum spanning tree = minimum spanning tree of (big - mi) on the complete graph
    cost = (mi.max() + 1.0) - mi
    np.fill_diagonal(cost, 0.0)
    tree = minimum_spanning_tree(np.triu(cost, 1)).toarray() > 0
    beta = (tree | tree.T).astype(np.float64) / max(m - 1, 1)
    return beta


class ETDensity:
    """The ET distribution (Eq. 6): smoothed theta and structural weights beta.

    :meth:`log_likelihood` is the exact per-row log-probability: the mixture over all spanning
    trees is summed in closed form by the matrix-tree theorem, O(M^3) per row.
    """

    def __init__(self, schema: Schema, beta, node_probs, pair_probs):
        self.schema = schema
        self.beta = np.asarray(beta, dtype=np.float64)
        self.node_probs = np.asarray(node_probs, dtype=np.float64)
        self.pair_probs = np.asarray(pair_probs, dtype=np.float64)

    def log_likelihood(self, rows, batch_rows: int = 2048) -> np.ndarray:
        """``log P(x)`` per row (natural log), in blocks of ``batch_rows`` to bound memory."""
        rows = self.schema.rows_of(rows)
        out = np.empty(rows.shape[0])
        for start in range(0, rows.shape[0], batch_rows):
            block = rows[start : start + batch_rows].astype(np.int64)
            out[start : start + batch_rows] = et_log_likelihood(
                block, self.beta, self.node_probs, self.pair_probs
            )
        return out

    @property
    def ratio_table(self) -> np.ndarray:
        return ratio_table(self.node_probs, self.pair_probs)

    @property
    def rho(self) -> np.ndarray:
        return edge_appearance(self.beta)

    def to_bytes(self) -> bytes:
        meta = {"format": FORMAT, "schema": self.schema.to_dict()}
        return pack_state(
            meta, {"beta": self.beta, "node_probs": self.node_probs, "pair_probs": self.pair_probs}
        )

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "ET density") -> "ETDensity":
        try:
            meta, arrays = unpack_state(data)
            if meta.get("format") != FORMAT:
                raise ValueError(f"format {meta.get('format')!r}")
            return cls(
                Schema.from_dict(meta["schema"]),
                arrays["beta"],
                arrays["node_probs"],
                arrays["pair_probs"],
            )
        except (ValueError, OSError, KeyError) as exc:
            raise ETDensityError(f"{where}: not an ET density file ({exc})") from exc
