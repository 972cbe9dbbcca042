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
     (:func:`streammn.trees.kernels.route_fixed`), and its group found in a table of (leaf,
     target value) keys.

   A group adds its size to the leaf's target counts, and to its slot's totals and row count
   (the slot is due for a look when that count passes its mark within the batch).
2. **Sums.** The rows of a group of an active leaf have their indicator vectors summed in
   ``uint8`` accumulators (:func:`lanes`: the indicator matrix padded to 64 columns, one vector
   add per 64), flushed into the wide counters at the end (and every 255 rows for a group of
   more: a lane holds at most 255 ones): each counter row is read and written once per group
   rather than once per row. Converged trees have many leaves of a few dozen rows each, so
   the rows are summed in row order, each into its group's accumulator, from every row's
   group number (bit-sliced: read back from bitmaps of the leaf numbers' bits, see
   :func:`_tree_by_bits`); listing a small group's rows from its mask would test every word
   of the batch and mispredict on most. Four trees are summed in one pass over the rows
   (:func:`_sum_rows`): a row's lanes are loaded once for the four, and rows not to be summed
   (at no active leaf, with a missing target, or padding for a sweep of fewer trees) are
   added to a trash accumulator rather than skipped by a branch that would mispredict (one
   per tree of the sweep: with one for all, the adds of a row's padding trees would wait on
   each other). Young trees (few active leaves) and the later passes of exact growth (few
   rows at active leaves) list each group's rows from its mask instead and sum them four at
   a time.

   A group so big that its lane adds would cost more than ``popcount(group AND bitmap)`` for
   every indicator column (the columns times the batch's words, whatever the group's size:
   big leaves of young trees, the first passes of exact growth) is counted from the bitmaps
   (:func:`_count_bits`), when the groups are listed (in the four-tree pass every row costs
   its adds anyway).

The vector adds are LLVM intrinsics (:func:`_add_lane_block`, :func:`_spread_lane_block`):
as a loop over the lanes, LLVM cannot tell that the accumulators and the lanes do not overlap
and adds byte by byte. Two reads would wait on memory, as the forest's nodes and the leaves'
statistics do not stay in cache from one tree to the next: a node's children are fetched while
its masks are split, and a group's counters some groups before its flush (:func:`prefetch`).

Hoeffding replay (:mod:`streammn.trees.replay`) counts the replay buffer's rows that reach a
just-split node into its children with some of the same pieces (:func:`extract`,
:func:`_count_bits`), summing the rows from their indicator vectors packed as bits.

