"""Canonical models: Algorithm 1 of CSGS (Edera, Strappa & Bromberg 2014) and feature generation.

A canonical model is a set of *canonical assignments* ``x^i`` (complete rows) with one undirected
graph ``G(x^i)`` each. CSGS (Algorithm 1) takes the distinct training rows as the canonical
assignments (Section 3.1: contexts that never occur are assumed improbable), starts every graph
empty, and grows and shrinks each node's Markov blanket with context-specific tests
``I(X_a, X_b | x^i_MB(a))`` (Algorithm 2, :func:`streammn.csgs.kernels.grow_shrink`).

Contexts on a stream. The distinct rows come from a :class:`~streammn.stats.PatternCounts`. When
there are more than ``max_contexts`` of them, the ``max_contexts`` most frequent are kept (ties
broken by first occurrence): a bounded, deterministic sample that keeps the contexts holding most
of the probability mass, and the cost of learning (linear in the number of contexts) bounded.

Feature generation (Section 3, last step of Algorithm 1, after CSPC). Every maximal clique ``C``
of every canonical graph ``G(x^i)`` gives the conjunctive feature ``X_C = x^i_C``; duplicates
(the same clique instantiated the same way by several contexts) are kept once. A node without
neighbours is a one-variable clique, so every canonical assignment contributes its values. Two
variables appear together in a feature only if some context's graph joins them, so an
independence ``I(X_a, X_b | x_W)`` that every graph with context ``x_W`` respects is encoded by
the features (Section 2.2). Weights are learned afterwards (pseudo-likelihood).

Single-graph ablation. ``context_specific=False`` runs the same Grow-Shrink code once with
conditional tests ``I(X_a, X_b | X_MB)`` (summed over the blanket's values, the GSMN test), so
all canonical assignments share one graph; feature generation is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streammn.csgs import kernels
from streammn.kernel_mode import serial_kernels_only
from streammn.features import FeatureSet
from streammn.schema import Schema


def critical_values(significance: float, max_dof: int) -> np.ndarray:
    """``crit[d]``: the ``1 - significance`` quantile of chi-square with ``d`` degrees of freedom
    (``crit[0] = inf``)."""
    from scipy.stats import chi2

    crit = np.full(max_dof + 1, np.inf)
    if max_dof >= 1:
        crit[1:] = chi2.isf(significance, np.arange(1, max_dof + 1))
    return crit


def pearson_test(table, significance: float = 0.05, min_rows_per_cell: float = 5.0) -> dict:
    """The chi-square test of one ``card_a x card_b`` table, as CSGS decides it: statistic,
    adjusted degrees of freedom, p-value and verdict (``"dependent"``, ``"independent"`` or
    ``"unreliable"``; see :mod:`streammn.csgs.kernels`)."""
    from scipy.stats import chi2

    table = np.ascontiguousarray(table, dtype=np.int64)
    ca, cb = table.shape
    x2, dof, n, cells = kernels.table_statistic(table.ravel(), ca, cb)
    crit = critical_values(significance, max(int(dof), 0))
    verdict = kernels.decide(x2, dof, n, cells, crit, float(min_rows_per_cell))
    names = {
        kernels.INDEPENDENT: "independent",
        kernels.DEPENDENT: "dependent",
        kernels.UNRELIABLE: "unreliable",
    }
    return {
        "statistic": float(x2),
        "dof": int(dof),
        "n": int(n),
        "p_value": float(chi2.sf(x2, dof)) if dof > 0 else 1.0,
        "verdict": names[verdict],
    }


def select_contexts(patterns: np.ndarray, counts: np.ndarray, max_contexts: int) -> np.ndarray:
    """The canonical assignments: every distinct pattern, or the ``max_contexts`` most frequent
    (stable order)."""
    if patterns.shape[0] <= max_contexts:
        return np.ascontiguousarray(patterns)
    keep = np.sort(np.argsort(-counts, kind="stable")[:max_contexts])
    return np.ascontiguousarray(patterns[keep])


@dataclass
class CanonicalModel:
    """Canonical assignments (rows of ``contexts``) and their graphs (``adjacency[i]``)."""

    schema: Schema
    contexts: np.ndarray
    adjacency: np.ndarray
    n_tests: int
    n_unreliable: int
    n_grow_tests: int
    n_shrink_tests: int
    n_tests_computed: int
    """Tests the algorithm asks for (``n_tests``, the paper's count), of which unreliable, in
    grow and shrink phases, and how many were computed from the counts (binary data compute
    a test once for all the contexts that ask it together)."""

    def edges(self, i: int) -> set[tuple[int, int]]:
        """Edges ``(a, b)``, ``a < b``, of the graph of context ``i``."""
        a, b = np.nonzero(np.triu(self.adjacency[i]))
        return set(zip(a.tolist(), b.tolist()))

    @property
    def max_degree(self) -> int:
        """``k`` of the paper's bound: the largest blanket over all canonical graphs."""
        return int(self.adjacency.sum(axis=2).max()) if self.adjacency.size else 0

    def features(self) -> FeatureSet:
        """Feature generation: one zero-weight feature ``X_C = x^i_C`` per distinct
        instantiated maximal clique (see the module notes)."""
        seen: dict[tuple, None] = {}
        cliques_of: dict[bytes, list[tuple[int, ...]]] = {}
        for x, adj in zip(self.contexts, self.adjacency):
            key = np.packbits(adj).tobytes()
            cliques = cliques_of.get(key)
            if cliques is None:
                cliques = cliques_of[key] = maximal_cliques(adj)
            for clique in cliques:
                seen.setdefault(tuple((v, int(x[v])) for v in clique), None)
        return FeatureSet.from_features(
            self.schema, ((0.0, [(v, a, True) for v, a in f]) for f in seen)
        )


def maximal_cliques(adj: np.ndarray) -> list[tuple[int, ...]]:
    """Every maximal clique of the graph ``adj`` (Bron-Kerbosch with pivoting on bitsets),
    each sorted, in a deterministic order."""
    n = adj.shape[0]
    nbr = [sum(1 << int(j) for j in np.flatnonzero(adj[i])) for i in range(n)]
    out: list[tuple[int, ...]] = []

    def expand(r: int, p: int, x: int) -> None:
        if not p and not x:
            out.append(tuple(i for i in range(n) if r >> i & 1))
            return
        pivot = max(_bits(p | x), key=lambda u: (nbr[u] & p).bit_count())
        for v in _bits(p & ~nbr[pivot]):
            expand(r | 1 << v, p & nbr[v], x & nbr[v])
            p &= ~(1 << v)
            x |= 1 << v

    expand(0, (1 << n) - 1, 0)
    return sorted(out)


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


class Abandoned(Exception):
    """Raised by :func:`learn_canonical_model` when its ``should_stop`` says so."""


CHUNK = 16  # contexts per parallel kernel call when a stop is watched for (other than binary)


def _graphs_watched(P, c, contexts, cards, crit, min_rows_per_cell, repeat_grow, should_stop):
    """The canonical graphs asking ``should_stop`` (:class:`Abandoned`) between nodes (binary
    data: every context at once, node by node) or between chunks of ``CHUNK`` contexts
    (parallel kernel): the same graphs and counters as one kernel call."""
    k, n = contexts.shape
    if _binary(cards):
        adj = np.zeros((k, n, n), dtype=np.bool_)
        counters = np.zeros((k, 5), dtype=np.int64)
        packed, xs = kernels.pack_patterns(P, c), kernels.pack_rows(contexts)
        for a in range(n):  # a node over every context takes up to a second: ask before each
            if should_stop():
                raise Abandoned
            kernels.tree_graphs_into(
                *packed,
                xs,
                a,
                a + 1,
                crit,
                min_rows_per_cell,
                repeat_grow,
                adj,
                counters,
            )
        return adj, counters
    parts = []
    for a in range(0, k, CHUNK):
        if should_stop():
            raise Abandoned
        parts.append(
            _graphs_kernel()(
                P,
                c,
                np.ascontiguousarray(contexts[a : a + CHUNK]),
                cards,
                crit,
                min_rows_per_cell,
                repeat_grow,
            )
        )
    if not parts:
        return np.zeros((0, n, n), dtype=np.bool_), np.zeros((0, 5), dtype=np.int64)
    return np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])


