"""Numba kernels shared by both tree learners: routing, leaf statistics, split scoring.

Layout of the sufficient statistics. Candidate tests are ``X_j = a``. For every variable ``j``
the *indicator columns* are ``x_j == a`` for ``a = 1 .. card_j - 1`` (value 0 is implied by the
others), ``K = sum_j (card_j - 1)`` columns in all; for an all-binary schema the indicator matrix
is the row matrix itself, so no copy is made. An *active leaf* (a frontier leaf in exact mode, a
leaf still collecting statistics in Hoeffding mode) owns a *slot* ``s`` with

    tot[s, y]        rows counted at the leaf with target value y
    stats[s, y, k]   of those, rows whose indicator column k is 1

which is everything needed to score every candidate test at the leaf: a row batch adds
``indicators[r, :]`` to ``stats[s, y_r, :]``, a contiguous vector add.
"""

from __future__ import annotations

import numba as nb
import numpy as np

MISSING = 255  # a missing value (schema's missing mode): never counted as a target


@nb.njit(cache=True, inline="always")
def _leaf_of(row, root, links):
    node = root
    v = links[node, 0]
    while v >= 0:  # branch-free step: true child in column 2, false child in column 3
        node = links[node, 2 + (row[v] != links[node, 1])]
        v = links[node, 0]
    return node


@nb.njit(cache=True, inline="always")
def _leaves4(r0, r1, r2, r3, n0, n1, n2, n3, links):
    """Route four rows ``r0..r3`` from nodes ``n0..n3`` in lockstep (the same row through four
    trees, or four rows through one tree): the four dependent chains of loads overlap, about
    2.5x faster than one after another. A leaf has var -1, so the AND of the four vars is
    negative only when all four reached a leaf."""
    v0 = links[n0, 0]
    v1 = links[n1, 0]
    v2 = links[n2, 0]
    v3 = links[n3, 0]
    while (v0 & v1 & v2 & v3) >= 0:
        if v0 >= 0:
            n0 = links[n0, 2 + (r0[v0] != links[n0, 1])]
            v0 = links[n0, 0]
        if v1 >= 0:
            n1 = links[n1, 2 + (r1[v1] != links[n1, 1])]
            v1 = links[n1, 0]
        if v2 >= 0:
            n2 = links[n2, 2 + (r2[v2] != links[n2, 1])]
            v2 = links[n2, 0]
        if v3 >= 0:
            n3 = links[n3, 2 + (r3[v3] != links[n3, 1])]
            v3 = links[n3, 0]
    return n0, n1, n2, n3


def _router(loop):
    """The routing kernel, its loop over rows run by ``loop``: ``nb.prange`` on numba's thread
    pool, ``range`` in a forked snapshot writer, which must not start the pool
    (:mod:`streammn.kernel_mode`). One body, two kernels."""

    def route(rows, roots, links):
        """Leaf node reached by every row in every tree: shape (n_rows, n_trees)."""
        n = rows.shape[0]
        T = roots.shape[0]
        out = np.empty((n, T), dtype=np.int32)
        for r in loop(n):
            row = rows[r]
            t = 0
            while t + 4 <= T:
                out[r, t], out[r, t + 1], out[r, t + 2], out[r, t + 3] = _leaves4(
                    row, row, row, row, roots[t], roots[t + 1], roots[t + 2], roots[t + 3], links
                )
                t += 4
            for t in range(t, T):
                out[r, t] = _leaf_of(row, roots[t], links)
        return out

    return route


def twins(body):
    """A kernel with a loop over independent blocks, compiled twice from one ``body``: the
    serial twin with ``range`` for its loop and the parallel one with ``nb.prange`` (numba's
    thread pool), as ``(serial, parallel)``. Both give the same bits; the caller picks one
    (:func:`streammn.kernel_mode.parallel_pays`: a parallel launch wakes every thread, and a
    forked snapshot writer must not start the pool). Numba's on-disk cache tells the two apart
    by the closure's contents (its index key hashes them), so both are cached and reloaded."""
    return nb.njit(cache=True)(body(range)), nb.njit(cache=True, parallel=True)(body(nb.prange))


route_serial, route = twins(_router)


LANES = 8  # rows routed in lockstep by route_fixed


@nb.njit(cache=True)
def routing_table(links):
    """``links`` with every leaf made a self-loop (its test ``x_0 != -1`` always sends a row to
    itself), so that a tree's depth in unconditional steps from the root takes any row to its
    leaf, with no branch on whether it got there (see :func:`route_fixed`)."""
    table = links.copy()
    for node in range(links.shape[0]):
        if links[node, 0] < 0:
            table[node, 0] = 0
            table[node, 1] = -1
            table[node, 2] = node
            table[node, 3] = node
    return table