The counts are integers, so the order in which rows are added does not change them: the
statistics, leaf counts and due slots are exactly those of adding the rows one at a time, in
any order (only the order of the due slots in ``due`` differs; callers sort them).
"""

from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from streammn.kernel_sorts import largest_first
from streammn.trees.kernels import MISSING, route_fixed, routing_table, twins

LANE_BLOCK = 64  # uint8 lanes per vector instruction (the padding of the lane matrix)
LANE_ROWS = 255  # rows summed in uint8 lanes before they are flushed to the counters
SWEEP_TREES = 4  # trees whose groups one pass over the rows sums (_sum_rows reads 4: keep)
FLUSH_AHEAD = 8  # groups whose counters are fetched ahead of their flush (see _sum_rows)
# cost model of the two routes, per tree: bit-sliced ~ nodes x (words / 2 + NODE_COST),
# row routing ~ rows x (STEP_COST x depth + ROW_COST)
NODE_COST = 32
STEP_COST = 4
ROW_COST = 10
LIST_LEAVES = 8  # bit-sliced: groups listed when a tree has fewer active leaves ...
LIST_SHARE = 4  # ... or they hold less than a quarter of its rows (see _tree_by_bits)
# a row's vector add of one 64-lane block costs about as much as counting 13 words of bitmaps
# (measured: ~2 ns against ~0.15 ns, the popcounts vectorised): groups above that many rows
# per bitmap word are counted from the bitmaps
BLOCK_COST = 13
BY_COST, BY_ROWS, BY_BITS = 0, 1, 2  # the route of every tree: by the cost model, or forced


@intrinsic
def popcount(typingctx, x):
    """Set bits of an integer (LLVM's ctpop)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        fn = builder.module.declare_intrinsic("llvm.ctpop", [args[0].type])
        return builder.call(fn, args)

    return x(x), codegen


def pointer_at(context, builder, array, typ, offset, pointee):
    """Pointer to ``array.flat[offset]`` (of numba type ``typ``) as a pointer to ``pointee``."""
    data = context.make_array(typ)(context, builder, array).data
    return builder.bitcast(builder.gep(data, [offset]), pointee.as_pointer())


def _lane_block_at(context, builder, array, typ, offset):
    """Pointer to the ``LANE_BLOCK`` bytes of ``array`` from flat ``offset``, as one vector."""
    return pointer_at(
        context, builder, array, typ, offset, ir.VectorType(ir.IntType(8), LANE_BLOCK)
    )


def _uint8_arrays(*arrays):
    return all(isinstance(a, types.Array) and a.dtype == types.uint8 for a in arrays)


@intrinsic
def _add_lane_block(typingctx, dst, dst_at, src, src_ats):
    """``dst.flat[dst_at:dst_at + LANE_BLOCK] += src.flat[at:at + LANE_BLOCK]`` summed over
    the offsets ``at`` in the tuple ``src_ats``, on ``uint8`` arrays, as vector adds: written
    as a loop, LLVM cannot rule out that the arrays overlap and adds byte by byte."""
    if not (_uint8_arrays(dst, src) and isinstance(src_ats, types.UniTuple)):
        return None

    def codegen(context, builder, signature, args):
        target = _lane_block_at(context, builder, args[0], signature.args[0], args[1])
        total = builder.load(target, align=1)
        for i in range(signature.args[3].count):
            offset = builder.extract_value(args[3], i)
            total = builder.add(
                total,
                builder.load(
                    _lane_block_at(context, builder, args[2], signature.args[2], offset), align=1
                ),
            )
        builder.store(total, target, align=1)
        return context.get_dummy_value()

    return types.void(dst, types.int64, src, src_ats), codegen


@intrinsic
def _spread_lane_block(typingctx, dst, dst_ats, src, src_at):
    """``dst.flat[at:at + LANE_BLOCK] += src.flat[src_at:src_at + LANE_BLOCK]`` for every
    offset ``at`` in the tuple ``dst_ats``, in turn, on ``uint8`` arrays: the source block is
    loaded once, then added to each target, as vector adds."""
    if not (_uint8_arrays(dst, src) and isinstance(dst_ats, types.UniTuple)):
        return None

    def codegen(context, builder, signature, args):
        block = builder.load(
            _lane_block_at(context, builder, args[2], signature.args[2], args[3]), align=1
        )
        for i in range(signature.args[1].count):
            target = _lane_block_at(
                context, builder, args[0], signature.args[0], builder.extract_value(args[1], i)
            )
            builder.store(builder.add(builder.load(target, align=1), block), target, align=1)
        return context.get_dummy_value()

    return types.void(dst, dst_ats, src, types.int64), codegen


@intrinsic
def _add_where_set(typingctx, dst, at, word, value):
    """``dst[at + i] += value`` for every set bit ``i`` of the ``uint64`` ``word``, on 64
    ``int32`` entries from ``at``: the word is taken as a vector of 64 booleans (with
    AVX-512, one mask register), where a loop over the bits costs a shift, a mask and an add
    per bit."""
    if not (
        isinstance(dst, types.Array)
        and dst.dtype == types.int32
        and isinstance(word, types.Integer)
        and word.bitwidth == 64
    ):
        return None

    def codegen(context, builder, signature, args):
        lanes = ir.VectorType(ir.IntType(32), 64)
        zeros = ir.Constant(lanes, [0] * 64)
        target = pointer_at(context, builder, args[0], signature.args[0], args[1], lanes)
        first = builder.insert_element(
            ir.Constant(lanes, ir.Undefined),
            builder.trunc(args[3], ir.IntType(32)),
            ir.IntType(32)(0),
        )
        value = builder.shuffle_vector(first, ir.Constant(lanes, ir.Undefined), zeros)  # splat
        where = builder.bitcast(args[2], ir.VectorType(ir.IntType(1), 64))
        added = builder.select(where, value, zeros)
        builder.store(builder.add(builder.load(target, align=4), added), target, align=4)
        return context.get_dummy_value()

    return types.void(dst, types.int64, word, types.int64), codegen


@intrinsic
def _set_numbers(typingctx, dst, at, first, planes, n_planes, w, mask, scale):
    """``dst[at + i] = first + sum(scale << b)`` over the bitmaps ``b < n_planes`` of
    ``planes`` (shape (planes, words)) whose word ``w``, ANDed with ``mask``, has bit ``i``
    set, on 64 ``int32`` entries from ``at``: the bitmaps' bits are summed in vector
    registers and stored once, where adding them one at a time (:func:`_add_where_set`)
    would read and write the entries again for every bitmap."""
    if not (
        isinstance(dst, types.Array)
        and dst.dtype == types.int32
        and isinstance(planes, types.Array)
        and planes.dtype == types.uint64
        and planes.ndim == 2
    ):
        return None

    def codegen(context, builder, signature, args):
        dst_v, at_v, first_v, planes_v, n_v, w_v, mask_v, scale_v = args
        i32, i64 = ir.IntType(32), ir.IntType(64)
        lanes = ir.VectorType(i32, 64)
        zeros = ir.Constant(lanes, [0] * 64)

        def splat(value):
            one = builder.insert_element(
                ir.Constant(lanes, ir.Undefined), builder.trunc(value, i32), i32(0)
            )
            return builder.shuffle_vector(one, ir.Constant(lanes, ir.Undefined), zeros)

        planes_array = context.make_array(signature.args[3])(context, builder, planes_v)
        stride = builder.extract_value(planes_array.shape, 1)
        total = cgutils.alloca_once_value(builder, splat(first_v))
        with cgutils.for_range_slice(builder, i64(0), n_v, i64(1)) as (b, _):
            word = builder.load(
                pointer_at(
                    context,
                    builder,
                    planes_v,
                    signature.args[3],
                    builder.add(builder.mul(b, stride), w_v),
                    i64,
                )
            )
            where = builder.bitcast(builder.and_(word, mask_v), ir.VectorType(ir.IntType(1), 64))
            added = builder.select(where, splat(builder.shl(scale_v, b)), zeros)
            builder.store(builder.add(builder.load(total), added), total)
        target = pointer_at(context, builder, dst_v, signature.args[0], at_v, lanes)
        builder.store(builder.load(total), target, align=4)
        return context.get_dummy_value()

    return types.void(
        dst, types.int64, types.int64, planes, types.int64, types.int64, types.uint64, types.int64
    ), codegen


@intrinsic
def prefetch(typingctx, array, at):
    """Ask for the cache line of ``array.flat[at]`` (LLVM's prefetch, for a write): a load
    that would miss the caches is started early, without waiting for it."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        byte = ir.IntType(8)
        address = pointer_at(context, builder, args[0], signature.args[0], args[1], byte)
        int32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch",
            fnty=ir.FunctionType(ir.VoidType(), [byte.as_pointer(), int32, int32, int32]),
        )
        builder.call(fn, [address, int32(1), int32(3), int32(1)])  # write, keep, data
        return context.get_dummy_value()

    return types.void(array, types.int64), codegen


@nb.njit(cache=True)
def aligned_zeros(n_rows, width):
    """A zeroed ``uint8`` matrix whose rows start on cache lines (``width`` a multiple of
    ``LANE_BLOCK``): a vector add into a row that straddles two lines costs two."""
    buffer = np.zeros(n_rows * width + LANE_BLOCK, dtype=np.uint8)
    skip = -buffer.ctypes.data % LANE_BLOCK
    return buffer[skip : skip + n_rows * width].reshape((n_rows, width))


@nb.njit(cache=True)
def lanes(indicators):
    """The indicator matrix padded with zero columns to a multiple of ``LANE_BLOCK``, its rows
    on cache lines (numpy aligns to 16 bytes only): the count loads a row's lanes a block of
    ``LANE_BLOCK`` at a time, and a load that straddles two lines costs two."""
    n, K = indicators.shape
    out = aligned_zeros(n, max(1, -(-K // LANE_BLOCK)) * LANE_BLOCK)
    write_lanes(indicators, out)
    return out


@nb.njit(cache=True)
def write_lanes(indicators, out):
    """:func:`lanes` of ``indicators`` into the first rows of ``out`` (made as :func:`lanes`
    makes its matrix, its padding columns zero: they are not written)."""
    K = indicators.shape[1]
    width = out.shape[1]
    flat = out.reshape(out.shape[0] * width)  # copied through 1-d views, the loop vectorises
    for r in range(indicators.shape[0]):
        dst, src = flat[r * width : r * width + K], indicators[r]
        for k in range(K):
            dst[k] = src[k]


@nb.njit(cache=True)
def value_bits(rows, max_card, complete=False):
    """``bits[j, a, w]``: bit ``i`` is set when ``rows[64 w + i, j] == a`` (a missing value
    sets none), shape (n_vars, max_card, words). ``complete``: the rows have no missing
    values, so a row whose value is none of ``1 .. max_card - 1`` is 0, and the bitmaps of
    value 0 are the rows' complement of the others' (half the comparisons for binary rows).

    A whole word's 64 rows are compared eight rows at a time into a byte per variable (a
    loop over the variables of byte lanes, vectorised), and the eight bytes of a variable
    then joined into its word: setting each row's bit in 64-bit words would compare and
    OR in 64-bit lanes, eight times the vector operations (2.5x slower)."""
    bits = np.empty((rows.shape[1], max_card, (rows.shape[0] + 63) // 64), dtype=np.uint64)
    write_value_bits(rows, bits, complete)
    return bits


@nb.njit(cache=True)
def write_value_bits(rows, bits, complete=False):
    """:func:`value_bits` of ``rows`` into ``bits`` (of its shape; every entry is written)."""
    n, n_vars = rows.shape
    W = bits.shape[2]
    max_card = bits.shape[1]
    word = np.empty((max_card, n_vars), dtype=np.uint64)
    octets = np.empty((8, n_vars), dtype=np.uint8)  # bit k of octets[g, j]: row 8 g + k
    compared = 1 if complete else 0  # the first value compared
    for w in range(W):
        in_word = min(64, n - 64 * w)
        for a in range(compared, max_card):
            value = np.uint8(a)
            if in_word < 64:  # the last word, row by row
                word[a] = 0
                for i in range(in_word):
                    for j in range(n_vars):
                        if rows[64 * w + i, j] == value:
                            word[a, j] |= np.uint64(1) << np.uint64(i)
                continue
            for g in range(8):
                first = 64 * w + 8 * g
                octet = octets[g]
                for j in range(n_vars):
                    x = np.uint8(0)
                    for k in range(8):
                        x |= np.uint8(1 << k) if rows[first + k, j] == value else np.uint8(0)
                    octet[j] = x
            for j in range(n_vars):
                x = np.uint64(0)
                for g in range(8):
                    x |= np.uint64(octets[g, j]) << np.uint64(8 * g)
                word[a, j] = x
        if complete:
            rows_of_word = ~np.uint64(0) >> np.uint64(64 - in_word)
            for j in range(n_vars):
                other = np.uint64(0)
                for a in range(1, max_card):
                    other |= word[a, j]
                word[0, j] = rows_of_word & ~other
        for a in range(max_card):
            for j in range(n_vars):
                bits[j, a, w] = word[a, j]


@nb.njit(cache=True)
def _sum_rows(lanes, group_of_row, group_rows, group_slot, group_y, K, acc, stats, in_use):
    """Sum the rows of ``SWEEP_TREES`` trees into their groups' statistics, in one pass.

    Every row's indicator lanes are added to the ``uint8`` accumulators ``acc[g]`` of its
    groups ``g = group_of_row[i, r]`` in the sweep's trees ``i``, in row order: a row's lanes
    are loaded once for all of them, and the rows that are not summed (group without a slot,
    trees missing from the sweep) go to trash accumulators without a branch. A group with
    rows (``group_rows[g]``, zeroed here) and a slot is flushed into ``stats[group_slot[g],
    group_y[g]]``: at the end, and every ``LANE_ROWS`` rows if it has more (no lane
    overflows, and no row keeps a count of its group's rows). The last flushes fetch the
    counters of the group ``FLUSH_AHEAD`` ahead: the statistics of all the leaves do not
    stay in cache, and each flush would wait on memory. Tree ``i``'s groups are the first
    ``in_use[i]`` of its share of the groups (the shares are sized for the biggest tree of
    the batch: most trees use few of theirs)."""
    width = lanes.shape[1]
    n = lanes.shape[0]
    stride = group_rows.shape[0] // SWEEP_TREES
    flushed = np.empty(group_rows.shape[0], dtype=np.int64)  # the big groups, then the others
    n_big = 0
    for i in range(SWEEP_TREES):
        for g in range(i * stride, i * stride + in_use[i]):
            if group_rows[g] > LANE_ROWS and group_slot[g] >= 0:
                flushed[n_big] = g
                n_big += 1
    in0, in1, in2, in3 = group_of_row[0], group_of_row[1], group_of_row[2], group_of_row[3]
    for start in range(0, n, LANE_ROWS):
        for r in range(start, min(n, start + LANE_ROWS)):
            i = np.uint64(r)  # unsigned: no test for a negative index
            g0, g1, g2, g3 = in0[i] * width, in1[i] * width, in2[i] * width, in3[i] * width
            if width == 2 * LANE_BLOCK:  # 65-128 columns (100 binary): unrolled, so the
                # loop keeps its pointers in registers (~7% of the pass's count)
                _spread_lane_block(acc, (g0, g1, g2, g3), lanes, r * width)
                _spread_lane_block(
                    acc,
                    (g0 + LANE_BLOCK, g1 + LANE_BLOCK, g2 + LANE_BLOCK, g3 + LANE_BLOCK),
                    lanes,
                    r * width + LANE_BLOCK,
                )
                continue
            for k in range(0, width, LANE_BLOCK):
                _spread_lane_block(acc, (g0 + k, g1 + k, g2 + k, g3 + k), lanes, r * width + k)
        for i in range(n_big):
            g = flushed[i]
            flush(acc, g, stats, group_slot[g], group_y[g], K)
    n_flushed = n_big
    for i in range(SWEEP_TREES):
        for g in range(i * stride, i * stride + in_use[i]):
            if 0 < group_rows[g] <= LANE_ROWS and group_slot[g] >= 0:
                flushed[n_flushed] = g
                n_flushed += 1
            group_rows[g] = 0
    for i in range(n_big, n_flushed):
        if i + FLUSH_AHEAD < n_flushed:
            g = flushed[i + FLUSH_AHEAD]
            at = (group_slot[g] * stats.shape[1] + group_y[g]) * K
            for k in range(0, K, 64 // stats.itemsize):  # every cache line of the row
                prefetch(stats, at + k)
            prefetch(stats, at + K - 1)
        g = flushed[i]
        flush(acc, g, stats, group_slot[g], group_y[g], K)


@nb.njit(cache=True, inline="always")
def flush(acc, g, stats, s, y, K):
    """Add accumulator ``acc[g]`` to ``stats[s, y]`` and zero it."""
    for k in range(K):
        stats[s, y, k] += acc[g, k]
    for k in range(acc.shape[1]):
        acc[g, k] = 0


@nb.njit(cache=True)
def _into_sweep(group_of_row, base, group_slot, trash):
    """A tree's group numbers (``group_slot``: its groups' slots) made rows of the sweep's
    accumulators from ``base``; rows of no group (-1: a missing target) or of a group without
    a slot go to the ``trash`` row."""
    for r in range(group_of_row.shape[0]):
        g = group_of_row[r]
        group_of_row[r] = trash if g < 0 or group_slot[g] < 0 else base + g


@nb.njit(cache=True, inline="always")
def extract(mask, W, listed, start=0):
    """Write the positions of the set bits of ``mask``'s words ``start .. W - 1`` to
    ``listed``; return how many."""
    count = 0
    for w in range(start, W):
        x = mask[w]
        while x:
            listed[count] = 64 * w + trailing_zeros(x)
            count += 1
            x &= x - np.uint64(1)
    return count


@nb.njit(cache=True)
def _sum_group(lanes, listed, count, stats, s, y, K, acc):
    """Add the indicator lanes of rows ``listed[:count]`` to ``stats[s, y]``: four rows per
    vector add into the ``uint8`` accumulator ``acc[0]``, flushed every ``LANE_ROWS`` rows."""
    width = lanes.shape[1]
    i = 0
    while i < count:
        stop = min(count, i + LANE_ROWS)
        m = i
        while m + 4 <= stop:
            a, b, c, d = listed[m], listed[m + 1], listed[m + 2], listed[m + 3]
            for k in range(0, width, LANE_BLOCK):
                _add_lane_block(
                    acc, k, lanes, (a * width + k, b * width + k, c * width + k, d * width + k)
                )
            m += 4
        for m in range(m, stop):
            for k in range(0, width, LANE_BLOCK):
                _add_lane_block(acc, k, lanes, (listed[m] * width + k,))
        flush(acc, 0, stats, s, y, K)
        i = stop


@nb.njit(cache=True, inline="always")
def _by_bits(n_rows, blocks, K, W, block_cost):
    """Whether ``n_rows`` rows are counted faster from the bitmaps (``K`` bitmaps of ``W``
    words, :func:`_count_bits`) than by summing their lanes (``blocks`` vector adds a row, each
    costing ``block_cost`` words: :data:`BLOCK_COST`)."""
    return n_rows * blocks * block_cost > K * W


@nb.njit(cache=True)
def _count_bits(group, W, bits, cards, offsets, stats, s, y, start=0):
    """Add the indicator vectors of the rows in the mask ``group`` (its words ``start .. W -
    1``) to ``stats[s, y]`` from the batch's bitmaps: column ``offsets[j] + a - 1`` (``x_j =
    a``) gains the rows of ``group AND bits[j, a]``, a popcount per word (vectorised): the cost
    is the columns times the words, whatever the group's size."""
    rows = group[start:W]
    for j in range(cards.shape[0]):
        for a in range(1, cards[j]):
            column = bits[j, a, start:W]
            c = 0
            for w in range(rows.shape[0]):
                c += np.int64(popcount(rows[w] & column[w]))
            stats[s, y, offsets[j] + a - 1] += c


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
def _tree_by_bits(
    t,
    count,
    offsets,
    due,
    n_due,
    listing,
    masks,
    stack,
    planes,
    listed,
    group_of_row,
    base,
    trash,
    group,
    group_rows,
    group_slot,
    group_y,
    acc,
    sizes,
):
    """Bit-sliced routing of the batch of ``count`` (a :class:`Count`) through tree ``t`` and
    counting at its leaves; return the number of due slots (the rows are numbered, to be
    summed by the caller, unless ``listing``).

    Two ways to find the rows of each group (leaf, target value), chosen by the caller:

    * *numbering* (many active leaves, each holding a small share of the rows: converged
      trees): the walk numbers the active leaves 1, 2, ...; bit ``b`` of every row's leaf
      number is the OR of the masks of the leaves with that bit, one bitmap per bit
      (``planes``), read back 64 rows at a time (:func:`_set_numbers`); a row's group is its
      leaf number times ``C`` plus its target value (``group_rows``, ``group_slot`` and
      ``group_y`` give a group's rows, slot and target value), and ``group_of_row`` (64 x
      ``W`` entries) its accumulator in the caller's sweep: ``base`` plus its group, or
      ``trash`` for rows not to be summed (at no numbered leaf, or with a missing target).
      The caller sums the rows in row order into their groups' accumulators
      (:func:`_sum_rows`). Listing the
      rows of many small groups would test every word of the batch per group, and mispredict
      on most.
    * *listing* (``listing``: few active leaves, or few rows at active leaves: young trees,
      later passes of exact growth): each group's rows are listed from its mask and summed
      four at a time (:func:`_sum_group`, in ``acc[0]``); rows at inactive leaves cost
      nothing, and a big group is not one chain of updates to the same accumulator.

    A listed group big enough that :func:`_by_bits` says so is counted from the bitmaps
    instead (:func:`_count_bits`). A numbered leaf never is: in the caller's sweep a row costs
    its lane adds whether it is summed or sent to the trash."""
    n, bits, cards, lanes, K = count.rows.shape[0], count.bits, count.cards, count.lanes, count.K
    root, links = count.roots[t], count.links
    node_slot, node_counts = count.node_slot, count.node_counts
    tot, stats, slot_n, slot_last = count.tot, count.stats, count.slot_n, count.slot_last
    count_leaves, grace, block_cost = count.count_leaves, count.grace, count.block_cost
    C = stats.shape[1]
    card = cards[t]
    W = masks.shape[1]
    blocks = lanes.shape[1] // LANE_BLOCK
    for w in range(W):
        masks[0, w] = ~np.uint64(0)
    if n % 64:
        masks[0, W - 1] = (np.uint64(1) << np.uint64(n % 64)) - np.uint64(1)
    stack[0] = root
    sp = 0
    n_leaves = 0  # leaves numbered so far
    n_planes = 0  # bitmaps of leaf-number bits in use
    while sp >= 0:  # depth first; masks[sp] holds the rows of node stack[sp]
        node = stack[sp]
        v = links[node, 0]
        if v >= 0:  # true side into masks[sp], false side into masks[sp + 1]
            a = links[node, 1]
            for side in range(2, 4):  # the children's fields, fetched while the masks split
                child = links[node, side]
                prefetch(links, links.shape[1] * child)
                prefetch(node_slot, child)
                prefetch(node_counts, node_counts.shape[1] * child)
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
        if s < 0 and not count_leaves:
            sp -= 1  # nothing to count at this leaf
            continue
        total = 0
        for y in range(card):  # group (node, y): the leaf's rows with target value y
            c = 0
            for w in range(W):
                c += popcount(masks[sp, w] & bits[t, y, w])
            total += c
            sizes[y] = c
            if c and count_leaves:
                node_counts[node, y] += c
            if c and s >= 0:
                tot[s, y] += c
        if s >= 0 and grace > 0 and total > 0:
            n_due = _due(s, total, slot_n, slot_last, grace, due, n_due)
        if s >= 0 and listing:
            for y in range(card):
                if sizes[y] == 0:
                    continue
                for w in range(W):
                    group[w] = masks[sp, w] & bits[t, y, w]
                if _by_bits(sizes[y], blocks, K, W, block_cost):
                    _count_bits(group, W, bits, cards, offsets, stats, s, y)
                else:
                    _sum_group(lanes, listed, extract(group, W, listed), stats, s, y, K, acc)
        elif s >= 0:
            n_leaves += 1
            for y in range(C):
                group_slot[n_leaves * C + y] = s
                group_y[n_leaves * C + y] = y
                group_rows[n_leaves * C + y] = sizes[y] if y < card else 0
            if n_leaves >> n_planes:  # one more bit: its bitmap starts empty
                for w in range(W):
                    planes[n_planes, w] = 0
                n_planes += 1
            number = n_leaves
            while number:  # its set bits, lowest first (a test of every bit would mispredict)
                b = trailing_zeros(number)
                number &= number - 1
                for w in range(W):
                    planes[b, w] |= masks[sp, w]
        sp -= 1
    if listing:
        return n_due
    for w in range(W):  # the groups from the bitmaps, 64 rows at a time
        at = 64 * w
        numbered = np.uint64(0)
        for b in range(n_planes):
            numbered |= planes[b, w]
        summed = np.uint64(0)  # numbered rows with a target value
        for y in range(card):
            summed |= bits[t, y, w]
        summed &= numbered
        _set_numbers(group_of_row, at, base, planes, n_planes, w, summed, C)
        for y in range(1, card):
            _add_where_set(group_of_row, at, bits[t, y, w] & summed, y)
        _add_where_set(group_of_row, at, ~summed, trash - base)
    return n_due


