"""Numba kernels of CSGS: Pearson chi-square tests on pattern counts and the Grow-Shrink loop.

Data layout. The data are the distinct row patterns ``P[m, n]`` (uint8) with their counts
``c[m]`` (:class:`~streammn.stats.PatternCounts`). A context-specific test
``I(X_a, X_b | x_W)`` is the ``card_a x card_b`` table of the patterns that agree with the
context on ``W``, weighted by their counts.

Incremental filtering. While Grow-Shrink works on node ``a`` of the graph of context ``x``, every
pattern keeps ``mismatch[p]``, the number of blanket variables on which it differs from ``x``.
The rows of the grow test of ``b`` are the patterns with ``mismatch == 0``; those of the shrink
test of ``b`` (blanket without ``b``) the patterns with ``mismatch - [P[p, b] != x_b] == 0``.
Adding or removing ``b`` updates ``mismatch`` in one pass. Every test and every blanket change
is thus one ``O(m)`` pass, the cost model of the paper (Section 3.3).

Shared tests. Contexts that agree on a blanket ask the same tests: the first test of every
context is ``I(X_0, X_1)``. On binary data with fewer than 63 variables a test is keyed exactly
by ``(pair, blanket bits, context bits on the blanket)``, and :func:`canonical_graphs_cached`
runs the contexts in turn with one cache of verdicts, computing each distinct test once (about a
tenth of those asked, on nltcs and the planted networks); other data run the contexts in
parallel with the incremental filter above. Both give the same graphs, and the paper's test
count (``n_tests``) counts every test asked.

Pearson's test (the paper's Section 4.2: chi-square at significance ``alpha``).
``X^2 = sum (O - E)^2 / E`` over the cells of non-empty rows and columns, ``E = row * col / N``;
degrees of freedom ``(r' - 1)(c' - 1)`` with ``r'``, ``c'`` the numbers of non-empty rows and
columns (the usual adjustment for structural zeros: an empty row carries no information). The
test says *dependent* when ``X^2`` exceeds the ``1 - alpha`` quantile of chi-square with that
many degrees of freedom (``crit[dof]``, tabulated by the caller with scipy). A table says
*independent* without a statistic when

* ``dof == 0``: one of the variables is constant in the context (no evidence of dependence); or
* it is too sparse: ``N < min_rows_per_cell * r' * c'``, fewer rows than ``min_rows_per_cell``
  per non-empty cell (Cochran's rule of thumb, default 5). Such tests are counted as
  *unreliable*. Independence is the default because CSGS starts from the most specific model
  (the empty graph) and adds an edge only on evidence, and it is what keeps the search from
  conditioning on contexts that hold a handful of rows.

The conditional test of the single-graph ablation (GSMN-like), ``I(X_a, X_b | X_W)`` over every
value of ``W``, sums ``X^2`` and the degrees of freedom over the strata of ``W`` (each stratum
with its own adjusted degrees of freedom), and applies the same rules to the totals.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types
from numba.typed import Dict

_KEY = types.UniTuple(types.int64, 3)
INDEPENDENT, DEPENDENT, UNRELIABLE = 0, 1, 2


@nb.njit(cache=True)
def table_statistic(table, ca, cb):
    """``(x2, dof, n, cells)`` of a ``ca x cb`` table (flat, row-major; int64 counts)."""
    rows = np.zeros(ca, dtype=np.int64)
    cols = np.zeros(cb, dtype=np.int64)
    for i in range(ca):
        for j in range(cb):
            rows[i] += table[i * cb + j]
            cols[j] += table[i * cb + j]
    n = 0
    r_nz = 0
    c_nz = 0
    for i in range(ca):
        n += rows[i]
        if rows[i] > 0:
            r_nz += 1
    for j in range(cb):
        if cols[j] > 0:
            c_nz += 1
    x2 = 0.0
    if r_nz > 1 and c_nz > 1:
        for i in range(ca):
            if rows[i] == 0:
                continue
            for j in range(cb):
                if cols[j] == 0:
                    continue
                e = rows[i] * cols[j] / n
                d = table[i * cb + j] - e
                x2 += d * d / e
    return x2, (r_nz - 1) * (c_nz - 1), n, r_nz * c_nz


@nb.njit(cache=True)
def decide(x2, dof, n, cells, crit, min_rows_per_cell):
    """INDEPENDENT, DEPENDENT or UNRELIABLE (treated as independent) for a test's totals."""
    if dof <= 0:
        return INDEPENDENT
    if n < min_rows_per_cell * cells:
        return UNRELIABLE
    if dof >= crit.shape[0]:  # cannot happen with a table sized by the caller; be safe
        return INDEPENDENT
    return DEPENDENT if x2 > crit[dof] else INDEPENDENT


