"""Replay: the buffered rows that reach a just-split node, counted into its children.

A Hoeffding grower keeps the last rows of the stream in a replay buffer, with their value
bitmaps (:func:`streammn.trees.counting.value_bits`: a bit per buffered row for every variable
and value). When a leaf splits, its new children are seeded with the buffered rows that reach
them (statistics inheritance, :mod:`streammn.trees.hoeffding`), and the passes of the exact
rebuilds over the buffer are replays too (:mod:`streammn.trees.rebuild_passes`: from a first
row on, for the nodes a rebuild takes over from the last).

The rows at a node are found from the bitmaps, not from a stored leaf per row and tree: the
buffer's mask ANDed with the bitmap of every test on the path from the root (or its complement
on a false branch), a few words per 64 rows and tree level per split, where a scan of stored
leaves would read every buffered row of every tree that split. Each (child, target value)
group is then counted the way the segmented count of a batch counts a listed group
(:mod:`streammn.trees.counting`): its rows listed from its mask and their indicator lanes
summed, or, when the group is big, every indicator column counted from the bitmaps.

The counts are integers, so neither the order of the rows nor the route a group takes changes
them.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.trees.counting import (BLOCK_COST, LANE_BLOCK, _count_bits, _extract, _popcount,
                                     _sum_group)
from streammn.trees.kernels import MISSING

# a buffered row's vector add of one 64-lane block costs about as much as counting 50 words of
# bitmaps (measured: a group's rows lie scattered over a buffer that does not stay in cache, and
# listing and summing one costs ~35 ns, against ~0.2 ns a word): bigger groups than in a batch
# (counting.BLOCK_COST) are counted from the bitmaps
REPLAY_BLOCK_COST = 50
VALUE_COST = 10  # replay adds a multi-valued row's columns one by one: ~10 words a variable


@nb.njit(cache=True)
def _replay_splits(rows, bits, n, binary, offsets, parents, p0, p1, links, node_parent,
                   node_tree, cards, node_slot, tot, stats, slot_n, block_cost, first):
    """Replay the buffered rows ``first .. n - 1`` of split nodes ``parents[p0:p1]`` into
    their children."""
    K = stats.shape[2]
    W = (n + 63) // 64
    start = first // 64  # the first word holding rows to count
    # a row's cost in bitmap words: its lane adds, or its columns added one by one
    if binary:
        row_cost = -(-rows.shape[1] // LANE_BLOCK) * block_cost
    else:
        row_cost = rows.shape[1] * VALUE_COST * block_cost // BLOCK_COST
    # the word loops run over slices from ``start`` (indexed from 0, so they vectorise)
    at_node = np.empty(W, dtype=np.uint64)
    at = at_node[start:]
    group = np.empty(W, dtype=np.uint64)
    in_group = group[start:]
    listed = np.empty(n, dtype=np.int32)
    acc = np.zeros((1, -(-rows.shape[1] // LANE_BLOCK) * LANE_BLOCK), dtype=np.uint8)
    columns = np.zeros(K + 1, dtype=np.int64)  # _add_values' counts (K: values not counted)
    for q in range(p0, p1):
        p = parents[q]
        for w in range(at.shape[0]):  # the buffered rows (bits past n are not rows)
            at[w] = ~np.uint64(0)
        if n % 64:
            at_node[W - 1] = (np.uint64(1) << np.uint64(n % 64)) - np.uint64(1)
        if start < W:
            at_node[start] &= ~np.uint64(0) << np.uint64(first % 64)
        child = p
        node = node_parent[p]
        while node >= 0:  # up to the root: the rows that reach p pass every test on the way
            v, a = links[node, 0], links[node, 1]
            side = np.uint64(0) if links[node, 2] == child else ~np.uint64(0)
            test = bits[v, a, start:W]
            for w in range(at.shape[0]):
                at[w] &= test[w] ^ side
            child = node
            node = node_parent[node]
        t = node_tree[p]
        v, a = links[p, 0], links[p, 1]
        for c in range(2):  # the true child, then the false one
            s = node_slot[links[p, 2 + c]]
            if s < 0:
                continue
            side = np.uint64(0) if c == 0 else ~np.uint64(0)
            test = bits[v, a, start:W]
            for y in range(cards[t]):
                target = bits[t, y, start:W]
                count = 0
                for w in range(at.shape[0]):
                    in_group[w] = at[w] & (test[w] ^ side) & target[w]
                    count += np.int64(_popcount(in_group[w]))
                tot[s, y] += count
                slot_n[s] += count
                if count * row_cost > K * (W - start):
                    _count_bits(group, W, bits, cards, offsets, stats, s, y, start)
                    continue
                count = _extract(group, W, listed, start)
                if binary:
                    _sum_group(rows, listed, count, stats, s, y, K, acc)
                    continue
                _add_values(rows, listed, count, offsets, columns, stats, s, y)


@nb.njit(cache=True)
def _add_values(rows, listed, count, offsets, columns, stats, s, y):
    """Add the indicator vectors of rows ``listed[:count]`` (multi-valued rows, taken value by
    value) to ``stats[s, y]``: column ``offsets[j] + x_j - 1`` of each ``x_j >= 1`` gains one,
    counted first in ``columns`` (zeroed, one entry longer than a statistics row), where a
    value that adds nothing (0, or missing) goes to the last entry: no branch, which would
    mispredict on about every other value."""
    K = columns.shape[0] - 1
    for i in range(count):
        row = rows[listed[i]]
        for j in range(row.shape[0]):
            x = np.int64(row[j])
            counted = (x >= 1) & (x != MISSING)
            columns[K + counted * (offsets[j] + x - 1 - K)] += 1
    for k in range(K):
        stats[s, y, k] += columns[k]
        columns[k] = 0
    columns[K] = 0


@nb.njit(cache=True)
def replay(rows, bits, n, binary, offsets, parents, links, node_parent, node_tree, cards,
           node_slot, tot, stats, slot_n, block_cost=REPLAY_BLOCK_COST, first=0):
    """Add the buffered rows (``rows[:n]``, with their value bitmaps ``bits``; from row
    ``first`` on) that reach each just-split node of ``parents`` to the statistics of its
    children that are active (Hoeffding replay; the children are leaves).

    A big (child, target value) group is counted from the bitmaps (:func:`_count_bits`;
    ``block_cost``: a row's vector add of one lane block in bitmap words, as in
    :func:`streammn.trees.counting._by_bits`); the rows of the others are listed from its
    mask. With ``binary`` a row is its own indicator vector, summed four rows per vector add
    (:func:`_sum_group`, reading the rows as lanes: the vector adds read up to 63 bytes past a
    row's end, so ``rows`` must be followed by that many readable bytes, as the replay buffer
    is). Otherwise column ``offsets[j] + x_j - 1`` is added for each ``x_j >= 1`` of the row,
    so the buffer's indicator matrix is never built."""
    _replay_splits(rows, bits, n, binary, offsets, parents, 0, parents.shape[0], links,
                   node_parent, node_tree, cards, node_slot, tot, stats, slot_n, block_cost,
                   first)


@nb.njit(cache=True, parallel=True)
def replay_parallel(rows, bits, n, binary, offsets, parents, links, node_parent, node_tree,
                    cards, node_slot, tot, stats, slot_n, n_blocks,
                    block_cost=REPLAY_BLOCK_COST, first=0):
    """:func:`replay` with the split nodes cut into ``n_blocks`` blocks run in parallel (a
    node's children and their slots are its own, so the result does not depend on the
    blocks)."""
    P = parents.shape[0]
    for b in nb.prange(n_blocks):
        _replay_splits(rows, bits, n, binary, offsets, parents, b * P // n_blocks,
                       (b + 1) * P // n_blocks, links, node_parent, node_tree, cards,
                       node_slot, tot, stats, slot_n, block_cost, first)
