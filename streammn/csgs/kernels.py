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
context is ``I(X_0, X_1)``. On binary data with fewer than 63 variables a row packs into one
int64 and a test is keyed exactly by ``(pair, blanket bits, context bits on the blanket)``;
:func:`canonical_graphs_cached` runs every context at once, node by node, as a tree: the
contexts that reach a node with the same blanket and values run its grow pass together, a
dependent variable splits them (and the patterns) by its value, and a leaf's contexts share
one shrink phase (:func:`cached_graphs_into`). Each distinct test is computed once (about a
tenth of those asked on nltcs and the planted networks, a tenth again on a 100k-row stream of
30 variables with 5,000 contexts) over the patterns of its tree node, not over all of them:
learning the canonical model of that stream went from about 20 minutes (contexts in turn, one
pass over all patterns per test) to seconds. Other data run the contexts in parallel with the
incremental filter above. Both give the same graphs and per-context test counts, and the
paper's test count (``n_tests``) counts every test asked.

Pearson's test (the paper's Section 4.2: chi-square at level ``significance``, its ``alpha``).
``X^2 = sum (O - E)^2 / E`` over the cells of non-empty rows and columns, ``E = row * col / N``;
degrees of freedom ``(r' - 1)(c' - 1)`` with ``r'``, ``c'`` the numbers of non-empty rows and
columns (the usual adjustment for structural zeros: an empty row carries no information). The
test says *dependent* when ``X^2`` exceeds the ``1 - significance`` quantile of chi-square with
that many degrees of freedom (``crit[dof]``, tabulated by the caller with scipy). A table says
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
    mismatch,
    adj,
    blanket,
    cards,
    table,
    crit,
    min_rows_per_cell,
    context_specific,
    counters,
):
    """The verdict on ``I(X_a, X_b | blanket of a)`` for :func:`grow_shrink`, the blanket
    without ``left_out`` (``b`` in the shrink phase, ``-1`` in the grow phase, where ``b`` is
    not in it); counts it in ``counters`` (all but the phase counts)."""
    if context_specific:
        verdict = _context_test(
            P, c, a, b, x, mismatch, left_out, cards, table, crit, min_rows_per_cell
        )
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
def _set_edge(P, x, a, b, present, adj, mismatch, incremental):
    """Add (``present``) or remove the edge ``a - b`` for :func:`grow_shrink`, keeping the
    rows' mismatch counts in step."""
    adj[a, b] = present
    adj[b, a] = present
    if incremental:
        step = 1 if present else -1
        for p in range(P.shape[0]):
            if P[p, b] != x[b]:
                mismatch[p] += step


@nb.njit(cache=True)
def grow_shrink(
    P, c, x, cards, crit, min_rows_per_cell, context_specific, repeat_grow, adj, counters
):
    """Algorithm 2 on the graph ``adj`` (n x n bool, modified in place) of context ``x``.

    Nodes are taken in index order ``0 .. n-1``, and so are the candidates of the grow phase and
    the blanket members of the shrink phase (the fixed order the paper's analysis assumes).
    Each phase is one pass, as in Algorithm 2, unless ``repeat_grow``: then the grow pass is
    repeated until it adds nothing (Margaritis & Thrun's original Grow-Shrink), which also
    finds a neighbour that looked independent of ``a`` under a smaller blanket. The blanket used
    by a test is the current one (edges added or removed earlier in the pass count).
    ``counters`` accumulates ``[tests, unreliable tests, grow tests, shrink tests, tests
    computed]``. (Binary data take :func:`canonical_graphs_cached`, the same algorithm on all
    contexts at once.)
    """
    n = P.shape[1]
    m = P.shape[0]
    table = np.zeros(int(cards.max()) ** 2, dtype=np.int64)
    mismatch = np.zeros(m, dtype=np.int64)
    blanket = np.zeros(n, dtype=np.int64)
    for a in range(n):
        if context_specific:
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
                    mismatch,
                    adj,
                    blanket,
                    cards,
                    table,
                    crit,
                    min_rows_per_cell,
                    context_specific,
                    counters,
                )
                counters[2] += 1
                if verdict == DEPENDENT:
                    added = True
                    _set_edge(P, x, a, b, True, adj, mismatch, context_specific)
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
                mismatch,
                adj,
                blanket,
                cards,
                table,
                crit,
                min_rows_per_cell,
                context_specific,
                counters,
            )
            counters[3] += 1
            if verdict != DEPENDENT:
                _set_edge(P, x, a, b, False, adj, mismatch, context_specific)