@nb.njit(cache=True)
def _tree_by_rows(
    t,
    count,
    steps,
    table,
    due,
    n_due,
    group_of_key,
    group_of_row,
    group_slot,
    group_y,
    group_rows,
):
    """Row routing of the batch of ``count`` (a :class:`Count`) through tree ``t``, its rows'
    groups found with a table of (leaf, target value) keys, and counting at the leaves; the
    caller sums the rows into their groups (as after :func:`_tree_by_bits`)."""
    rows, root = count.rows, count.roots[t]
    node_slot, node_counts = count.node_slot, count.node_counts
    tot, stats, slot_n, slot_last = count.tot, count.stats, count.slot_n, count.slot_last
    count_leaves, grace = count.count_leaves, count.grace
    n = rows.shape[0]
    C = stats.shape[1]
    route_fixed(rows, root, steps, table, group_of_row)
    n_groups = 0
    for r in range(n):
        leaf = group_of_row[r]
        y = rows[r, t]
        if y == MISSING:  # missing target: routed, not counted (streammn.trees.missing)
            group_of_row[r] = -1
            continue
        key = leaf * C + y
        g = group_of_key[key]
        if g < 0:
            g = n_groups
            group_of_key[key] = g
            group_slot[g] = key  # the key, until the groups are counted below
            group_rows[g] = 0
            n_groups += 1
        group_rows[g] += 1
        group_of_row[r] = g
    for g in range(n_groups):
        key = group_slot[g]
        group_of_key[key] = -1
        leaf, y = key // C, key % C
        c = group_rows[g]
        if count_leaves:
            node_counts[leaf, y] += c
        s = node_slot[leaf]
        group_slot[g] = s
        group_y[g] = y
        if s < 0:
            continue
        tot[s, y] += c
        if grace > 0:
            n_due = _due(s, c, slot_n, slot_last, grace, due, n_due)
    return n_due


