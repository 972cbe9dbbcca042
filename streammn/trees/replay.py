"""Replay: the buffered rows that reach a just-split node, counted into its children.

A Hoeffding grower keeps the last rows of the stream in a replay buffer, with their value
bitmaps (:func:`streammn.trees.leaf_counting.value_bits`: a bit per buffered row for every variable
and value). When a leaf splits, its new children are seeded with the buffered rows that reach
them (statistics inheritance, :mod:`streammn.trees.hoeffding`), and the passes of the exact
rebuilds over the buffer are replays too (:mod:`streammn.trees.rebuild_passes`: from a first
row on, for the nodes a rebuild takes over from the last).

The rows at a node are found from the bitmaps, not from a stored leaf per row and tree: the
buffer's mask ANDed with the bitmap of every test on the path from the root (or its complement
on a false branch), a few words per 64 rows and tree level per split, where a scan of stored
leaves would read every buffered row of every tree that split. Each (child, target value)
group is then counted the way the segmented count of a batch counts a listed group
(:mod:`streammn.trees.leaf_counting`): its rows listed from its mask and their indicator vectors
summed, or, when the group is big, every indicator column counted from the bitmaps.

The rows a group lists lie scattered over a buffer too big to stay in cache (100,000 rows of
100 variables: 10 MB), so summing them waits on memory, a row's bytes two or three cache lines
away from the next listed row's. Replay therefore reads the rows as their indicator vectors
packed as bits (:func:`pack_rows`, which the grower brings up to date before a replay): 16
bytes a row of 100 binary variables, one cache line, and a multi-valued row's indicators at
once rather than value by value. A packed row is summed in byte lanes, each word of 64 bits
widened to 64 bytes (with AVX-512 one mask register and one instruction,
:func:`_add_bit_block`), four rows per vector add, the rows fetched some rows ahead.

A rebuild's first pass, at the roots, needs no rows at all: a root's groups are the bitmaps
of its target's values, and its columns popcounts of their ANDs (:func:`count_roots`).

The counts are integers, so neither the order of the rows nor the route a group takes changes
them.
"""

from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from streammn.trees.leaf_counting import LANE_ROWS, extract, flush, pointer_at, popcount, prefetch
from streammn.trees.kernels import MISSING, twins

# listing a buffered row costs about as much as counting 40 words of bitmaps, and adding each
# 64-bit word of its packed indicators 15 more (measured on replays of 100 binary and 100
# four-valued variables: the rows lie scattered over the buffer, the bitmaps are read in
# order): groups whose rows cost more are counted from the bitmaps
ROW_COST = 40
WORD_COST = 15
SUM_AHEAD = 16  # listed rows whose packed words are fetched ahead of their sum
# groups counted from the bitmaps are counted four at a time, in runs of BITS_RUN words: each
# column's run is read once for the four (from the L1 cache after the first), where one group
# at a time read every column from L2 for every group (BITS_GROUPS is _count_groups_bits' four)
BITS_GROUPS = 4
BITS_RUN = 512