@nb.njit(cache=True)
def _context_test(P, c, a, b, x, mismatch, drop, cards, table, crit, min_rows_per_cell):
    """Test ``I(X_a, X_b | x_MB)`` on the patterns with ``mismatch == 0`` (or, with
    ``drop >= 0``, on those whose only mismatches are at variable ``drop``)."""
    ca, cb = cards[a], cards[b]
    table[: ca * cb] = 0
    for p in range(P.shape[0]):
        k = mismatch[p]
        if drop >= 0 and P[p, drop] != x[drop]:
            k -= 1
        if k == 0:
            table[P[p, a] * cb + P[p, b]] += c[p]
    x2, dof, n, cells = table_statistic(table, ca, cb)
    return decide(x2, dof, n, cells, crit, min_rows_per_cell)


@nb.njit(cache=True)
def _cached_context_test(
    P, c, a, b, x, blanket_mask, cards, table, crit, min_rows_per_cell, cache, counters
):
    """``I(X_a, X_b | x_S)`` for the set ``S`` of the bits of ``blanket_mask`` (binary data,
    fewer than 63 variables), looked up in ``cache`` first. The key ``(pair, S, x_S)`` holds
    the whole test exactly (the table of ``(b, a)`` is the transpose of that of ``(a, b)``, with
    the same statistic); ``counters[4]`` counts the tests actually computed."""
    n = P.shape[1]
    lo, hi = min(a, b), max(a, b)
    values = np.int64(0)
    for v in range(n):
        if blanket_mask >> v & 1 and x[v]:
            values |= np.int64(1) << v
    key = (lo * n + hi, blanket_mask, values)
    if key in cache:
        return cache[key]
    table[:4] = 0
    for p in range(P.shape[0]):
        match = True
        for v in range(n):
            if blanket_mask >> v & 1 and P[p, v] != x[v]:
                match = False
                break
        if match:
            table[P[p, a] * 2 + P[p, b]] += c[p]
    x2, dof, rows, cells = table_statistic(table, 2, 2)
    verdict = decide(x2, dof, rows, cells, crit, min_rows_per_cell)
    cache[key] = verdict
    counters[4] += 1
    return verdict


@nb.njit(cache=True)
def _conditional_test(P, c, a, b, blanket, n_blanket, cards, table, crit, min_rows_per_cell):
    """Test ``I(X_a, X_b | X_MB)`` summed over the strata of the blanket's values."""
    m = P.shape[0]
    keys = np.zeros(m, dtype=np.int64)
    for p in range(m):
        key = 0
        for k in range(n_blanket):
            v = blanket[k]
            key = key * cards[v] + P[p, v]
        keys[p] = key
    order = np.argsort(keys, kind="mergesort")
    ca, cb = cards[a], cards[b]
    x2_total = 0.0
    dof_total = 0
    n_total = 0
    cells_total = 0
    start = 0
    while start < m:
        stop = start
        table[: ca * cb] = 0
        while stop < m and keys[order[stop]] == keys[order[start]]:
            p = order[stop]
            table[P[p, a] * cb + P[p, b]] += c[p]
            stop += 1
        x2, dof, n, cells = table_statistic(table, ca, cb)
        x2_total += x2
        dof_total += dof
        n_total += n
        cells_total += cells
        start = stop
    return decide(x2_total, dof_total, n_total, cells_total, crit, min_rows_per_cell)