@nb.njit(cache=True)
def route_fixed(rows, root, steps, table, leaves):
    """Leaf of every row in one tree: ``LANES`` rows at a time take ``steps`` branch-free steps
    through the self-looping ``table`` (:func:`routing_table`). The lanes' chains of loads
    overlap and nothing mispredicts, which beats stopping each row at its own leaf even though
    rows above the deepest leaf take idle steps (about a quarter of them on converged trees)."""
    n = rows.shape[0]
    nodes = np.empty(LANES, dtype=np.int32)
    r = 0
    while r + LANES <= n:
        for i in range(LANES):
            nodes[i] = root
        for _ in range(steps):
            for i in range(LANES):
                node = nodes[i]
                nodes[i] = table[node, 2 + (rows[r + i, table[node, 0]] != table[node, 1])]
        for i in range(LANES):
            leaves[r + i] = nodes[i]
        r += LANES
    for r in range(r, n):
        node = root
        for _ in range(steps):
            node = table[node, 2 + (rows[r, table[node, 0]] != table[node, 1])]
        leaves[r] = node


@nb.njit(cache=True)
def log_tables(prior, cards, size):
    """The logarithms split scoring takes of counts ``i < size``, made once: row 0 holds
    ``log(i + prior)``, row ``r`` ``log(i + prior / cards[r - 1])``. The same ``np.log`` of the
    same doubles as :func:`_loglik` computes without them, so gains are unchanged to the bit;
    the lookups replace the six logarithms a candidate test costs."""
    out = np.empty((cards.shape[0] + 1, size))
    for i in range(size):
        out[0, i] = np.log(i + prior)
    for r in range(cards.shape[0]):
        alpha = prior / cards[r]
        for i in range(size):
            out[r + 1, i] = np.log(i + alpha)
    return out


@nb.njit(cache=True, inline="always")
def _log_of(x, shift, logs, row):
    """``log(x + shift)`` for a count ``x >= 0`` (an integer): from row ``row`` of ``logs``
    when it holds it."""
    if x < logs.shape[1]:
        return logs[row, x]
    return np.log(np.float64(x) + shift)


@nb.njit(cache=True, inline="always")
def _loglik(c, d, alpha, prior, logs, row):
    """Training log-likelihood of the integer counts c[0:d] under their own smoothed estimate
    (logs of ``count + alpha`` from row ``row`` of :func:`log_tables`). A zero count adds a
    signed zero, which leaves the sum as it is: no branch to mispredict."""
    n = 0
    for y in range(d):
        n += c[y]
    ll = 0.0
    denom = _log_of(n, prior, logs, 0)
    for y in range(d):
        ll += c[y] * (_log_of(c[y], alpha, logs, row) - denom)
    return ll


