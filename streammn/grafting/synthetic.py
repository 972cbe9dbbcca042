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
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from streammn.grafting.mrf import PairwiseLayout, to_markov_network
from streammn.schema import Schema


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

    def sample(self, n: int, seed: int = 0, burn_in: int = 100, thin: int = 1,
               chains: int = 8) -> np.ndarray:
        """``n`` rows by Gibbs sampling (see the module docstring)."""
        if min(n, chains, thin) < 1 or burn_in < 0:
            raise ValueError("need n, chains, thin >= 1 and burn_in >= 0")
        chains = min(int(chains), int(n))
        per_chain = -(-int(n) // chains)
        out = _gibbs(self.layout.cards, self.layout.uoff, self.theta, self.layout.edges,
                     self.layout.eoff, self.layout.adj_ptr, self.layout.adj_edge, chains,
                     per_chain, int(burn_in), int(thin), int(seed))
        return out[:n]


def preferential_attachment(n: int, rng: np.random.Generator) -> np.ndarray:
    """Edges ``(i, j)``, ``i < j``, of a scale-free graph: each new node attaches two edges."""
    if n < 3:
        raise ValueError(f"preferential attachment needs n >= 3 nodes, got {n}")
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


def scale_free_mrf(n: int, states: int = 5, sigma_node: float = 0.5, sigma_edge: float = 1.0,
                   mean: float = 0.0, seed: int = 0) -> SyntheticMRF:
    """Appendix C's random MRF: preferential-attachment graph, Gaussian log-potentials."""
    if states < 2:
        raise ValueError(f"states must be >= 2, got {states}")
    rng = np.random.default_rng(seed)
    edges = preferential_attachment(n, rng)
    schema = Schema.from_cardinalities([states] * n)
    layout = PairwiseLayout(schema.cardinalities, edges)
    n_unary = int(layout.uoff[-1])
    theta = np.concatenate([rng.normal(mean, sigma_node, n_unary),
                            rng.normal(mean, sigma_edge, layout.size - n_unary)])
    return SyntheticMRF(schema, layout, theta)


@nb.njit(cache=True)
def _gibbs(cards, uoff, theta, edges, eoff, adj_ptr, adj_edge, chains, per_chain, burn_in,
           thin, seed):
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
