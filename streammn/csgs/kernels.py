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
context is ``I(X_0, X_1)``. On binary data :func:`canonical_graphs_tree` runs every context
at once, node by node, as a tree: the contexts that reach a node with the same blanket and
values run its grow pass together, a dependent variable splits them (and the patterns) by its
value, and a leaf's contexts share one shrink phase (:func:`tree_graphs_into`). A test is
computed once per tree node (a tenth of those asked on a 100k-row stream of 30 variables with
5,000 contexts) over the patterns of its tree node, not over all of them: learning the
canonical model of that stream went from about 20 minutes (contexts in turn, one pass over all
patterns per test) to seconds. Rows pack into ``ceil(n / 64)`` int64 words (any number of
variables), and the patterns are also kept column by column as bitsets: the tests of a tree
node with many patterns, and those of the shrink phase, whose patterns (agreeing on the
blanket less some members) are no range of the tree, are popcounts over them, 64 patterns a
word (:func:`_bitset_verdict`). On a 100k-row stream of 100 variables, where nearly every
context ends its grow pass alone, this learns the 5,000 contexts' graphs in minutes where
contexts in turn would take hours. Other data run the contexts in parallel with the
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
from numba.extending import intrinsic

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
def _edge_test(tester, a, b, left_out):
    """The verdict on ``I(X_a, X_b | blanket of a)`` for :func:`grow_shrink`, the blanket
    without ``left_out`` (``b`` in the shrink phase, ``-1`` in the grow phase, where ``b`` is
    not in it); counts it in ``counters`` (all but the phase counts). ``tester``: the
    arguments and scratch of :func:`grow_shrink` that a test reads, in the order unpacked
    below."""
    P, c, x, cards, crit, min_rows_per_cell, context_specific = tester[:7]
    adj, counters, table, mismatch, blanket = tester[7:]
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
    computed]``. (Binary data take :func:`canonical_graphs_tree`, the same algorithm on all
    contexts at once.)
    """
    n = P.shape[1]
    m = P.shape[0]
    table = np.zeros(int(cards.max()) ** 2, dtype=np.int64)
    mismatch = np.zeros(m, dtype=np.int64)
    blanket = np.zeros(n, dtype=np.int64)
    tester = (
        P,
        c,
        x,
        cards,
        crit,
        min_rows_per_cell,
        context_specific,
        adj,
        counters,
        table,
        mismatch,
        blanket,
    )
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
                verdict = _edge_test(tester, a, b, -1)
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
            verdict = _edge_test(tester, a, b, b)
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
        threads. Binary data take :func:`canonical_graphs_tree`, which gives the same graphs
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
@nb.njit(cache=True)
def pack_rows(P):
    """Each binary row of ``P[m, n]`` as ``W = ceil(n / 64)`` int64 words (``words[p, j]``):
    bit ``v % 64`` of word ``v // 64`` is ``X_v``."""
    m, n = P.shape
    words = np.zeros((m, (n + 63) // 64), dtype=np.int64)
    for p in range(m):
        for v in range(n):
            if P[p, v]:
                words[p, v >> 6] |= np.int64(1) << (v & 63)
    return words


@nb.njit(cache=True)
def pack_patterns(P, c):
    """The patterns ``P[m, n]`` and their counts ``c`` in order of decreasing count, packed
    two ways: as rows (:func:`pack_rows`) and column by column, as bitsets over the patterns
    (bit ``p % 64`` of word ``p // 64`` is pattern ``p``): ``columns[v]`` holds the patterns
    with ``X_v = 1`` and ``planes[k]`` those whose count has bit ``k`` set, all in its first
    ``plane_words[k]`` words (the patterns that count at least ``2^k`` come first). Returns
    ``(words, counts, columns, planes, plane_words)`` (:func:`_bitset_verdict`)."""
    m, n = P.shape
    order = np.argsort(-c, kind="mergesort")
    counts = c[order]
    top = counts[0] if m else 0
    n_planes = 1
    while top >> n_planes:
        n_planes += 1
    columns = np.zeros((n, (m + 63) // 64), dtype=np.int64)
    planes = np.zeros((n_planes, (m + 63) // 64), dtype=np.int64)
    plane_words = np.zeros(n_planes, dtype=np.int64)
    for p in range(m):
        bit = np.int64(1) << (p & 63)
        for v in range(n):
            if P[order[p], v]:
                columns[v, p >> 6] |= bit
        for k in range(n_planes):
            if (counts[p] >> k) & 1:
                planes[k, p >> 6] |= bit
                plane_words[k] = (p >> 6) + 1
    return pack_rows(P[order]), counts, columns, planes, plane_words


@intrinsic
def _popcount(typingctx, x):
    """The number of set bits of an int64 (LLVM's ``ctpop``)."""

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return types.int64(types.int64), codegen


@nb.njit(cache=True)
def _and_value(agree, columns, v, value):
    """Keep in the bitset ``agree`` the patterns with ``X_v = value``."""
    column = columns[v]
    flip = np.int64(0) if value else np.int64(-1)
    for t in range(agree.shape[0]):
        agree[t] &= column[t] ^ flip


@nb.njit(cache=True)
def _agree_on(agree, columns, mask, x):
    """``agree``: the bitset of the patterns that agree with ``x`` on the bits of ``mask``."""
    agree[:] = -1
    for v in range(columns.shape[0]):
        if (mask[v >> 6] >> (v & 63)) & 1:
            _and_value(agree, columns, v, (x[v >> 6] >> (v & 63)) & 1)


@nb.njit(cache=True)
def _bitset_verdict(tester, a, b, agree):
    """The verdict on ``I(X_a, X_b | x_S)`` from the bitset ``agree`` of the patterns that
    agree with the context on ``S``; ``tester``: the patterns' ``columns``, ``planes`` and
    ``plane_words`` (:func:`pack_patterns`), then ``crit``, ``min_rows_per_cell`` and the
    ``table`` scratch of :func:`_binary_verdict`. The table's counts are popcounts of
    ``agree`` with the columns of ``a`` and ``b``, 64 patterns a word, count bit by count bit
    (``planes``; most counts are small, so the higher bits take few words)."""
    columns, planes, plane_words, crit, min_rows_per_cell, table = tester
    col_a, col_b = columns[a], columns[b]
    n_all = n_a = n_b = n_ab = 0
    for k in range(planes.shape[0]):
        plane = planes[k]
        s_all = s_a = s_b = s_ab = 0
        for t in range(plane_words[k]):
            g = agree[t] & plane[t]
            ga = g & col_a[t]
            s_all += _popcount(g)
            s_a += _popcount(ga)
            s_b += _popcount(g & col_b[t])
            s_ab += _popcount(ga & col_b[t])
        n_all += s_all << k
        n_a += s_a << k
        n_b += s_b << k
        n_ab += s_ab << k
    return _binary_verdict(n_all, n_a, n_b, n_ab, crit, min_rows_per_cell, table)


@nb.njit(cache=True)
def _binary_verdict(n_all, n_a, n_b, n_ab, crit, min_rows_per_cell, table):
    """The verdict on the ``2 x 2`` table of ``n_all`` rows, ``n_a`` with ``X_a = 1``, ``n_b``
    with ``X_b = 1``, ``n_ab`` with both (``table`` its scratch): :func:`table_statistic`'s
    arithmetic, in its order (the same statistic to the bit), without its margin arrays."""
    table[3] = n_ab
    table[2] = n_a - n_ab
    table[1] = n_b - n_ab
    table[0] = n_all - n_a - n_b + n_ab
    rows_nz = (n_all - n_a > 0) + (n_a > 0)
    cols_nz = (n_all - n_b > 0) + (n_b > 0)
    x2 = 0.0
    if rows_nz > 1 and cols_nz > 1:
        for i in range(2):
            for j in range(2):
                e = (n_a if i else n_all - n_a) * (n_b if j else n_all - n_b) / n_all
                d = table[i * 2 + j] - e
                x2 += d * d / e
    dof = (rows_nz - 1) * (cols_nz - 1)
    return decide(x2, dof, n_all, rows_nz * cols_nz, crit, min_rows_per_cell)


@nb.njit(cache=True)
def _grow_verdict(tester, agree, words, c, start, stop, a, b):
    """The verdict on ``I(X_a, X_b | x_S)`` in the grow pass of a tree node: from its
    patterns ``words[start:stop]`` (counts ``c``), those that agree with the context on
    ``S``, in one pass over them; or, when ``stop`` is ``-1`` (many of them), from their
    bitset ``agree`` (:func:`_bitset_verdict`, which says what ``tester`` holds)."""
    if stop < 0:
        return _bitset_verdict(tester, a, b, agree)
    crit, min_rows_per_cell, table = tester[3], tester[4], tester[5]
    ja, sa, jb, sb = a >> 6, a & 63, b >> 6, b & 63
    n_all = n_a = n_b = n_ab = 0
    for p in range(start, stop):  # sums, not table cells: no dependence from row to row
        wa = (words[p, ja] >> sa) & 1
        wb = (words[p, jb] >> sb) & 1
        n_all += c[p]
        n_a += c[p] * wa
        n_b += c[p] * wb
        n_ab += c[p] * (wa & wb)
    return _binary_verdict(n_all, n_a, n_b, n_ab, crit, min_rows_per_cell, table)


@nb.njit(cache=True)
def _partition(keys, items, start, stop, v):
    """Reorder ``items[start:stop]`` so that those with ``X_v = 0`` (in ``keys[item]``, packed
    rows) come first; returns where the others start."""
    j, s = v >> 6, v & 63
    lo, hi = start, stop - 1
    while True:
        while lo <= hi and not (keys[items[lo], j] >> s) & 1:
            lo += 1
        while lo <= hi and (keys[items[hi], j] >> s) & 1:
            hi -= 1
        if lo >= hi:
            return lo
        items[lo], items[hi] = items[hi], items[lo]


@nb.njit(cache=True)
def _partition_rows(words, c, start, stop, v):
    """Reorder the packed rows ``words[start:stop]`` (and their counts ``c``) so that those
    with ``X_v = 0`` come first; returns where the others start."""
    j, s = v >> 6, v & 63
    lo, hi = start, stop - 1
    while True:
        while lo <= hi and not (words[lo, j] >> s) & 1:
            lo += 1
        while lo <= hi and (words[hi, j] >> s) & 1:
            hi -= 1
        if lo >= hi:
            return lo
        for t in range(words.shape[1]):
            words[lo, t], words[hi, t] = words[hi, t], words[lo, t]
        c[lo], c[hi] = c[hi], c[lo]


@nb.njit(cache=True)
def _count_test(counters, order, c0, c1, phase, verdict):
    """Count one test asked by every context ``order[c0:c1]`` (``phase``: 2 grow, 3 shrink),
    and computed once, counted at the first of them."""
    for t in range(c0, c1):
        i = order[t]
        counters[i, 0] += 1
        counters[i, phase] += 1
        if verdict == UNRELIABLE:
            counters[i, 1] += 1
    counters[order[c0], 4] += 1


@nb.njit(cache=True)
def _shrink(tester, a, mask, x, counters, order, c0, c1, bits):
    """The shrink phase of node ``a`` for the contexts ``order[c0:c1]``, which share the
    blanket ``mask`` and its values ``x``; leaves the blanket left in ``mask`` (``tester``:
    see :func:`_bitset_verdict`). The patterns
    of the test of member ``b`` agree with ``x`` on the members kept before it and on all
    those after it, which are no range of the grow tree: the tests are counted by bitsets
    (:func:`_bitset_verdict`), ``bits[1]`` the patterns that agree on the members kept so far
    and ``bits[2 + b]`` those that agree on the members after ``b``
    (:func:`_suffix_bitsets`)."""
    columns = tester[0]
    n = columns.shape[0]
    bits[1] = -1
    _suffix_bitsets(bits, columns, mask, x)
    for b in range(n):
        bit = np.int64(1) << (b & 63)
        if not mask[b >> 6] & bit:
            continue
        mask[b >> 6] &= ~bit  # the blanket less b: the test's conditioning set
        for t in range(bits.shape[1]):
            bits[0, t] = bits[1, t] & bits[2 + b, t]
        verdict = _bitset_verdict(tester, a, b, bits[0])
        _count_test(counters, order, c0, c1, 3, verdict)
        if verdict == DEPENDENT:
            mask[b >> 6] |= bit
            _and_value(bits[1], columns, b, (x[b >> 6] >> (b & 63)) & 1)


@nb.njit(cache=True)
def _suffix_bitsets(bits, columns, mask, x):
    """``bits[2 + v]`` for every member ``v`` of ``mask``: the bitset of the patterns that
    agree with ``x`` on the members after ``v`` (``bits[0]`` is scratch)."""
    bits[0] = -1
    for v in range(columns.shape[0] - 1, -1, -1):
        if (mask[v >> 6] >> (v & 63)) & 1:
            bits[2 + v] = bits[0]
            _and_value(bits[0], columns, v, (x[v >> 6] >> (v & 63)) & 1)


@nb.njit(cache=True)
def _sort_groups(mask, values):
    """The contexts (rows of ``mask`` and ``values``) in order of their blanket words, then
    of their values on it (stable)."""
    k, w = mask.shape
    order = np.arange(k)
    column = np.empty(k, dtype=np.int64)
    for keys in (values, mask):
        for j in range(w - 1, -1, -1):
            for t in range(k):
                column[t] = keys[order[t], j]
            order = order[np.argsort(column, kind="mergesort")]
    return order


@nb.njit(cache=True)
def tree_graphs_into(
    words,
    c,
    columns,
    planes,
    plane_words,
    xs,
    a_start,
    a_stop,
    crit,
    min_rows_per_cell,
    repeat_grow,
    adj,
    counters,
):
    """Nodes ``a_start .. a_stop - 1`` of Algorithm 2 for every context at once, into ``adj``
    and ``counters`` (:func:`canonical_graphs_tree`): the patterns and their counts as
    :func:`pack_patterns` packs them, the contexts ``xs`` as :func:`pack_rows` does.

    A node's Grow-Shrink in one context depends only on the node's blanket when its turn
    comes (the edges earlier nodes left), the context's values there and on the variables it
    adds: contexts are grouped by the first two, and each group runs the grow pass as a tree
    whose nodes are a blanket and its values. The group's patterns that agree with it on its
    blanket are found by bitsets and copied once (``local``, their counts ``local_c``: a test
    reads a tree node's patterns in sequence); a dependent variable splits the contexts and
    the node's patterns by their value (in place, as a quicksort partitions), so each test is
    computed once per tree node, over that node's patterns only (or by bitsets when they are
    many), and the work of a tree level is bounded by the group's patterns, not by its
    contexts. A leaf's contexts share their blanket and its values, so one shrink phase
    serves them all (:func:`_shrink`)."""
    k, w = xs.shape
    m = words.shape[0]
    n = adj.shape[1]
    tester = (columns, planes, plane_words, crit, min_rows_per_cell, np.zeros(4, dtype=np.int64))
    bits = np.empty((n + 2, columns.shape[1]), dtype=np.int64)
    many = (columns.shape[1] + plane_words.sum()) // 2  # rows that cost what bitsets do
    local = np.empty((m, w), dtype=np.int64)
    local_c = np.empty(m, dtype=np.int64)
    depth = 2 * n + 2
    st_c = np.empty((depth, 2), dtype=np.int64)
    st_p = np.empty((depth, 2), dtype=np.int64)
    st_mask = np.empty((depth, w), dtype=np.int64)
    st_next = np.empty(depth, dtype=np.int64)
    st_added = np.empty(depth, dtype=np.bool_)
    mask = np.empty(w, dtype=np.int64)
    start_mask = np.empty((k, w), dtype=np.int64)
    start_values = np.empty((k, w), dtype=np.int64)
    for a in range(a_start, a_stop):
        start_mask[:] = 0
        for i in range(k):
            for v in range(n):
                if adj[i, a, v]:
                    start_mask[i, v >> 6] |= np.int64(1) << (v & 63)
            for j in range(w):
                start_values[i, j] = xs[i, j] & start_mask[i, j]
        order = _sort_groups(start_mask, start_values)
        g0 = 0
        while g0 < k:
            first = order[g0]
            g1 = g0 + 1
            while g1 < k and (start_mask[order[g1]] == start_mask[first]).all():
                if not (start_values[order[g1]] == start_values[first]).all():
                    break
                g1 += 1
            _agree_on(bits[0], columns, start_mask[first], xs[first])
            n_rows = 0
            for t in range(bits.shape[1]):
                found = bits[0, t]
                while found != 0:
                    low = found & -found
                    p = (t << 6) + _popcount(low - 1)
                    if p >= m:
                        break
                    local[n_rows] = words[p]
                    local_c[n_rows] = c[p]
                    n_rows += 1
                    found ^= low
            st_c[0, 0], st_c[0, 1], st_p[0, 0], st_p[0, 1] = g0, g1, 0, n_rows
            st_mask[0] = start_mask[first]
            st_next[0], st_added[0] = 0, False
            sp = 1
            while sp > 0:
                sp -= 1
                c0, c1, p0, p1 = st_c[sp, 0], st_c[sp, 1], st_p[sp, 0], st_p[sp, 1]
                mask[:] = st_mask[sp]
                b, added = st_next[sp], st_added[sp]
                x = xs[order[c0]]
                stop = p1
                if p1 - p0 > many:  # the tests of the tree node by bitsets
                    _agree_on(bits[0], columns, mask, x)
                    stop = -1
                split = False
                while True:
                    while b < n:
                        bit = np.int64(1) << (b & 63)
                        if b != a and not mask[b >> 6] & bit:
                            verdict = _grow_verdict(tester, bits[0], local, local_c, p0, stop, a, b)
                            _count_test(counters, order, c0, c1, 2, verdict)
                            if verdict == DEPENDENT:
                                split = True
                                break
                        b += 1
                    if split or not (repeat_grow and added):
                        break
                    b, added = 0, False
                if split:
                    cm = _partition(xs, order, c0, c1, b)
                    pm = _partition_rows(local, local_c, p0, p1, b)
                    for lo_c, hi_c, lo_p, hi_p in ((c0, cm, p0, pm), (cm, c1, pm, p1)):
                        if hi_c > lo_c:
                            st_c[sp, 0], st_c[sp, 1] = lo_c, hi_c
                            st_p[sp, 0], st_p[sp, 1] = lo_p, hi_p
                            st_mask[sp] = mask
                            st_mask[sp, b >> 6] |= bit
                            st_next[sp], st_added[sp] = b + 1, True
                            sp += 1
                    continue
                _shrink(tester, a, mask, x, counters, order, c0, c1, bits)
                for t in range(c0, c1):
                    i = order[t]
                    for v in range(n):
                        if v != a:
                            linked = ((mask[v >> 6] >> (v & 63)) & 1) == 1
                            adj[i, a, v] = linked
                            adj[i, v, a] = linked
            g0 = g1


@nb.njit(cache=True)
def canonical_graphs_tree(P, c, contexts, cards, crit, min_rows_per_cell, repeat_grow):
    """:func:`canonical_graphs` for binary data: every context at once, node by node, the
    contexts that ask the same tests sharing them (:func:`tree_graphs_into`); the same
    graphs and test counts."""
    k, n = contexts.shape
    adj = np.zeros((k, n, n), dtype=np.bool_)
    counters = np.zeros((k, 5), dtype=np.int64)
    words, counts, columns, planes, plane_words = pack_patterns(P, c)
    tree_graphs_into(
        words,
        counts,
        columns,
        planes,
        plane_words,
        pack_rows(contexts),
        0,
        n,
        crit,
        min_rows_per_cell,
        repeat_grow,
        adj,
        counters,
    )
    return adj, counters