def _slot_scorer(loop):
    """The split scoring kernel, its loop over blocks of slots run by ``loop`` (:func:`twins`)."""

    def score_slots(
        slots,
        slot_target,
        tot,
        stats,
        cards,
        offsets,
        min_count,
        prior,
        zero_tests,
        logs,
        log_row,
        binary=False,
        n_blocks=1,
    ):
        """Best and runner-up split of each listed slot by gain in training log-likelihood.

        Candidates are ``X_j = a`` for every variable ``j`` other than the target and, for
        binary ``j``, only ``a = 1`` (``X_j = 0`` is the same partition); for ``card_j > 2``
        every value (``a >= 1`` only without ``zero_tests``: missing mode, see
        :mod:`streammn.trees.missing`). They are visited in order of ``j`` then ``a`` and a
        later candidate wins only with a strictly larger gain, so ties go to the first. A
        candidate needs ``min_count`` rows on each side. Leaves are smoothed as
        ``(count + prior/d) / (total + prior)``; ``logs`` are :func:`log_tables` of ``prior``,
        the row of a ``d``-valued target at ``log_row[d]``.

        ``binary``: every variable is binary, so a slot is scored by
        :func:`_score_binary_slot`, the same arithmetic in fewer steps. ``n_blocks``: the
        slots are cut into this many blocks, each run on its own (in parallel in the parallel
        twin; each slot is scored on its own, so the blocks do not change the result).

        Returns per slot: best variable (-1 when no candidate qualifies), best value, best
        gain, the best gain among the other variables (``-inf`` when none), and the target
        counts on the true side of the best test, shape (n, max_card).
        """
        S = slots.shape[0]
        out = _score_outputs(S, tot.shape[1])
        scoring = (slot_target, tot, stats, cards, offsets, min_count, prior, zero_tests, logs)
        for b in loop(n_blocks):
            for q in range(b * S // n_blocks, (b + 1) * S // n_blocks):
                s = slots[q]
                if binary:
                    _score_binary_slot(
                        q, s, slot_target[s], tot, stats, min_count, prior, logs, log_row[2], out
                    )
                else:
                    _score_slot(q, s, scoring, log_row, out)
        return out

    return score_slots


score_slots, score_slots_parallel = twins(_slot_scorer)


@nb.njit(cache=True)
def _score_outputs(S, C):
    """best variable, value, gain, runner-up gain and true-side counts of ``S`` slots"""
    return (
        np.full(S, -1, dtype=np.int32),
        np.zeros(S, dtype=np.int32),
        np.full(S, -np.inf),
        np.full(S, -np.inf),
        np.zeros((S, C), dtype=np.int64),
    )


@nb.njit(cache=True)
def _score_slot(q, s, scoring, log_row, out):
    """Score slot ``s`` into entry ``q`` of the outputs ``out`` (:func:`_score_outputs`);
    ``scoring``: the arguments of :func:`score_slots` from ``slot_target`` to ``logs``."""
    slot_target, tot, stats, cards, offsets, min_count, prior, zero_tests, logs = scoring
    best_var, best_val, best_gain, second_gain, true_counts = out
    n_vars = cards.shape[0]
    t = slot_target[s]
    d = cards[t]
    alpha = prior / d
    ct = np.zeros(d, dtype=np.int64)
    cf = np.zeros(d, dtype=np.int64)
    parent = np.zeros(d, dtype=np.int64)
    n_all = 0
    for y in range(d):
        parent[y] = tot[s, y]
        n_all += tot[s, y]
    row = log_row[d]
    ll_parent = _loglik(parent, d, alpha, prior, logs, row)
    bv = -1
    ba = 0
    bg = -np.inf
    var_best = np.full(n_vars, -np.inf)
    for j in range(n_vars):
        if j == t:
            continue
        cj = cards[j]
        a0 = 1 if cj == 2 or not zero_tests else 0
        for a in range(a0, cj):
            n_true = 0
            for y in range(d):
                if a >= 1:
                    v = stats[s, y, offsets[j] + a - 1]
                else:
                    v = tot[s, y]
                    for b in range(1, cj):
                        v -= stats[s, y, offsets[j] + b - 1]
                ct[y] = v
                cf[y] = parent[y] - v
                n_true += v
            if n_true < min_count or n_all - n_true < min_count:
                continue
            g = (
                _loglik(ct, d, alpha, prior, logs, row)
                + _loglik(cf, d, alpha, prior, logs, row)
                - ll_parent
            )
            if g > var_best[j]:
                var_best[j] = g
            if g > bg:
                bg = g
                bv = j
                ba = a
    best_var[q] = bv
    best_val[q] = ba
    best_gain[q] = bg
    if bv >= 0:
        sg = -np.inf
        for j in range(n_vars):
            if j != bv and var_best[j] > sg:
                sg = var_best[j]
        second_gain[q] = sg
        cj = cards[bv]
        for y in range(d):
            if ba >= 1:
                true_counts[q, y] = stats[s, y, offsets[bv] + ba - 1]
            else:
                v = tot[s, y]
                for b in range(1, cj):
                    v -= stats[s, y, offsets[bv] + b - 1]
                true_counts[q, y] = v


@nb.njit(cache=True, inline="always")
def _loglik2(c0, c1, alpha, prior, logs, row):
    """:func:`_loglik` of the two counts ``c0, c1``, with the same floating-point operations
    in the same order (so the same result to the bit), without its loops over an array."""
    denom = _log_of(c0 + c1, prior, logs, 0)
    ll = 0.0
    ll += c0 * (_log_of(c0, alpha, logs, row) - denom)
    ll += c1 * (_log_of(c1, alpha, logs, row) - denom)
    return ll


@nb.njit(cache=True, inline="always")
def _tabled_loglik2(c0, c1, logs, row):
    """:func:`_loglik2` when ``c0 + c1`` is below the tables' size, so every logarithm is
    looked up: the same operations in the same order, without a test of each count."""
    denom = logs[0, c0 + c1]
    ll = 0.0
    ll += c0 * (logs[row, c0] - denom)
    ll += c1 * (logs[row, c1] - denom)
    return ll


@nb.njit(cache=True)
def _score_binary_slot(
    q,
    s,
    t,
    tot,
    stats,
    min_count,
    prior,
    logs,
    row,
    out,
):
    """:func:`_score_slot` when every variable is binary (target ``t``): candidate ``j`` is
    ``X_j = 1``, its true-side counts are ``stats[s, :, j]``, and each variable has one
    candidate, so the runner-up among the other variables is the best gain before the best
    was found or after it. The counts stay integers and the gains are computed as
    :func:`_score_slot` computes them, bit for bit, without its per-candidate arrays and loops
    over the target's values; when the slot has fewer rows than a table row holds, every
    logarithm is looked up (:func:`_tabled_loglik2`).

    One loop computes a candidate's gain and compares it: the gains do not vectorise (the
    table reads would be gathers, which LLVM does not emit for this CPU), and a separate
    loop over stored gains cost 10% more. A candidate that does not beat the runner-up is
    dropped before its row counts are tested."""
    best_var, best_val, best_gain, second_gain, true_counts = out
    alpha = prior / 2
    p0 = np.int64(tot[s, 0])
    p1 = np.int64(tot[s, 1])
    n_all = p0 + p1
    ll_parent = _loglik2(p0, p1, alpha, prior, logs, row)
    tabled = n_all < logs.shape[1]
    bv = -1
    bg = -np.inf
    sg = -np.inf
    for j in range(stats.shape[2]):
        c0 = np.int64(stats[s, 0, j])
        c1 = np.int64(stats[s, 1, j])
        if tabled:
            g = (
                _tabled_loglik2(c0, c1, logs, row)
                + _tabled_loglik2(p0 - c0, p1 - c1, logs, row)
                - ll_parent
            )
        else:
            g = (
                _loglik2(c0, c1, alpha, prior, logs, row)
                + _loglik2(p0 - c0, p1 - c1, alpha, prior, logs, row)
                - ll_parent
            )
        n_true = c0 + c1
        if g > sg and j != t and n_true >= min_count and n_all - n_true >= min_count:
            if g > bg:  # bg >= sg: a new best, the old best is the runner-up
                sg = bg
                bg = g
                bv = j
            else:
                sg = g
    best_var[q] = bv
    best_gain[q] = bg
    if bv >= 0:
        best_val[q] = 1
        second_gain[q] = sg
        true_counts[q, 0] = stats[s, 0, bv]
        true_counts[q, 1] = stats[s, 1, bv]


@nb.njit(cache=True)
def indicator_matrix(rows, cards, offsets, K):
    """The indicator columns ``x_j == a`` (a >= 1) of every row, shape (n_rows, K), uint8."""
    n, n_vars = rows.shape
    out = np.zeros((n, K), dtype=np.uint8)
    for r in range(n):
        for j in range(n_vars):
            v = rows[r, j]
            if v >= 1:
                out[r, offsets[j] + v - 1] = 1
    return out


@nb.njit(cache=True, parallel=True)
def leaf_log_prob(rows, roots, links, node_logp):
    """``log P(x_t | leaf)`` of every row under every tree: shape (n_rows, n_trees)."""
    leaves = route(rows, roots, links)
    n = rows.shape[0]
    T = roots.shape[0]
    out = np.empty((n, T))
    for r in nb.prange(n):
        for t in range(T):
            y = rows[r, t]
            out[r, t] = 0.0 if y == MISSING else node_logp[leaves[r, t], y]
    return out


@nb.njit(cache=True)
def _advance_rows(rows, indicators, trees, q0, q1, links, node_slot, tot, stats, row_node):
    """Trees ``trees[q0:q1]``, one after another (their nodes and slots stay in cache, as in
    :func:`streammn.trees.leaf_counting.accumulate`): move every row down from its remembered node
    ``row_node[t, r]`` to its leaf and count it there if the leaf is active. Rows are added one
    at a time: the segmented count's ``uint8`` group sums measured no faster here."""
    K = indicators.shape[1]
    for q in range(q0, q1):
        t = trees[q]
        nodes = row_node[t]
        for r in range(rows.shape[0]):
            node = nodes[r]
            v = links[node, 0]
            if v >= 0:
                row = rows[r]
                while v >= 0:
                    node = links[node, 2 + (row[v] != links[node, 1])]
                    v = links[node, 0]
                nodes[r] = node
            s = node_slot[node]
            if s < 0:  # most rows, on later levels: their row is not read at all
                continue
            y = rows[r, t]
            if y == MISSING:
                continue
            tot[s, y] += 1
            dst = stats[s, y]
            src = indicators[r]
            for k in range(K):
                dst[k] += src[k]


def _cached_counter(loop):
    """Exact mode's count kernel, its loop over blocks of trees run by ``loop``
    (:func:`twins`)."""

    def accumulate_cached(
        rows, indicators, trees, links, node_slot, tot, stats, row_node, n_blocks=1
    ):
        """Exact mode: like :func:`streammn.trees.leaf_counting.accumulate` (active slots'
        statistics only), with every row's current node per tree remembered in
        ``row_node[t, r]`` (rows of this batch), so each level moves a row down from where it
        was instead of routing it from the root; the trees cut into ``n_blocks`` blocks (each
        tree's nodes and slots are its own, so the blocks do not change the result)."""
        T = trees.shape[0]
        for b in loop(n_blocks):
            q0, q1 = b * T // n_blocks, (b + 1) * T // n_blocks
            _advance_rows(rows, indicators, trees, q0, q1, links, node_slot, tot, stats, row_node)

    return accumulate_cached


accumulate_cached, accumulate_cached_parallel = twins(_cached_counter)