@nb.njit(cache=True)
def _edge_test(
    P,
    c,
    a,
    b,
    left_out,
    x,
    mask,
    mismatch,
    adj,
    blanket,
    cards,
    table,
    crit,
    min_rows_per_cell,
    context_specific,
    use_cache,
    cache,
    counters,
):
    """The verdict on ``I(X_a, X_b | blanket of a)`` for :func:`grow_shrink`, the blanket
    without ``left_out`` (``b`` in the shrink phase, ``-1`` in the grow phase, where ``b`` is
    not in it); counts it in ``counters`` (all but the phase counts)."""
    if use_cache:
        if left_out >= 0:
            mask &= ~(np.int64(1) << left_out)
        verdict = _cached_context_test(
            P, c, a, b, x, mask, cards, table, crit, min_rows_per_cell, cache, counters
        )
    elif context_specific:
        verdict = _context_test(
            P, c, a, b, x, mismatch, left_out, cards, table, crit, min_rows_per_cell
        )
        counters[4] += 1
    else:
        size = 0
        for v in range(P.shape[1]):
            if adj[a, v] and v != left_out:
                blanket[size] = v
                size += 1
        verdict = _conditional_test(
            P, c, a, b, blanket, size, cards, table, crit, min_rows_per_cell
        )
        counters[4] += 1
    counters[0] += 1
    if verdict == UNRELIABLE:
        counters[1] += 1
    return verdict


@nb.njit(cache=True)
def _set_edge(P, x, a, b, present, adj, mask, mismatch, use_cache, incremental):
    """Add (``present``) or remove the edge ``a - b`` for :func:`grow_shrink`, keeping the
    blanket's bits and the rows' mismatch counts in step; returns the new bits."""
    adj[a, b] = present
    adj[b, a] = present
    if incremental:
        step = 1 if present else -1
        for p in range(P.shape[0]):
            if P[p, b] != x[b]:
                mismatch[p] += step
    if use_cache:
        bit = np.int64(1) << b
        mask = mask | bit if present else mask & ~bit
    return mask


@nb.njit(cache=True)
def grow_shrink(
    P,
    c,
    x,
    cards,
    crit,
    min_rows_per_cell,
    context_specific,
    repeat_grow,
    adj,
    counters,
    cache,
    use_cache,
):
    """Algorithm 2 on the graph ``adj`` (n x n bool, modified in place) of context ``x``.

    Nodes are taken in index order ``0 .. n-1``, and so are the candidates of the grow phase and
    the blanket members of the shrink phase (the fixed order the paper's analysis assumes).
    Each phase is one pass, as in Algorithm 2, unless ``repeat_grow``: then the grow pass is
    repeated until it adds nothing (Margaritis & Thrun's original Grow-Shrink), which also
    finds a neighbour that looked independent of ``a`` under a smaller blanket. The blanket used
    by a test is the current one (edges added or removed earlier in the pass count).
    ``counters`` accumulates ``[tests, unreliable tests, grow tests, shrink tests, tests
    computed]``. With ``use_cache``
    (context-specific tests on binary data), verdicts are shared through ``cache`` by every
    context that asks the same test (:func:`_cached_context_test`).
    """
    n = P.shape[1]
    m = P.shape[0]
    table = np.zeros(int(cards.max()) ** 2, dtype=np.int64)
    mismatch = np.zeros(m, dtype=np.int64)
    blanket = np.zeros(n, dtype=np.int64)
    incremental = context_specific and not use_cache
    for a in range(n):
        mask = np.int64(0)  # the blanket as bits (cache keys, so fewer than 63 variables)
        if use_cache:
            for v in range(n):
                if adj[a, v]:
                    mask |= np.int64(1) << v
        if incremental:
            mismatch[:] = 0
            for v in range(n):
                if adj[a, v]:
                    for p in range(m):
                        if P[p, v] != x[v]:
                            mismatch[p] += 1
        # grow (again while it adds, with repeat_grow)
        while True:
            added = False
            for b in range(n):
                if b == a or adj[a, b]:
                    continue
                verdict = _edge_test(
                    P,
                    c,
                    a,
                    b,
                    -1,
                    x,
                    mask,
                    mismatch,
                    adj,
                    blanket,
                    cards,
                    table,
                    crit,
                    min_rows_per_cell,
                    context_specific,
                    use_cache,
                    cache,
                    counters,
                )
                counters[2] += 1
                if verdict == DEPENDENT:
                    added = True
                    mask = _set_edge(P, x, a, b, True, adj, mask, mismatch, use_cache, incremental)
            if not (repeat_grow and added):
                break
        # shrink
        for b in range(n):
            if not adj[a, b]:
                continue
            verdict = _edge_test(
                P,
                c,
                a,
                b,
                b,
                x,
                mask,
                mismatch,
                adj,
                blanket,
                cards,
                table,
                crit,
                min_rows_per_cell,
                context_specific,
                use_cache,
                cache,
                counters,
            )
            counters[3] += 1
            if verdict != DEPENDENT:
                mask = _set_edge(P, x, a, b, False, adj, mask, mismatch, use_cache, incremental)


