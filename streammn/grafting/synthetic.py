"""Synthetic scale-free pairwise MRFs and their data (grafting paper, Appendix C).

The graph grows by preferential attachment: two isolated seed nodes, then every new node
attaches two edges to distinct existing nodes chosen with probability proportional to their
degree (uniformly while all degrees are zero), which yields ``2n - 4`` edges. Every unary cell
is drawn from ``N(mean, sigma_node)`` and every edge cell from ``N(mean, sigma_edge)``; the paper
uses mean 100, sigma 0.5 and 1. A constant added to a whole log-potential table cancels in the
normalisation, so the mean does not change the distribution and we draw around 0 (the default
``mean=0``) to keep the weights readable. Data come from a numba Gibbs sampler over the tables
(independent chains from uniform random states, burn-in sweeps, then one row every ``thin``
sweeps).

Planted models for structure-recovery studies (issue 16) share the sampler: a graph family
(:func:`planted_graph`: random tree, tree plus a few loops, 2-D grid, random sparse,
scale-free) and Potts couplings (:func:`potts_mrf`): every edge table is ``J * [x_i = x_j]``
with ``|J|`` uniform in a range and a random sign, unary cells ``N(0, 0.1)``. With two states
this is the Ising model (coupling ``J / 2`` in the +-1 spin form).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from streammn.grafting.mrf import PairwiseLayout, to_markov_network
from streammn.schema import Schema
from streammn.errors import GraftingError


@dataclass(frozen=True)
class SyntheticMRF:
    """A planted pairwise MRF: its schema, layout (true edges) and log-potentials."""

    schema: Schema
    layout: PairwiseLayout
    theta: np.ndarray

    @property
    def edges(self) -> set[tuple[int, int]]:
        """The true graph."""
        return {(int(i), int(j)) for i, j in self.layout.edges.tolist()}

    def to_markov_network(self):
        return to_markov_network(self.schema, self.layout, self.theta)

    def sample(
        self, n: int, seed: int = 0, burn_in: int = 100, thin: int = 1, chains: int = 8
    ) -> np.ndarray:
        """``n`` rows by Gibbs sampling (see the module docstring)."""
        if min(n, chains, thin) < 1 or burn_in < 0:
            raise GraftingError("need n, chains, thin >= 1 and burn_in >= 0")
        chains = min(int(chains), int(n))
        per_chain = -(-int(n) // chains)
        out = _gibbs(
            self.layout.cards,
            self.layout.uoff,
            self.theta,
            self.layout.edges,
            self.layout.eoff,
            self.layout.adj_ptr,
            self.layout.adj_edge,
            chains,
            per_chain,
            int(burn_in),
            int(thin),
            int(seed),
        )
        return out[:n]


def preferential_attachment(n: int, rng: np.random.Generator) -> np.ndarray:
    """Edges ``(i, j)``, ``i < j``, of a scale-free graph: each new node attaches two edges."""
    if n < 3:
        raise GraftingError(f"preferential attachment needs n >= 3 nodes, got {n}")
    degree = np.zeros(n)
    edges = []
    for v in range(2, n):
        d = degree[:v]
        p = d / d.sum() if d.sum() > 0 else np.full(v, 1.0 / v)
        targets = rng.choice(v, size=2, replace=False, p=p)
        for u in targets.tolist():
            edges.append((u, v))
            degree[u] += 1
            degree[v] += 1
    return np.array(sorted(edges), dtype=np.int64)


def scale_free_mrf(
    n: int,
    states: int = 5,
    sigma_node: float = 0.5,
    sigma_edge: float = 1.0,
    mean: float = 0.0,
    seed: int = 0,
) -> SyntheticMRF:
    """Appendix C's random MRF: preferential-attachment graph, Gaussian log-potentials."""
    if states < 2:
        raise GraftingError(f"states must be >= 2, got {states}")
    rng = np.random.default_rng(seed)
    edges = preferential_attachment(n, rng)
    schema = Schema.from_cardinalities([states] * n)
    layout = PairwiseLayout(schema.cardinalities, edges)
    n_unary = int(layout.uoff[-1])
    theta = np.concatenate(
        [rng.normal(mean, sigma_node, n_unary), rng.normal(mean, sigma_edge, layout.size - n_unary)]
    )
    return SyntheticMRF(schema, layout, theta)


GRAPH_FAMILIES = ("tree", "tree_loops", "grid", "random", "scale_free")