def _graphs_of_contexts(loop):
    """The kernel of Algorithm 1's loop, its loop over contexts run by ``loop``:
    ``nb.prange`` on numba's thread pool, ``range`` in a forked snapshot writer, which must not
    start the pool (:mod:`streammn.kernel_mode`). One body, two kernels."""

    def canonical_graphs(P, c, contexts, cards, crit, min_rows_per_cell, repeat_grow):
        """Algorithm 1's loop: one Grow-Shrink graph per context (row of ``contexts``), from
        the empty graph. Returns ``(adjacency[k, n, n], counters[k, 5])``; contexts are
        independent, so they run in parallel and the result does not depend on the number of
        threads. Binary data take :func:`canonical_graphs_cached`, which gives the same graphs
        and test counts."""
        k, n = contexts.shape
        adj = np.zeros((k, n, n), dtype=np.bool_)
        counters = np.zeros((k, 5), dtype=np.int64)
        for i in loop(k):
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
            )
        return adj, counters

    return canonical_graphs


canonical_graphs = nb.njit(cache=True, parallel=True)(_graphs_of_contexts(nb.prange))
canonical_graphs_serial = nb.njit(cache=True)(_graphs_of_contexts(range))


# binary data: every context at once -------------------------------------------------------
def new_cache():
    """An empty verdict cache for :func:`cached_graphs_into`."""
    return Dict.empty(key_type=_KEY, value_type=types.int64)


@nb.njit(cache=True)
def pack_rows(P):
    """Each binary row as the bits of one int64 (bit ``v`` is ``X_v``; fewer than 63
    variables)."""
    m, n = P.shape
    words = np.zeros(m, dtype=np.int64)
    for p in range(m):
        w = np.int64(0)
        for v in range(n):
            if P[p, v]:
                w |= np.int64(1) << v
        words[p] = w
    return words


@nb.njit(cache=True)
def _scanned_verdict(words, c, a, b, mask, x, crit, min_rows_per_cell, table):
    """The verdict on ``I(X_a, X_b | x_S)`` (``S`` the bits of ``mask``) from one sequential
    pass over all patterns: four masked sums the compiler vectorises, no row list."""
    n_all = n_a = n_b = n_ab = 0
    for p in range(words.shape[0]):
        w = words[p]
        weight = c[p] * (((w ^ x) & mask) == 0)
        wa = (w >> a) & 1
        wb = (w >> b) & 1
        n_all += weight
        n_a += weight * wa
        n_b += weight * wb
        n_ab += weight * (wa & wb)
    table[3] = n_ab
    table[2] = n_a - n_ab
    table[1] = n_b - n_ab
    table[0] = n_all - n_a - n_b + n_ab
    x2, dof, total, cells = table_statistic(table, 2, 2)
    return decide(x2, dof, total, cells, crit, min_rows_per_cell)


@nb.njit(cache=True)
def _packed_verdict(
    words, c, rows, start, stop, a, b, mask, x, n, crit, min_rows_per_cell, cache, table
):
    """``(verdict, computed)`` of ``I(X_a, X_b | x_S)``, ``S`` the bits of ``mask``: from
    ``cache`` when a context asked it before (the key ``(pair, S, x_S)`` holds the test
    exactly; the table of ``(b, a)`` is the transpose of that of ``(a, b)``, with the same
    statistic), else from the patterns ``rows[start:stop]`` that agree with ``x`` on ``S``
    (a superset of them is fine)."""
    key = (min(a, b) * n + max(a, b), mask, x & mask)
    if key in cache:
        return cache[key], False
    if 4 * (stop - start) > words.shape[0]:  # a sequential pass beats gathering that many
        verdict = _scanned_verdict(words, c, a, b, mask, x, crit, min_rows_per_cell, table)
    else:
        table[:4] = 0
        for k in range(start, stop):
            w = words[rows[k]]
            if ((w ^ x) & mask) == 0:
                table[((w >> a) & 1) * 2 + ((w >> b) & 1)] += c[rows[k]]
        x2, dof, total, cells = table_statistic(table, 2, 2)
        verdict = decide(x2, dof, total, cells, crit, min_rows_per_cell)
    cache[key] = verdict
    return verdict, True