@nb.njit(cache=True)
def _census(node_tree, node_depth, links, node_slot, node_counts, n_trees):
    """Every tree of the forest's first ``node_tree.shape[0]`` nodes: its depth (``depth``
    unconditional steps through a :func:`streammn.trees.kernels.routing_table` take any row
    from the root to its leaf, see :func:`streammn.trees.kernels.route_fixed`), its number
    of nodes and of leaves, and whether its groups are best listed (see
    :func:`_tree_by_bits`): fewer than ``LIST_LEAVES`` active leaves (``node_slot >= 0``), or
    holding less than ``1 / LIST_SHARE`` of its rows by their counts. One pass over the nodes
    in memory order, without a branch on what a node is: a walk of each tree from its root
    would wait on memory at every node."""
    depth = np.zeros(n_trees, dtype=np.int64)
    nodes = np.zeros(n_trees, dtype=np.int64)
    leaves = np.zeros(n_trees, dtype=np.int64)
    held = np.zeros(n_trees, dtype=np.int64)
    active = np.zeros(n_trees, dtype=np.int64)
    n_active = np.zeros(n_trees, dtype=np.int64)
    for node in range(node_tree.shape[0]):
        t = node_tree[node]
        leaf = links[node, 0] < 0
        c = 0
        for y in range(node_counts.shape[1]):
            c += node_counts[node, y]
        is_active = leaf & (node_slot[node] >= 0)
        depth[t] = max(depth[t], node_depth[node])
        nodes[t] += 1
        leaves[t] += leaf
        held[t] += c * leaf
        active[t] += c * is_active
        n_active[t] += is_active
    listing = np.empty(n_trees, dtype=np.bool_)
    for t in range(n_trees):
        listing[t] = n_active[t] < LIST_LEAVES or active[t] * LIST_SHARE < held[t]
    return depth, nodes, leaves, listing