def packed_words(n_indicators: int) -> int:
    """Words of a packed row (:func:`pack_rows`) of ``n_indicators`` indicator columns."""
    return max(1, -(-n_indicators // 64))


@intrinsic
def _ones_word(typingctx, array, at):
    """The word whose bit ``i`` is set when ``array.flat[at + i] == 1``, for ``i < 64``, on a
    ``uint8`` array: one vector compare of 64 bytes (which must be readable)."""
    if not (isinstance(array, types.Array) and array.dtype == types.uint8):
        return None

    def codegen(context, builder, signature, args):
        lanes = ir.VectorType(ir.IntType(8), 64)
        block = builder.load(
            pointer_at(context, builder, args[0], signature.args[0], args[1], lanes), align=1
        )
        ones = builder.icmp_unsigned("==", block, ir.Constant(lanes, [1] * 64))
        return builder.bitcast(ones, ir.IntType(64))

    return types.uint64(array, types.int64), codegen


@intrinsic
def _add_bit_block(typingctx, dst, at, words):
    """``dst.flat[at + i] += 1`` for every set bit ``i`` of every ``uint64`` word of the tuple
    ``words``, on the 64 ``uint8`` entries from ``at``: each word taken as a vector of 64
    booleans widened to bytes, and the vectors summed."""
    if not (
        isinstance(dst, types.Array)
        and dst.dtype == types.uint8
        and isinstance(words, types.UniTuple)
    ):
        return None

    def codegen(context, builder, signature, args):
        lanes = ir.VectorType(ir.IntType(8), 64)
        target = pointer_at(context, builder, args[0], signature.args[0], args[1], lanes)
        total = builder.load(target, align=1)
        for i in range(signature.args[2].count):
            where = builder.bitcast(
                builder.extract_value(args[2], i), ir.VectorType(ir.IntType(1), 64)
            )
            total = builder.add(total, builder.zext(where, lanes))
        builder.store(total, target, align=1)
        return context.get_dummy_value()

    return types.void(dst, types.int64, words), codegen


@nb.njit(cache=True)
def pack_rows(rows, first, count, cards, offsets, packed):
    """Write the indicator vectors of rows ``first .. first + count - 1`` of ``rows`` to the
    same rows of ``packed`` as bits: bit ``k % 64`` of word ``k // 64`` is indicator column
    ``k``, ``offsets[j] + x_j - 1`` for each ``x_j >= 1`` (missing values set none). When every
    variable is binary a row's bytes are its indicators, compared with 1 sixty-four at a time:
    the compares read up to 63 bytes past a row's end, so ``rows`` must be followed by that
    many readable bytes, as the replay buffer is."""
    n_vars = rows.shape[1]
    binary = True
    for j in range(n_vars):
        binary &= cards[j] == 2
    for r in range(first, first + count):
        if binary:
            for i in range(packed.shape[1]):
                word = _ones_word(rows, r * n_vars + 64 * i)
                if n_vars - 64 * i < 64:  # the bytes past the row
                    word &= (np.uint64(1) << np.uint64(n_vars - 64 * i)) - np.uint64(1)
                packed[r, i] = word
            continue
        for i in range(packed.shape[1]):
            packed[r, i] = 0
        for j in range(n_vars):  # no branch: it would mispredict on about every other value
            x = np.int64(rows[r, j])
            counted = (x >= 1) & (x != MISSING)
            k = offsets[j] + counted * (x - 1)  # a value that adds nothing sets no bit
            packed[r, k >> 6] |= np.uint64(counted) << np.uint64(k & 63)


@nb.njit(cache=True)
def _sum_packed(packed, listed, count, stats, s, y, K, acc):
    """Add the indicator vectors of the packed rows ``listed[:count]`` to ``stats[s, y]``:
    four rows per vector add into the ``uint8`` accumulator ``acc[0]``, flushed every
    ``LANE_ROWS`` rows. The rows ``SUM_AHEAD`` places on are fetched ahead: most miss the
    caches, and the adds would wait on them a few at a time."""
    P = packed.shape[1]
    i = 0
    while i < count:
        stop = min(count, i + LANE_ROWS)
        m = i
        while m + 4 <= stop:
            for j in range(m + SUM_AHEAD, m + SUM_AHEAD + 4):
                prefetch(packed, listed[min(j, count - 1)] * P)
            a, b, c, d = listed[m], listed[m + 1], listed[m + 2], listed[m + 3]
            for k in range(P):
                _add_bit_block(
                    acc, 64 * k, (packed[a, k], packed[b, k], packed[c, k], packed[d, k])
                )
            m += 4
        for m in range(m, stop):
            for k in range(P):
                _add_bit_block(acc, 64 * k, (packed[listed[m], k],))
        flush(acc, 0, stats, s, y, K)
        i = stop


@nb.njit(cache=True)
def _count_groups_bits(groups, G, W, bits, cards, offsets, stats, group_slot, group_y, start):
    """Add the indicator vectors of the rows in each of the masks ``groups[:G]`` (``G <=
    BITS_GROUPS``; their words ``start .. W - 1``) to ``stats[group_slot[g], group_y[g]]``
    from the bitmaps, as :func:`streammn.trees.leaf_counting._count_bits` does for one group, with
    the words in runs of :data:`BITS_RUN` that stay in the L1 cache while every column passes:
    a column's run is read from L2 once for all the groups, and with four groups each column
    word is loaded once for the four popcounts."""
    for w0 in range(start, W, BITS_RUN):
        w1 = min(W, w0 + BITS_RUN)
        g0, g1, g2, g3 = (groups[0, w0:w1], groups[1, w0:w1], groups[2, w0:w1], groups[3, w0:w1])
        for j in range(cards.shape[0]):
            for a in range(1, cards[j]):
                column = bits[j, a, w0:w1]
                k = offsets[j] + a - 1
                if G < 4:
                    for g in range(G):
                        rows = groups[g, w0:w1]
                        c = 0
                        for w in range(column.shape[0]):
                            c += np.int64(popcount(rows[w] & column[w]))
                        stats[group_slot[g], group_y[g], k] += c
                    continue
                c0 = c1 = c2 = c3 = 0
                for w in range(column.shape[0]):
                    x = column[w]
                    c0 += np.int64(popcount(g0[w] & x))
                    c1 += np.int64(popcount(g1[w] & x))
                    c2 += np.int64(popcount(g2[w] & x))
                    c3 += np.int64(popcount(g3[w] & x))
                for g, c in enumerate((c0, c1, c2, c3)):
                    stats[group_slot[g], group_y[g], k] += c


@nb.njit(cache=True, inline="always")
def _queue_for_bits(
    waiting, n_waiting, wait_slot, wait_y, s, y, W, bits, cards, offsets, stats, start
):
    """Queue the group whose mask is ``waiting[n_waiting]`` (slot ``s``, target value ``y``)
    to be counted from the bitmaps, counting the queue when it holds :data:`BITS_GROUPS`;
    returns the queue's new length."""
    wait_slot[n_waiting], wait_y[n_waiting] = s, y
    n_waiting += 1
    if n_waiting == BITS_GROUPS:
        _count_groups_bits(
            waiting, n_waiting, W, bits, cards, offsets, stats, wait_slot, wait_y, start
        )
        n_waiting = 0
    return n_waiting


@nb.njit(cache=True, inline="always")
def _keep_rows(mask, n, first):
    """Clear the bits of ``mask`` (bit ``i`` of word ``w``: buffered row ``64 w + i``) of the
    rows before ``first`` and from ``n`` on, in the words that hold both kinds (the bits past
    the buffer's rows are not rows; the words before ``first``'s are not read)."""
    W = (n + 63) // 64
    if n % 64:
        mask[W - 1] &= (np.uint64(1) << np.uint64(n % 64)) - np.uint64(1)
    if first // 64 < W:
        mask[first // 64] &= ~np.uint64(0) << np.uint64(first % 64)


@nb.njit(cache=True)
def _replay_splits(job, p0, p1):
    """Replay the buffered rows ``job.first .. job.n - 1`` of the split nodes
    ``job.parents[p0:p1]`` into their children (``job``: a :class:`Replay`)."""
    packed, bits, n, offsets, parents = job.packed, job.bits, job.n, job.offsets, job.parents
    links, node_parent, node_tree, cards = job.links, job.node_parent, job.node_tree, job.cards
    node_slot, tot, stats, slot_n = job.node_slot, job.tot, job.stats, job.slot_n
    row_cost, first = job.row_cost, job.first
    K = stats.shape[2]
    W = (n + 63) // 64
    start = first // 64  # the first word holding rows to count
    if row_cost < 0:
        row_cost = ROW_COST + packed.shape[1] * WORD_COST
    # the word loops run over slices from ``start`` (indexed from 0, so they vectorise)
    at_node = np.empty(W, dtype=np.uint64)
    at = at_node[start:]
    group = np.empty(W, dtype=np.uint64)
    in_group = group[start:]
    listed = np.empty(n, dtype=np.int32)
    acc = np.zeros((1, 64 * packed.shape[1]), dtype=np.uint8)
    # the groups waiting to be counted from the bitmaps (_count_groups_bits), their slots and
    # target values
    waiting = np.empty((BITS_GROUPS, W), dtype=np.uint64)
    wait_slot = np.empty(BITS_GROUPS, dtype=np.int64)
    wait_y = np.empty(BITS_GROUPS, dtype=np.int64)
    n_waiting = 0
    for q in range(p0, p1):
        p = parents[q]
        for w in range(at.shape[0]):
            at[w] = ~np.uint64(0)
        _keep_rows(at_node, n, first)
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
                    count += np.int64(popcount(in_group[w]))
                tot[s, y] += count
                slot_n[s] += count
                if count * row_cost > K * (W - start):
                    waiting[n_waiting, start:] = in_group
                    n_waiting = _queue_for_bits(
                        waiting,
                        n_waiting,
                        wait_slot,
                        wait_y,
                        s,
                        y,
                        W,
                        bits,
                        cards,
                        offsets,
                        stats,
                        start,
                    )
                    continue
                _sum_packed(packed, listed, extract(group, W, listed, start), stats, s, y, K, acc)
    if n_waiting:
        _count_groups_bits(
            waiting, n_waiting, W, bits, cards, offsets, stats, wait_slot, wait_y, start
        )


@nb.njit(cache=True)
def count_roots(bits, n, first, trees, root_slot, cards, offsets, tot, stats):
    """Add the buffered rows ``first .. n - 1`` (value bitmaps ``bits``) to the statistics of
    the roots of ``trees`` (in slots ``root_slot``), from the bitmaps alone: the root of tree
    ``t`` holds every row, so its group ``y`` is the bitmap of ``x_t = y`` and each of its
    indicator columns a popcount of that AND a column's bitmap (:func:`_count_groups_bits`,
    four groups at a time): the co-occurrence count of the rows in popcounts of 64 rows a
    word, several times cheaper than the rows' Gram matrix in floating point."""
    W = (n + 63) // 64
    start = first // 64
    waiting = np.empty((BITS_GROUPS, W), dtype=np.uint64)
    wait_slot = np.empty(BITS_GROUPS, dtype=np.int64)
    wait_y = np.empty(BITS_GROUPS, dtype=np.int64)
    n_waiting = 0
    for i in range(trees.shape[0]):
        t, s = trees[i], root_slot[i]
        for y in range(cards[t]):
            group = waiting[n_waiting]
            group[start:] = bits[t, y, start:W]
            _keep_rows(group, n, first)
            count = 0
            for w in range(start, W):
                count += np.int64(popcount(group[w]))
            tot[s, y] += count
            n_waiting = _queue_for_bits(
                waiting, n_waiting, wait_slot, wait_y, s, y, W, bits, cards, offsets, stats, start
            )
    if n_waiting:
        _count_groups_bits(
            waiting, n_waiting, W, bits, cards, offsets, stats, wait_slot, wait_y, start
        )


#: A replay (:func:`replay`): the buffered rows ``packed[:n]`` (packed by :func:`pack_rows`,
#: with their value bitmaps ``bits`` and the indicator columns' ``offsets``), from row
#: ``first`` on, that reach each just-split node of ``parents`` (the forest's ``links``,
#: ``node_parent``, ``node_tree``, the variables' ``cards``) are added to ``tot``, ``stats``
#: and ``slot_n`` of its children's slots (``node_slot``). ``row_cost``: a row's listing and
#: sum in bitmap words (-1: :data:`ROW_COST` plus :data:`WORD_COST` a packed word).
Replay = namedtuple(
    "Replay",
    "packed bits n offsets parents links node_parent node_tree cards node_slot tot stats slot_n "
    "row_cost first",
    defaults=(-1, 0),
)


def _replayer(loop):
    """The replay kernel, its loop over blocks of split nodes run by ``loop``
    (:func:`~streammn.trees.kernels.twins`)."""

    def replay(job, n_blocks):
        """Add the buffered rows of the replay ``job`` (a :class:`Replay`) that reach each
        just-split node to the statistics of its children that are active (Hoeffding replay;
        the children are leaves), the split nodes cut into ``n_blocks`` blocks (a node's
        children and their slots are its own, so the result does not depend on the blocks).
        A (child, target value) group whose rows would cost more than counting every
        indicator column from the bitmaps (:func:`_count_groups_bits`, by ``row_cost``) is
        counted from the bitmaps; the rows of the others are listed from its mask and summed
        (:func:`_sum_packed`)."""
        P = job.parents.shape[0]
        for b in loop(n_blocks):
            _replay_splits(job, b * P // n_blocks, (b + 1) * P // n_blocks)

    return replay


replay, replay_parallel = twins(_replayer)