@nb.njit(cache=True)
def _partition(keys, items, start, stop, bit):
    """Reorder ``items[start:stop]`` so that those whose ``keys[item]`` has ``bit`` clear come
    first; returns where the others start."""
    lo, hi = start, stop - 1
    while True:
        while lo <= hi and not (keys[items[lo]] >> bit) & 1:
            lo += 1
        while lo <= hi and (keys[items[hi]] >> bit) & 1:
            hi -= 1
        if lo >= hi:
            return lo
        items[lo], items[hi] = items[hi], items[lo]


@nb.njit(cache=True)
def _count_test(counters, order, c0, c1, phase, verdict, computed):
    """Count one test asked by every context ``order[c0:c1]`` (``phase``: 2 grow, 3 shrink);
    a computed test is counted once, at the first of them."""
    for t in range(c0, c1):
        i = order[t]
        counters[i, 0] += 1
        counters[i, phase] += 1
        if verdict == UNRELIABLE:
            counters[i, 1] += 1
    if computed:
        counters[order[c0], 4] += 1


@nb.njit(cache=True)
def _shrink(
    words, c, a, mask, x, n, crit, min_rows_per_cell, cache, table, counters, order, c0, c1
):
    """The shrink phase of node ``a`` for the contexts ``order[c0:c1]``, which share the
    blanket ``mask`` and its values ``x``; returns the blanket left. A test the cache does not
    hold is one pass over all patterns (:func:`_scanned_verdict`): its rows, those that agree
    on the blanket less one member, are no range of the grow tree."""
    for b in range(n):
        bit = np.int64(1) << b
        if not mask & bit:
            continue
        left = mask & ~bit
        key = (min(a, b) * n + max(a, b), left, x & left)
        computed = key not in cache
        if computed:
            cache[key] = _scanned_verdict(words, c, a, b, left, x, crit, min_rows_per_cell, table)
        verdict = cache[key]
        _count_test(counters, order, c0, c1, 3, verdict, computed)
        if verdict != DEPENDENT:
            mask = left
    return mask


