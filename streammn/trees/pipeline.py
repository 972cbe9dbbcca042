"""The one-pass count of a chunk, with the chunk's other work done on the side.

A Hoeffding grower (:mod:`streammn.trees.hoeffding`) does three things with each chunk of the
stream: it prepares the chunk (its value bitmaps and indicator lanes,
:meth:`LeafStats.prepare <streammn.trees.leaf_stats.LeafStats.prepare>`), counts it into the trees
(:mod:`streammn.trees.leaf_counting`), and writes it into its replay buffer (the rows, their
bitmaps and their packed indicator vectors, :func:`remember`). Only the count runs on several
threads; done one after another, the other two took about a tenth of a default pass at 100
binary variables, on one core while the other waited.

When the count runs in parallel, :func:`count_and_stage` therefore does the other two inside
the same parallel step: the first block also prepares the *next* chunk (the rows of a chunk
do not depend on what the looks at its start decide, only where they go does), and the last
block writes this chunk into the buffer (the count reads neither). No block waits for
another within the step, so a busy machine that deschedules a thread costs what it cost the
count alone; the next chunk's count finds its bitmaps and lanes ready. Every array a block
writes is its own: the next chunk's prepared arrays, the buffer's rows and words, and the
count's own trees and slots.
"""

from __future__ import annotations

import numba as nb

from streammn.trees import leaf_counting, replay
from streammn.trees.leaf_counting import add_block, gather, zero_counts


@nb.njit(cache=True)
def remember(rows, bits, ring, ring_bits, ring_packed, runs, cards, offsets):
    """Write rows ``runs[i, 0] ..`` of ``rows`` (value bitmaps ``bits``) to the replay buffer
    from its row ``runs[i, 1]`` on, ``runs[i, 2]`` rows, for every run ``i`` (a ring buffer
    takes a chunk in at most two runs): the rows to ``ring``, their bitmaps to ``ring_bits``
    (:func:`leaf_counting.copy_bits`) and their packed indicator vectors to ``ring_packed``
    (:func:`replay.pack_rows`, which reads the rows from ``ring``). ``rows`` and ``ring``
    are C-contiguous: a run's rows are copied as one run of bytes (row by row, the copy of
    16-variable rows took 4x longer; as row slices, numba's copy of 100-variable rows 14x)."""
    m = rows.shape[1]
    flat_rows, flat_ring = rows.reshape(rows.size), ring.reshape(ring.size)
    for i in range(runs.shape[0]):
        src, dst, count = runs[i, 0], runs[i, 1], runs[i, 2]
        source = flat_rows[src * m : (src + count) * m]
        target = flat_ring[dst * m : (dst + count) * m]
        for k in range(source.shape[0]):
            target[k] = source[k]
        leaf_counting.copy_bits(ring_bits, dst, bits, src, count)
        replay.pack_rows(ring, dst, count, cards, offsets, ring_packed)


@nb.njit(cache=True)
def prepare(rows, indicators, complete, bits, lanes):
    """The value bitmaps (:func:`leaf_counting.write_value_bits`) and indicator lanes
    (:func:`leaf_counting.write_lanes`) of ``rows`` into ``bits`` and ``lanes`` (none when there
    are no rows)."""
    if rows.shape[0]:
        leaf_counting.write_lanes(indicators, lanes)
        leaf_counting.write_value_bits(rows, bits, complete)


@nb.njit(cache=True, parallel=True)
def count_and_stage(
    count,
    ahead,
    ahead_indicators,
    complete,
    ahead_bits,
    ahead_lanes,
    ring,
    ring_bits,
    ring_packed,
    runs,
    offsets,
):
    """:func:`leaf_counting.accumulate_parallel` of ``count`` (a :class:`leaf_counting.Count`),
    with the first block also preparing the rows ``ahead`` (:func:`prepare`, into
    ``ahead_bits`` and ``ahead_lanes``) and the last also writing the count's rows to the
    replay buffer (:func:`remember`); returns the number of due slots gathered in
    ``count.due[0]``."""
    n_blocks = count.due.shape[0]
    planned = leaf_counting.plan(count, n_blocks)
    n_due = zero_counts(n_blocks)
    for b in nb.prange(n_blocks):
        if b == 0:
            prepare(ahead, ahead_indicators, complete, ahead_bits, ahead_lanes)
        if b == n_blocks - 1:
            remember(
                count.rows, count.bits, ring, ring_bits, ring_packed, runs, count.cards, offsets
            )
        n_due[b] = add_block(count, planned, b, n_blocks)
    return gather(count.due, n_due)