@nb.njit(cache=True)
def _routes(trees, n, links, tree_steps, tree_nodes, route):
    """Whether each tree of ``trees`` routes a batch of ``n`` rows bit-sliced (by the cost
    model of the two routes, see :data:`NODE_COST`; or all of them as ``route`` says, when
    it is :data:`BY_ROWS` or :data:`BY_BITS`), by tree; and the routing table of
    ``links`` (:func:`streammn.trees.kernels.routing_table`) when some tree is routed by rows,
    else an empty one: the table is a copy of every node, and converged trees of a batch of a
    few thousand rows all route bit-sliced."""
    W = (n + 63) // 64
    by_bits = np.ones(tree_nodes.shape[0], dtype=np.bool_)
    by_rows = False
    for t in trees:
        by_bits[t] = tree_nodes[t] * (W // 2 + NODE_COST) <= n * (
            STEP_COST * tree_steps[t] + ROW_COST
        )
        if route != BY_COST:
            by_bits[t] = route == BY_BITS
        by_rows |= not by_bits[t]
    if by_rows:
        return by_bits, routing_table(links)
    return by_bits, np.empty((0, links.shape[1]), dtype=links.dtype)


@nb.njit(cache=True)
def add_rows(count, planned, q0, q1, due):
    """Count the batch of ``count`` (a :class:`Count`) into trees ``trees[q0:q1]`` of its
    :func:`plan` ``planned``, routed one tree after another (its nodes and slots stay in
    cache), the rows of numbered trees summed ``SWEEP_TREES`` trees per sweep
    (:func:`_sum_rows`); return the number of due slots written to ``due`` (a row of
    ``count.due``)."""
    trees, tree_steps, tree_by_bits, tree_leaves, tree_listing, table = planned
    rows, lanes, K, cards, stats = count.rows, count.lanes, count.K, count.cards, count.stats
    n = rows.shape[0]
    C = stats.shape[1]
    W = (n + 63) // 64
    depth = 0
    # groups of each tree: (leaf number + 1) x C by bits, at most n by rows
    tree_groups = np.empty(q1 - q0, dtype=np.int64)
    for q in range(q0, q1):
        t = trees[q]
        depth = max(depth, tree_steps[t])
        leaves = tree_leaves[t]
        tree_groups[q - q0] = (leaves + 1) * C if tree_by_bits[t] else min(n, leaves * C)
    n_groups = tree_groups.max() if q1 > q0 else 0  # a sweep's share for each of its trees
    masks = np.empty((depth + 2, W), dtype=np.uint64)
    stack = np.empty(depth + 2, dtype=np.int32)
    planes = np.empty((32, W), dtype=np.uint64)
    listed = np.empty(n, dtype=np.int32)
    group = np.empty(W, dtype=np.uint64)
    # the sweep's tree i has accumulator rows i * n_groups ..; then come a trash row for each
    # tree of the sweep (trash + i: a trash row shared by the trees would make one chain of
    # updates of rows that wait on each other, as when a sweep has fewer than four trees)
    # and the row the listing route sums in
    trash = SWEEP_TREES * n_groups
    group_of_row = np.empty((SWEEP_TREES, 64 * W), dtype=np.int32)
    group_slot = np.full(trash, -1, dtype=np.int32)
    group_y = np.zeros(trash, dtype=np.int32)
    acc = aligned_zeros(trash + SWEEP_TREES + 1, lanes.shape[1])
    group_rows = np.zeros(trash, dtype=np.int64)
    group_of_key = np.zeros(0, dtype=np.int32)  # row routing's scratch, made when needed
    offsets = np.zeros(cards.shape[0], dtype=np.int64)  # of each variable's indicator columns
    for j in range(1, cards.shape[0]):
        offsets[j] = offsets[j - 1] + cards[j - 1] - 1
    sizes = np.zeros(C, dtype=np.int64)
    n_due = 0
    in_sweep = 0  # trees whose rows' groups wait in group_of_row
    in_use = np.zeros(SWEEP_TREES, dtype=np.int64)  # their groups, at most
    for q in range(q0, q1):
        t = trees[q]
        base = in_sweep * n_groups
        tree_rows = group_rows[base : base + n_groups]
        tree_slot = group_slot[base : base + n_groups]
        tree_y = group_y[base : base + n_groups]
        if tree_by_bits[t]:
            numbered = not tree_listing[t]
            n_due = _tree_by_bits(
                t,
                count,
                offsets,
                due,
                n_due,
                tree_listing[t],
                masks,
                stack,
                planes,
                listed,
                group_of_row[in_sweep],
                base,
                trash + in_sweep,
                group,
                tree_rows,
                tree_slot,
                tree_y,
                acc[trash + SWEEP_TREES :],
                sizes,
            )
        else:
            if group_of_key.shape[0] == 0:
                group_of_key = np.full(count.node_counts.shape[0] * C, -1, dtype=np.int32)
            n_due = _tree_by_rows(
                t,
                count,
                tree_steps[t],
                table,
                due,
                n_due,
                group_of_key,
                group_of_row[in_sweep, :n],
                tree_slot,
                tree_y,
                tree_rows,
            )
            _into_sweep(group_of_row[in_sweep, :n], base, tree_slot, trash + in_sweep)
            numbered = True
        if numbered:
            in_use[in_sweep] = tree_groups[q - q0]
            in_sweep += 1
        if in_sweep == SWEEP_TREES or (in_sweep and q == q1 - 1):
            for i in range(in_sweep, SWEEP_TREES):
                group_of_row[i] = trash + i
                in_use[i] = 0
            _sum_rows(lanes, group_of_row, group_rows, group_slot, group_y, K, acc, stats, in_use)
            in_sweep = 0
    return n_due