def planted_graph(family: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Edges ``(i, j)``, ``i < j``, of a connected planted graph on ``n`` nodes:

    - ``tree``: each node in a random order attaches to a uniformly chosen earlier one;
    - ``tree_loops``: that tree plus ``max(1, round(0.3 n))`` random extra edges (the issue's
      model: 30 nodes, 38 edges);
    - ``grid``: the most square ``r x c`` grid with ``r * c = n`` (4-neighbourhood);
    - ``random``: a random tree plus random extra edges up to ``1.5 n`` edges (mean degree 3);
    - ``scale_free``: preferential attachment, ``2n - 4`` edges.
    """
    if family not in GRAPH_FAMILIES:
        raise GraftingError(f"graph family must be one of {GRAPH_FAMILIES}, got {family!r}")
    if n < 3:
        raise GraftingError(f"a planted graph needs n >= 3 nodes, got {n}")
    if family == "scale_free":
        return preferential_attachment(n, rng)
    if family == "grid":
        r = max(d for d in range(1, int(np.sqrt(n)) + 1) if n % d == 0)
        c = n // r
        idx = np.arange(n).reshape(r, c)
        pairs = [(int(a), int(b)) for a, b in zip(idx[:, :-1].ravel(), idx[:, 1:].ravel())]
        pairs += [(int(a), int(b)) for a, b in zip(idx[:-1].ravel(), idx[1:].ravel())]
        return np.array(sorted(pairs), dtype=np.int64)
    order = rng.permutation(n)
    edges = {tuple(sorted((int(order[v]), int(order[rng.integers(v)])))) for v in range(1, n)}
    extra = {"tree": 0, "tree_loops": max(1, round(0.3 * n)), "random": int(1.5 * n) - (n - 1)}[
        family
    ]
    target = len(edges) + extra
    while len(edges) < target:
        i, j = (int(v) for v in rng.choice(n, size=2, replace=False))
        edges.add((min(i, j), max(i, j)))
    return np.array(sorted(edges), dtype=np.int64)


def potts_mrf(
    edges,
    n: int,
    states: int = 3,
    coupling: tuple[float, float] = (0.8, 1.5),
    sigma_node: float = 0.1,
    seed: int = 0,
) -> SyntheticMRF:
    """A planted Potts model on ``edges``: ``theta_ij(a, b) = J_ij [a = b]``, ``|J_ij|`` uniform
    in ``coupling`` with a random sign; unary cells ``N(0, sigma_node)``."""
    if states < 2:
        raise GraftingError(f"states must be >= 2, got {states}")
    rng = np.random.default_rng(seed)
    schema = Schema.from_cardinalities([states] * n)
    layout = PairwiseLayout(schema.cardinalities, np.asarray(edges, dtype=np.int64))
    n_unary = int(layout.uoff[-1])
    j = rng.uniform(*coupling, layout.n_edges) * rng.choice([-1.0, 1.0], layout.n_edges)
    eye = np.eye(states).ravel()
    theta = np.concatenate([rng.normal(0.0, sigma_node, n_unary), np.outer(j, eye).ravel()])
    return SyntheticMRF(schema, layout, theta)


def planted_potts(
    family: str, n: int, states: int = 3, coupling: tuple[float, float] = (0.8, 1.5), seed: int = 0
) -> SyntheticMRF:
    """:func:`potts_mrf` on a :func:`planted_graph` drawn with the same seed."""
    rng = np.random.default_rng(seed)
    return potts_mrf(
        planted_graph(family, n, rng), n, states, coupling, seed=int(rng.integers(2**31))
    )


@nb.njit(cache=True)
def _gibbs(
    cards, uoff, theta, edges, eoff, adj_ptr, adj_edge, chains, per_chain, burn_in, thin, seed
):
    np.random.seed(seed)
    nv = cards.shape[0]
    out = np.empty((chains * per_chain, nv), dtype=np.uint8)
    smax = 1
    for v in range(nv):
        smax = max(smax, cards[v])
    logits = np.empty(smax)
    x = np.empty(nv, dtype=np.int64)
    for c in range(chains):
        for v in range(nv):
            x[v] = np.random.randint(0, cards[v])
        for sweep in range(burn_in + per_chain * thin):
            for v in range(nv):
                cv = cards[v]
                for a in range(cv):
                    logits[a] = theta[uoff[v] + a]
                for q in range(adj_ptr[v], adj_ptr[v + 1]):
                    k = adj_edge[q]
                    i, j = edges[k, 0], edges[k, 1]
                    cj = cards[j]
                    for a in range(cv):
                        if i == v:
                            logits[a] += theta[eoff[k] + a * cj + x[j]]
                        else:
                            logits[a] += theta[eoff[k] + x[i] * cj + a]
                mx = logits[:cv].max()
                total = 0.0
                for a in range(cv):
                    logits[a] = np.exp(logits[a] - mx)
                    total += logits[a]
                u = np.random.random() * total
                a = 0
                acc = logits[0]
                while acc < u and a < cv - 1:
                    a += 1
                    acc += logits[a]
                x[v] = a
            s = sweep - burn_in
            if s >= 0 and (s + 1) % thin == 0:
                r = c * per_chain + s // thin
                for v in range(nv):
                    out[r, v] = x[v]
    return out