@nb.njit(cache=True)
def cached_graphs_into(
    words, c, xs, a_start, a_stop, crit, min_rows_per_cell, repeat_grow, adj, counters, cache
):
    """Nodes ``a_start .. a_stop - 1`` of Algorithm 2 for every context (packed rows ``xs``)
    at once, into ``adj`` and ``counters`` (:func:`canonical_graphs_cached`).

    A node's Grow-Shrink in one context depends only on the node's blanket when its turn
    comes (the edges earlier nodes left), the context's values there and on the variables it
    adds: contexts are grouped by the first two, and each group runs the grow pass as a tree
    whose nodes are a blanket and its values. The group's patterns that agree with it on its
    blanket are listed once (``rows``); a dependent variable splits the contexts and the
    node's patterns by their value (in place, as a quicksort partitions), so each test is
    computed once per tree node, over that node's patterns only (verdicts are also shared
    through ``cache``), and the work of a tree level is bounded by the group's patterns, not by
    its contexts. A leaf's contexts share their blanket and its values, so one shrink phase
    serves them all (:func:`_shrink`)."""
    k = xs.shape[0]
    m = words.shape[0]
    n = adj.shape[1]
    table = np.zeros(4, dtype=np.int64)
    rows = np.empty(m, dtype=np.int64)
    depth = 2 * n + 2
    st_c = np.empty((depth, 2), dtype=np.int64)
    st_p = np.empty((depth, 2), dtype=np.int64)
    st_mask = np.empty(depth, dtype=np.int64)
    st_next = np.empty(depth, dtype=np.int64)
    st_added = np.empty(depth, dtype=np.bool_)
    start_mask = np.empty(k, dtype=np.int64)
    start_values = np.empty(k, dtype=np.int64)
    for a in range(a_start, a_stop):
        for i in range(k):
            mask = np.int64(0)
            for v in range(n):
                if adj[i, a, v]:
                    mask |= np.int64(1) << v
            start_mask[i] = mask
            start_values[i] = xs[i] & mask
        by_values = np.argsort(start_values, kind="mergesort")
        order = by_values[np.argsort(start_mask[by_values], kind="mergesort")]
        g0 = 0
        while g0 < k:
            first = order[g0]
            g1 = g0 + 1
            while (
                g1 < k
                and start_mask[order[g1]] == start_mask[first]
                and start_values[order[g1]] == start_values[first]
            ):
                g1 += 1
            mask0, x0 = start_mask[first], xs[first]
            n_rows = 0
            for p in range(m):
                if ((words[p] ^ x0) & mask0) == 0:
                    rows[n_rows] = p
                    n_rows += 1
            st_c[0, 0], st_c[0, 1], st_p[0, 0], st_p[0, 1] = g0, g1, 0, n_rows
            st_mask[0], st_next[0], st_added[0] = mask0, 0, False
            sp = 1
            while sp > 0:
                sp -= 1
                c0, c1, p0, p1 = st_c[sp, 0], st_c[sp, 1], st_p[sp, 0], st_p[sp, 1]
                mask, b, added = st_mask[sp], st_next[sp], st_added[sp]
                x = xs[order[c0]]
                split = False
                while True:
                    while b < n:
                        bit = np.int64(1) << b
                        if b != a and not mask & bit:
                            verdict, computed = _packed_verdict(
                                words,
                                c,
                                rows,
                                p0,
                                p1,
                                a,
                                b,
                                mask,
                                x,
                                n,
                                crit,
                                min_rows_per_cell,
                                cache,
                                table,
                            )
                            _count_test(counters, order, c0, c1, 2, verdict, computed)
                            if verdict == DEPENDENT:
                                split = True
                                break
                        b += 1
                    if split or not (repeat_grow and added):
                        break
                    b, added = 0, False
                if split:
                    cm = _partition(xs, order, c0, c1, b)
                    pm = _partition(words, rows, p0, p1, b)
                    for lo_c, hi_c, lo_p, hi_p in ((c0, cm, p0, pm), (cm, c1, pm, p1)):
                        if hi_c > lo_c:
                            st_c[sp, 0], st_c[sp, 1] = lo_c, hi_c
                            st_p[sp, 0], st_p[sp, 1] = lo_p, hi_p
                            st_mask[sp], st_next[sp] = mask | bit, b + 1
                            st_added[sp] = True
                            sp += 1
                    continue
                final = _shrink(
                    words,
                    c,
                    a,
                    mask,
                    x,
                    n,
                    crit,
                    min_rows_per_cell,
                    cache,
                    table,
                    counters,
                    order,
                    c0,
                    c1,
                )
                for t in range(c0, c1):
                    i = order[t]
                    for v in range(n):
                        if v != a:
                            linked = ((final >> v) & 1) == 1
                            adj[i, a, v] = linked
                            adj[i, v, a] = linked
            g0 = g1


@nb.njit(cache=True)
def canonical_graphs_cached(P, c, contexts, cards, crit, min_rows_per_cell, repeat_grow):
    """:func:`canonical_graphs` for binary data with fewer than 63 variables: every context at
    once, node by node, the contexts that ask the same tests sharing them
    (:func:`cached_graphs_into`); the same graphs and test counts."""
    k, n = contexts.shape
    adj = np.zeros((k, n, n), dtype=np.bool_)
    counters = np.zeros((k, 5), dtype=np.int64)
    cached_graphs_into(
        pack_rows(P),
        c,
        pack_rows(contexts),
        0,
        n,
        crit,
        min_rows_per_cell,
        repeat_grow,
        adj,
        counters,
        Dict.empty(key_type=_KEY, value_type=types.int64),
    )
    return adj, counters