#: A count of a batch into the trees (:func:`accumulate`): the batch's ``rows`` with their
#: :func:`value_bits` ``bits`` and :func:`lanes` ``lanes`` (``K`` indicator columns, the
#: variables' ``cards``); the ``trees`` to count into, the forest's ``roots`` and ``links``,
#: ``node_tree`` and ``node_depth`` (the tree and the depth of every node of the forest: its
#: first ``node_tree.shape[0]`` nodes are all there are), ``node_slot`` (the active leaves'
#: slots) and ``node_counts``; the leaves' target counts are counted with ``count_leaves``,
#: the active slots' ``tot`` and ``stats`` always, and their row counts ``slot_n``; with
#: ``grace > 0``, slots whose row count since ``slot_last`` passes ``grace`` are written to
#: ``due``, a row per parallel block. ``block_cost``: when a listed group is counted from the
#: bitmaps (:func:`_by_bits`); ``route``: see :func:`_routes`.
Count = namedtuple(
    "Count",
    "rows bits lanes K cards trees roots links node_tree node_depth node_slot node_counts "
    "count_leaves tot stats slot_n slot_last grace due block_cost route",
    defaults=(BLOCK_COST, BY_COST),
)


def _counter(loop):
    """The count kernel, its loop over blocks of trees run by ``loop`` (:func:`twins`)."""

    def accumulate(count):
        """Count the batch of ``count`` (a :class:`Count`) into its trees: the target counts
        of every leaf with ``count_leaves``, the statistics of active leaves; returns how many
        due slots it wrote to ``due[0]``. The trees, dealt by their number of nodes
        (:func:`_dealt`), are cut into ``due.shape[0]`` blocks (each block writes only its
        own trees' nodes and slots, and its own ``due[block]``; the due slots are then
        gathered into ``due[0]``). The groups of trees whose groups are listed are counted
        from the bitmaps or by their lanes as ``block_cost`` says."""
        n_blocks = count.due.shape[0]
        planned = plan(count, n_blocks)
        n_due = zero_counts(n_blocks)
        for b in loop(n_blocks):
            n_due[b] = add_block(count, planned, b, n_blocks)
        return gather(count.due, n_due)

    return accumulate