def _graphs_kernel():
    """:func:`streammn.csgs.kernels.canonical_graphs`, or its serial twin in a forked snapshot
    writer (:func:`streammn.kernel_mode.serial_kernels_only`)."""
    return kernels.canonical_graphs_serial if serial_kernels_only() else kernels.canonical_graphs


def _binary(cards: np.ndarray) -> bool:
    """Whether every variable is binary: rows pack into bits, and the kernels share tests
    between contexts (:func:`streammn.csgs.kernels.canonical_graphs_tree`)."""
    return bool((cards == 2).all())


def learn_canonical_model(
    schema: Schema,
    patterns: np.ndarray,
    counts: np.ndarray,
    significance: float = 0.05,
    min_rows_per_cell: float = 5.0,
    max_contexts: int = 5000,
    context_specific: bool = True,
    repeat_grow: bool = False,
    should_stop=None,
) -> CanonicalModel:
    """Algorithm 1 on distinct patterns with counts: contexts, then one Grow-Shrink graph each
    (or one shared graph from conditional tests when ``context_specific`` is False).
    ``should_stop``: a function asked between nodes (binary data) or chunks of contexts; when
    it returns True the learning is abandoned (:class:`Abandoned`): a stop request does not
    wait for it."""
    cards = np.ascontiguousarray(schema.cardinalities, dtype=np.int64)
    P = np.ascontiguousarray(patterns, dtype=np.uint8)
    c = np.ascontiguousarray(counts, dtype=np.int64)
    contexts = select_contexts(P, c, max_contexts)
    n = schema.n_vars
    pair_dof = int((cards.max() - 1) ** 2)
    if context_specific:
        crit = critical_values(significance, pair_dof)
        run = kernels.canonical_graphs_tree if _binary(cards) else _graphs_kernel()
        if should_stop is not None:
            adjacency, counters = _graphs_watched(
                P, c, contexts, cards, crit, float(min_rows_per_cell), repeat_grow, should_stop
            )
        else:
            adjacency, counters = run(
                P, c, contexts, cards, crit, float(min_rows_per_cell), repeat_grow
            )
        totals = counters.sum(axis=0)
    else:
        crit = critical_values(significance, pair_dof * max(P.shape[0], 1))
        shared = np.zeros((n, n), dtype=np.bool_)
        totals = np.zeros(5, dtype=np.int64)
        x = contexts[0] if contexts.shape[0] else np.zeros(n, dtype=np.uint8)
        kernels.grow_shrink(
            P,
            c,
            x,
            cards,
            crit,
            float(min_rows_per_cell),
            False,
            repeat_grow,
            shared,
            totals,
        )
        adjacency = np.broadcast_to(shared, (contexts.shape[0], n, n))
    return CanonicalModel(schema, contexts, adjacency, *(int(t) for t in totals))