def new_cache():
    """An empty test cache for :func:`grow_shrink`."""
    return Dict.empty(key_type=_KEY, value_type=types.int64)


@nb.njit(cache=True, parallel=True)
def canonical_graphs(P, c, contexts, cards, crit, min_rows_per_cell, repeat_grow):
    """Algorithm 1's loop: one Grow-Shrink graph per context (row of ``contexts``), from the
    empty graph. Returns ``(adjacency[k, n, n], counters[k, 5])``; contexts are independent, so
    they run in parallel and the result does not depend on the number of threads. For data
    that the test cache cannot key, see :func:`canonical_graphs_cached`."""
    k, n = contexts.shape
    adj = np.zeros((k, n, n), dtype=np.bool_)
    counters = np.zeros((k, 5), dtype=np.int64)
    for i in nb.prange(k):
        cache = Dict.empty(key_type=_KEY, value_type=types.int64)
        grow_shrink(
            P,
            c,
            contexts[i],
            cards,
            crit,
            min_rows_per_cell,
            True,
            repeat_grow,
            adj[i],
            counters[i],
            cache,
            False,
        )
    return adj, counters


@nb.njit(cache=True)
def canonical_graphs_cached(P, c, contexts, cards, crit, min_rows_per_cell, repeat_grow):
    """:func:`canonical_graphs` for binary data with fewer than 63 variables: contexts in turn,
    sharing one cache of test verdicts (the same test asked by many contexts is computed once;
    a verdict depends only on the test, so the graphs are the same)."""
    k, n = contexts.shape
    adj = np.zeros((k, n, n), dtype=np.bool_)
    counters = np.zeros((k, 5), dtype=np.int64)
    cached_graphs_into(
        P,
        c,
        contexts,
        cards,
        crit,
        min_rows_per_cell,
        repeat_grow,
        adj,
        counters,
        Dict.empty(key_type=_KEY, value_type=types.int64),
    )
    return adj, counters


@nb.njit(cache=True)
def cached_graphs_into(
    P, c, contexts, cards, crit, min_rows_per_cell, repeat_grow, adj, counters, cache
):
    """The graphs of ``contexts`` in turn into ``adj`` and ``counters`` (one entry per
    context), sharing the verdict ``cache`` (:func:`canonical_graphs_cached`; also called one
    context at a time by a learner that checks for a stop between contexts)."""
    for i in range(contexts.shape[0]):
        grow_shrink(
            P,
            c,
            contexts[i],
            cards,
            crit,
            min_rows_per_cell,
            True,
            repeat_grow,
            adj[i],
            counters[i],
            cache,
            True,
        )