accumulate, accumulate_parallel = twins(_counter)


@nb.njit(cache=True)
def plan(count, n_blocks):
    """What the count ``count`` in ``n_blocks`` parallel blocks needs before it starts: its
    trees in block order (dealt by their number of nodes when ``n_blocks > 1``,
    :func:`_dealt`), every tree's depth, route, leaves and whether its groups are listed
    (:func:`_census`, :func:`_routes`), and the routing table."""
    links = count.links
    n_nodes = count.node_tree.shape[0]
    steps, nodes, leaves, listing = _census(
        count.node_tree,
        count.node_depth,
        links,
        count.node_slot,
        count.node_counts,
        count.roots.shape[0],
    )
    trees = count.trees
    if n_blocks > 1:
        trees = _dealt(trees, nodes, n_blocks)
    by_bits, table = _routes(trees, count.rows.shape[0], links[:n_nodes], steps, nodes, count.route)
    return trees, steps, by_bits, leaves, listing, table


@nb.njit(cache=True)
def add_block(count, planned, b, n_blocks):
    """:func:`add_rows` of block ``b`` of ``n_blocks`` of the planned trees (``planned``:
    :func:`plan`), into ``count.due[b]``."""
    T = planned[0].shape[0]
    return add_rows(count, planned, b * T // n_blocks, (b + 1) * T // n_blocks, count.due[b])


@nb.njit(cache=True)
def _dealt(items, sizes, n_blocks):
    """``items`` reordered so that cut into ``n_blocks`` equal runs (a parallel kernel's
    blocks) each run holds a like share of their ``sizes[items]``: largest first, dealt out
    in turn. A forest's trees differ in size tenfold (on a planted network the trees of the
    first half of the variables held 90% of the leaves), and a parallel step waits for its
    slowest block."""
    order = largest_first(items, sizes)
    dealt = np.empty_like(order)
    i = 0
    for b in range(n_blocks):
        for j in range(b, order.shape[0], n_blocks):
            dealt[i] = order[j]
            i += 1
    return dealt


@nb.njit(cache=True)
def zero_counts(n):
    """``n`` zero counts, made outside the parallel kernel: there numba makes every array
    operation a parallel loop of its own, each waking the threads."""
    return np.zeros(n, dtype=np.int64)


@nb.njit(cache=True)
def gather(due, n_due):
    """Move the ``n_due[b]`` due slots of every block ``b`` into ``due[0]``; return how many
    (outside the parallel kernel, as :func:`zero_counts`)."""
    count = n_due[0]
    for b in range(1, due.shape[0]):
        for i in range(n_due[b]):
            due[0, count + i] = due[b, i]
        count += n_due[b]
    return count


@nb.njit(cache=True, inline="always")
def _bits_from(row, at):
    """The 64 bits of bitmap ``row`` from bit ``at`` on (bits past its end read as 0)."""
    w, shift = at >> 6, np.uint64(at & 63)
    x = row[w] >> shift if w < row.shape[0] else np.uint64(0)
    if shift and w + 1 < row.shape[0]:
        x |= row[w + 1] << (np.uint64(64) - shift)
    return x


@nb.njit(cache=True)
def copy_bits(dst, dst_at, src, src_at, count):
    """Copy bits ``src_at .. src_at + count - 1`` of every bitmap of ``src`` (shaped as
    :func:`value_bits`) to bits ``dst_at ..`` of the same bitmap of ``dst``, a destination
    word at a time: the words the range covers whole are a funnel shift of two source words
    (a loop without branches, vectorised), the one or two words at its ends are merged."""
    if count <= 0:
        return
    end = dst_at + count
    first_w, last_w = dst_at >> 6, (end - 1) >> 6
    full_from = first_w if dst_at & 63 == 0 else first_w + 1
    full_to = last_w + 1 if end & 63 == 0 else last_w  # whole words: full_from .. full_to - 1
    # whole words read source words sw, sw + 1 from sw = (64 dw + delta) >> 6: keep sw + 1
    # within the source, or leave the word to the merging path
    delta = src_at - dst_at
    shift = np.uint64(delta & 63)
    while full_to > full_from and ((64 * (full_to - 1) + delta) >> 6) + 1 >= src.shape[2]:
        full_to -= 1
    full_to = max(full_to, full_from)
    for j in range(src.shape[0]):
        for a in range(src.shape[1]):
            s_row, d_row = src[j, a], dst[j, a]
            # slices indexed from 0, so the loops vectorise
            whole = d_row[full_from:full_to]
            from_word = s_row[(64 * full_from + delta) >> 6 :]
            if shift:
                for i in range(whole.shape[0]):
                    whole[i] = (from_word[i] >> shift) | (
                        from_word[i + 1] << (np.uint64(64) - shift)
                    )
            else:
                whole[:] = from_word[: whole.shape[0]]
            _merge_words(s_row, d_row, first_w, full_from, dst_at, end, delta)
            _merge_words(s_row, d_row, full_to, last_w + 1, dst_at, end, delta)


@nb.njit(cache=True, inline="always")
def _merge_words(s_row, d_row, w0, w1, dst_at, end, delta):
    """:func:`copy_bits`' words ``w0 .. w1 - 1`` of one bitmap, each merged with the bits of
    the destination word outside the copied range."""
    for dw in range(w0, w1):
        lo, hi = max(dst_at, 64 * dw), min(end, 64 * dw + 64)
        low = ~np.uint64(0) >> np.uint64(64 - (hi - lo))
        at = np.uint64(lo & 63)
        x = _bits_from(s_row, lo + delta) & low
        d_row[dw] = (d_row[dw] & ~(low << at)) | (x << at)
