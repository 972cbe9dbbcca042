"""Counting a batch of rows into the leaves' split statistics, as a segmented count.

Every row of a batch adds its indicator vector (see :mod:`streammn.trees.kernels`) to
``stats[s, y]`` of the slot ``s`` of the leaf it reaches in every tree, ``y`` its target value:
for 100 binary variables that is 100 trees x 100 columns per row, the work of a co-occurrence
count ``X.T @ X``. Done row by row it is far from that floor: every row is routed alone (a
chain of dependent loads per tree level), and every row reads, widens to 32 bits and writes back
a whole counter row. Here, per tree:

1. **Groups.** The batch's rows are split into groups, one per (leaf, target value), by one of
   two routes, chosen per tree by a cost estimate:

   * *bit-sliced routing* (small trees, the usual case): the batch's values as bitmaps, one bit
     per row for every (variable, value) pair (:func:`value_bits`); a depth-first walk of the
     tree gives each node its rows' mask as its parent's mask AND (or AND NOT) the bitmap of
     its test, and a leaf's mask AND the bitmap of a target value is a group, whose size is a
     popcount. The cost is the tree's nodes times the batch's words (64 rows per word, eight
     words per vector instruction), not rows times depth; subtrees no row reaches are skipped.
   * *row routing* (trees with many nodes for the batch's rows): every row routed
     (:func:`streammn.trees.kernels._route_fixed`), then a counting sort of the rows by
     (leaf, target value).

   A group adds its size to the leaf's target counts, and to its slot's totals and row count
   (the slot is due for a look when that count passes its mark within the batch).
2. **Sums.** A group of an active leaf has its rows' indicator vectors summed in ``uint8``
   lanes (:func:`lanes`: the indicator matrix padded to 64 columns per vector instruction),
   four rows per pass over the lanes, and flushed into the wide counters every 255 rows (a
   lane holds at most 255 ones) and at the group's end: each counter row is read and written
   once per group rather than once per row.

The counts are integers, so the order in which rows are added does not change them: the
statistics, leaf counts and due slots are exactly those of adding the rows one at a time, in
any order (only the order of the due slots in ``due`` differs; callers sort them).
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic
from numba import types

from streammn.trees.kernels import MISSING, _route_fixed

LANE_BLOCK = 64  # uint8 lanes per vector instruction (the padding of the lane matrix)
LANE_ROWS = 255  # rows summed in uint8 lanes before they are flushed to the counters
# cost model of the two routes, per tree: bit-sliced ~ nodes x (words / 2 + NODE_COST),
# row routing ~ rows x (STEP_COST x depth + ROW_COST)
NODE_COST = 32
STEP_COST = 4
ROW_COST = 10


@intrinsic
def _popcount(typingctx, x):
    """Set bits of an integer (LLVM's ctpop)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        fn = builder.module.declare_intrinsic("llvm.ctpop", [args[0].type])
        return builder.call(fn, args)
    return x(x), codegen


@nb.njit(cache=True)
def lanes(indicators):
    """The indicator matrix padded with zero columns to a multiple of ``LANE_BLOCK``."""
    n, K = indicators.shape
    width = max(1, -(-K // LANE_BLOCK)) * LANE_BLOCK
    out = np.zeros((n, width), dtype=np.uint8)
    for r in range(n):
        for k in range(K):
            out[r, k] = indicators[r, k]
    return out


@nb.njit(cache=True)
def value_bits(rows, max_card):
    """``bits[j, a, w]``: bit ``i`` is set when ``rows[64 w + i, j] == a`` (a missing value
    sets none), shape (n_vars, max_card, words)."""
    n, n_vars = rows.shape
    W = (n + 63) // 64
    bits = np.zeros((n_vars, max_card, W), dtype=np.uint64)
    word = np.zeros((max_card, n_vars), dtype=np.uint64)
    for w in range(W):
        word[:] = 0
        for i in range(min(64, n - 64 * w)):
            bit = np.uint64(1) << np.uint64(i)
            for a in range(max_card):
                for j in range(n_vars):
                    if rows[64 * w + i, j] == a:
                        word[a, j] |= bit
        for a in range(max_card):
            for j in range(n_vars):
                bits[j, a, w] = word[a, j]
    return bits


@nb.njit(cache=True)
def _sum_group(lanes, order, begin, end, stats, s, y, K, acc):
    """Add the indicator rows ``lanes[order[begin:end]]`` to ``stats[s, y]``."""
    width = lanes.shape[1]
    i = begin
    while i < end:
        stop = min(end, i + LANE_ROWS)
        for k in range(width):
            acc[k] = 0
        m = i
        while m + 4 <= stop:
            a, b, c, d = order[m], order[m + 1], order[m + 2], order[m + 3]
            for k in range(width):
                acc[k] += lanes[a, k] + lanes[b, k] + lanes[c, k] + lanes[d, k]
            m += 4
        for m in range(m, stop):
            a = order[m]
            for k in range(width):
                acc[k] += lanes[a, k]
        for k in range(K):
            stats[s, y, k] += acc[k]
        i = stop


@nb.njit(cache=True, inline="always")
def _extract(mask, W, order):
    """Write the positions of ``mask``'s set bits to ``order``; return how many."""
    c = 0
    for w in range(W):
        x = mask[w]
        while x:
            order[c] = 64 * w + trailing_zeros(x)
            c += 1
            x &= x - np.uint64(1)
    return c


@nb.njit(cache=True, inline="always")
def _due(s, c, slot_n, slot_last, grace, due, n_due):
    """Add ``c`` rows to slot ``s``'s count; list it as due when the count since its last
    look passes ``grace`` (which one row at a time would hit exactly once)."""
    before = slot_n[s] - slot_last[s]
    slot_n[s] += c
    if before < grace <= before + c:
        due[n_due] = s
        n_due += 1
    return n_due


@nb.njit(cache=True)
def _tree_by_bits(t, n, bits, card, lanes, K, root, links, node_slot, node_counts,
                  count_leaves, tot, stats, slot_n, slot_last, grace, due, n_due, dest,
                  row_leaf, keep_leaves, masks, stack, order, group, acc, leaf_of_row):
    """Bit-sliced routing of the batch through tree ``t`` and counting at its leaves."""
    W = masks.shape[1]
    for w in range(W):
        masks[0, w] = ~np.uint64(0)
    if n % 64:
        masks[0, W - 1] = (np.uint64(1) << np.uint64(n % 64)) - np.uint64(1)
    stack[0] = root
    sp = 0
    while sp >= 0:  # depth first; masks[sp] holds the rows of node stack[sp]
        node = stack[sp]
        v = links[node, 0]
        if v >= 0:  # true side into masks[sp], false side into masks[sp + 1]
            a = links[node, 1]
            any_true = np.uint64(0)
            any_false = np.uint64(0)
            for w in range(W):
                x = masks[sp, w]
                xt = x & bits[v, a, w]
                masks[sp, w] = xt
                masks[sp + 1, w] = x ^ xt
                any_true |= xt
                any_false |= x ^ xt
            if any_true and any_false:
                stack[sp] = links[node, 2]
                sp += 1
                stack[sp] = links[node, 3]
            elif any_true:
                stack[sp] = links[node, 2]
            else:
                stack[sp] = links[node, 3]
                for w in range(W):
                    masks[sp, w] = masks[sp + 1, w]
            continue
        s = node_slot[node]
        if s < 0 and not count_leaves and not keep_leaves:
            sp -= 1  # nothing to count at this leaf
            continue
        if keep_leaves:  # a masked store per word (vectorised), rather than bit by bit
            for w in range(W):
                x = masks[sp, w]
                if x:
                    for i in range(64):
                        if (x >> np.uint64(i)) & np.uint64(1):
                            leaf_of_row[64 * w + i] = node
        total = 0
        for y in range(card):  # group (node, y): the leaf's rows with target value y
            c = 0
            for w in range(W):
                x = masks[sp, w] & bits[t, y, w]
                group[w] = x
                c += _popcount(x)
            if c == 0:
                continue
            total += c
            if count_leaves:
                node_counts[node, y] += c
            if s >= 0:
                tot[s, y] += c
                _extract(group, W, order)
                _sum_group(lanes, order, 0, c, stats, s, y, K, acc)
        if s >= 0 and grace > 0 and total > 0:
            n_due = _due(s, total, slot_n, slot_last, grace, due, n_due)
        sp -= 1
    if keep_leaves:
        for r in range(n):
            if dest[r] >= 0:
                row_leaf[t, dest[r]] = leaf_of_row[r]
    return n_due


@nb.njit(cache=True)
def _tree_by_rows(t, rows, lanes, K, root, steps, table, node_slot, node_counts, count_leaves,
                  tot, stats, slot_n, slot_last, grace, due, n_due, dest, row_leaf,
                  group_of_key, leaves, group_key, group_end, order, acc):
    """Row routing of the batch through tree ``t``, a counting sort of its rows by (leaf,
    target value) and counting at the leaves."""
    n = rows.shape[0]
    C = stats.shape[1]
    _route_fixed(rows, root, steps, table, leaves)
    n_groups = 0
    for r in range(n):
        leaf = leaves[r]
        keep = dest[r]
        if keep >= 0:
            row_leaf[t, keep] = leaf
        y = rows[r, t]
        if y == MISSING:  # missing target: routed, not counted (streammn.trees.missing)
            leaves[r] = -1
            continue
        key = leaf * C + y
        g = group_of_key[key]
        if g < 0:
            g = n_groups
            group_of_key[key] = g
            group_key[g] = key
            group_end[g] = 0
            n_groups += 1
        group_end[g] += 1
        leaves[r] = g
    start = 0  # groups of active leaves get consecutive ranges of ``order``
    for g in range(n_groups):
        key = group_key[g]
        group_of_key[key] = -1
        leaf, y = key // C, key % C
        c = group_end[g]
        if count_leaves:
            node_counts[leaf, y] += c
        s = node_slot[leaf]
        if s < 0:
            group_end[g] = -1
            continue
        tot[s, y] += c
        if grace > 0:
            n_due = _due(s, c, slot_n, slot_last, grace, due, n_due)
        group_end[g] = start
        start += c
    for r in range(n):
        g = leaves[r]
        if g >= 0 and group_end[g] >= 0:
            order[group_end[g]] = r
            group_end[g] += 1
    start = 0
    for g in range(n_groups):
        end = group_end[g]
        if end >= 0:
            leaf = group_key[g] // C
            _sum_group(lanes, order, start, end, stats, node_slot[leaf], group_key[g] % C, K,
                       acc)
            start = end
    return n_due


@nb.njit(cache=True)
def _add_rows(rows, bits, lanes, K, cards, trees, q0, q1, roots, links, table, tree_steps,
              tree_nodes, node_slot, node_counts, count_leaves, tot, stats, slot_n, slot_last,
              grace, due, dest, row_leaf):
    """Count the batch into trees ``trees[q0:q1]``, one tree after another (its nodes and
    slots stay in cache); return the number of due slots written to ``due``."""
    n = rows.shape[0]
    W = (n + 63) // 64
    depth = 0
    for q in range(q0, q1):
        depth = max(depth, tree_steps[trees[q]])
    masks = np.empty((depth + 2, W), dtype=np.uint64)
    stack = np.empty(depth + 2, dtype=np.int32)
    group = np.empty(W, dtype=np.uint64)
    order = np.empty(n, dtype=np.int32)
    leaf_of_row = np.empty(64 * W, dtype=np.int32)
    acc = np.zeros(lanes.shape[1], dtype=np.uint8)
    group_of_key = np.zeros(0, dtype=np.int32)  # row routing's scratch, made when needed
    leaves = np.empty(n, dtype=np.int32)
    group_key = np.empty(n, dtype=np.int32)
    group_end = np.empty(n, dtype=np.int32)
    keep_leaves = False
    for r in range(n):
        keep_leaves |= dest[r] >= 0
    n_due = 0
    for q in range(q0, q1):
        t = trees[q]
        steps = tree_steps[t]
        if tree_nodes[t] * (W // 2 + NODE_COST) <= n * (STEP_COST * steps + ROW_COST):
            n_due = _tree_by_bits(t, n, bits, cards[t], lanes, K, roots[t], links, node_slot,
                                  node_counts, count_leaves, tot, stats, slot_n, slot_last,
                                  grace, due, n_due, dest, row_leaf, keep_leaves, masks, stack,
                                  order, group, acc, leaf_of_row)
        else:
            if group_of_key.shape[0] == 0:
                group_of_key = np.full(node_counts.shape[0] * stats.shape[1], -1,
                                       dtype=np.int32)
            n_due = _tree_by_rows(t, rows, lanes, K, roots[t], steps, table, node_slot,
                                  node_counts, count_leaves, tot, stats, slot_n, slot_last,
                                  grace, due, n_due, dest, row_leaf, group_of_key, leaves,
                                  group_key, group_end, order, acc)
    return n_due


@nb.njit(cache=True)
def accumulate(rows, bits, lanes, K, cards, trees, roots, links, table, tree_steps, tree_nodes,
               node_slot, node_counts, count_leaves, tot, stats, slot_n, slot_last, grace, due,
               n_due, dest, row_leaf):
    """Count ``rows`` (with their :func:`value_bits` and :func:`lanes`) into the listed trees:
    the target counts of every leaf with ``count_leaves``, the statistics of active leaves.
    ``table``/``tree_steps`` come from :func:`streammn.trees.kernels.routing_table`,
    ``tree_nodes`` is the number of nodes of every tree. With ``grace > 0``, slots whose row
    count since ``slot_last`` passes ``grace`` are written to ``due[0, :n_due[0]]``. Rows with
    ``dest[r] >= 0`` have their leaf in tree ``t`` written to ``row_leaf[t, dest[r]]``."""
    n_due[0] = _add_rows(rows, bits, lanes, K, cards, trees, 0, trees.shape[0], roots, links,
                         table, tree_steps, tree_nodes, node_slot, node_counts, count_leaves,
                         tot, stats, slot_n, slot_last, grace, due[0], dest, row_leaf)


@nb.njit(cache=True, parallel=True)
def accumulate_parallel(rows, bits, lanes, K, cards, trees, roots, links, table, tree_steps,
                        tree_nodes, node_slot, node_counts, count_leaves, tot, stats, slot_n,
                        slot_last, grace, due, n_due, dest, row_leaf):
    """:func:`accumulate` with the trees cut into ``due.shape[0]`` blocks run in parallel (each
    block writes only its own trees' nodes, slots and ``row_leaf`` rows, and its own
    ``due[block]``)."""
    T = trees.shape[0]
    n_blocks = due.shape[0]
    for b in nb.prange(n_blocks):
        n_due[b] = _add_rows(rows, bits, lanes, K, cards, trees, b * T // n_blocks,
                             (b + 1) * T // n_blocks, roots, links, table, tree_steps,
                             tree_nodes, node_slot, node_counts, count_leaves, tot, stats,
                             slot_n, slot_last, grace, due[b], dest, row_leaf)
