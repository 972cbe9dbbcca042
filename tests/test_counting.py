"""The segmented count (streammn.trees.leaf_counting) against a row-by-row count in numpy, through
both of its routes (bit-sliced and row routing), binary and multi-valued, with missing values;
the bitmap replay likewise; split scoring's log tables against computed logarithms."""

import numpy as np
import pytest

from streammn.schema import Schema
from streammn.trees import leaf_counting, kernels, replay
from streammn.trees.forest import Forest
from streammn.trees.leaf_stats import LeafStats


def random_forest(schema, rng, n_splits):
    f = Forest(schema)
    for _ in range(n_splits):
        leaves = f.leaves()
        node = leaves[rng.integers(leaves.size)]
        t = f.tree[node]
        var = int(rng.choice([j for j in range(schema.n_vars) if j != t]))
        f.split([node], [var], [int(rng.integers(f.cards[var]))], [np.zeros(f.max_card)])
    return f


def brute_force(f, st, rows, grace, slot_n, slot_last):
    """Leaf counts, slot totals and statistics and due slots, row by row."""
    counts, tot, stats = f.counts.copy(), st.tot.copy(), st.stats.copy()
    ind = st.indicators(rows).astype(np.int64)
    leaves = kernels.route(rows, f.roots, f.links)
    n, due = slot_n.copy(), []
    for r in range(rows.shape[0]):
        for t in range(rows.shape[1]):
            leaf, y = leaves[r, t], rows[r, t]
            if y == kernels.MISSING:
                continue
            counts[leaf, y] += 1
            s = f.slot[leaf]
            if s >= 0:
                tot[s, y] += 1
                stats[s, y] += ind[r]
                n[s] += 1
                if n[s] - slot_last[s] == grace:
                    due.append(s)
    return counts, tot, stats, n, sorted(due)


@pytest.mark.parametrize(
    "cards,missing", [((2,) * 9, False), ((2, 3, 4, 2, 5, 3), False), ((2, 3, 4, 2, 5, 3), True)]
)
@pytest.mark.parametrize("route", ["numbered", "listed", "sparse", "rows"])
@pytest.mark.parametrize("n_rows", [1, 70, 333])
@pytest.mark.parametrize("sums", ["lanes", "bits"])
def test_segmented_count_equals_row_by_row(cards, missing, route, n_rows, sums):
    """Bit-sliced routing with the groups' rows ``numbered`` (trees of many active leaves),
    ``listed`` (few active leaves) or ``sparse`` (listed: active leaves with few rows by the
    leaves' counts); row routing. Groups summed by their lanes or counted from the bitmaps."""
    rng = np.random.default_rng(len(cards) + n_rows)
    rows = (rng.random((n_rows, len(cards))) * np.array(cards)).astype(np.uint8)
    if missing:
        rows[rng.random(rows.shape) < 0.1] = kernels.MISSING
    check_count(cards, missing, route, rows, sums, rng)


@pytest.mark.parametrize("route", ["numbered", "rows"])
def test_big_groups_flush_before_uint8_overflows(route):
    """Trees summed in row order (numbered, row routing; 9 trees: two full sweeps of four and
    one partial) with groups of more than 255 rows: 600 of the 700 rows are equal."""
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 2, (700, 9)).astype(np.uint8)
    rows[:600] = rows[0]
    check_count((2,) * 9, False, route, rows, "lanes", rng)


def check_count(cards, missing, route, rows, sums, rng):
    """:func:`leaf_counting.accumulate` on ``rows`` against :func:`brute_force`, on a random forest
    whose trees all take ``route``, the groups counted by ``sums``."""
    schema = Schema.from_cardinalities(list(cards)).with_missing(missing)
    f = random_forest(schema, rng, 150 if route == "numbered" else 40)
    leaves = f.leaves()
    st = LeafStats(f, capacity=leaves.size)
    share = {"numbered": 0.9, "sparse": 0.1}.get(route, 0.7)
    st.activate(leaves[rng.random(leaves.size) < share])
    f.counts[leaves] = 1
    st.stats[:] = rng.integers(0, 5, st.stats.shape)
    grace = 3
    st.n[:] = rng.integers(0, 3, st.n.shape)
    st.last_attempt[:] = 0
    expected = brute_force(f, st, rows, grace, st.n, st.last_attempt)

    n = f.n_nodes
    due = np.empty((1, st.slot_node.shape[0]), dtype=np.int64)
    count = leaf_counting.Count(
        rows,
        leaf_counting.value_bits(rows, f.max_card),
        leaf_counting.lanes(st.indicators(rows)),
        st.K,
        f.cards,
        np.arange(len(cards), dtype=np.int64),
        f.roots,
        f.links,
        f.tree[:n],
        f.depth[:n],
        f.slot,
        f.counts,
        True,
        st.tot,
        st.stats,
        st.n,
        st.last_attempt,
        grace,
        due,
        0 if sums == "lanes" else 2**40,
        leaf_counting.BY_ROWS if route == "rows" else leaf_counting.BY_BITS,
    )
    n_due = leaf_counting.accumulate(count)
    counts, tot, stats, slot_n, due_slots = expected
    np.testing.assert_array_equal(f.counts, counts)
    np.testing.assert_array_equal(st.tot, tot)
    np.testing.assert_array_equal(st.stats, stats)
    np.testing.assert_array_equal(st.n, slot_n)
    assert sorted(due[0, :n_due].tolist()) == due_slots


def test_lane_sums_flush_before_uint8_overflows():
    """600 identical rows at one leaf: more than a uint8 lane holds."""
    schema = Schema.binary(3)
    f = Forest(schema)
    st = LeafStats(f, capacity=3)
    st.activate(f.roots)
    st.add(np.ones((600, 3), dtype=np.uint8))
    assert (st.stats[:, 1] == 600).all() and (st.tot[:, 1] == 600).all()


@pytest.mark.parametrize(
    "cards,missing",
    [
        ((2,) * 70, False),
        ((2,) * 70, True),
        ((2, 3, 4, 2, 5, 3), False),
        ((2, 3, 4, 2, 5, 3), True),
    ],
)
@pytest.mark.parametrize("n_blocks", [1, 2])
@pytest.mark.parametrize("sums", ["rows", "bits", "either"])
@pytest.mark.parametrize("first", [0, 141])
def test_replay_equals_row_by_row(cards, missing, n_blocks, sums, first):
    """The buffered rows at just-split nodes, found from their value bitmaps, are counted at
    the children (summed by group from their packed indicator vectors, past the first word;
    or counted from the bitmaps; or either, by the cost model); bits past the buffered rows
    are ignored; in blocks of nodes; from a first row on (mid-word), or all."""
    from streammn.trees.hoeffding import _padded_buffer

    rng = np.random.default_rng(len(cards) + missing)
    schema = Schema.from_cardinalities(list(cards)).with_missing(missing)
    f = random_forest(schema, rng, 60)
    buf = _padded_buffer(400, len(cards))
    buf[:] = (rng.random((400, len(cards))) * np.array(cards)).astype(np.uint8)
    if missing:
        buf[rng.random(buf.shape) < 0.1] = kernels.MISSING
    bits = leaf_counting.value_bits(
        buf, f.max_card
    )  # the buffer holds 301 rows: bits past are stale
    rows = buf[:301]
    leaf_before = kernels.route(rows, f.roots, f.links)
    leaves = f.leaves()
    split = leaves[rng.random(leaves.size) < 0.3]
    for node in split:
        var = (f.tree[node] + 1) % len(cards)
        f.split([node], [var], [int(rng.integers(f.cards[var]))], [np.zeros(f.max_card)])
    st = LeafStats(f, capacity=f.leaves().size)
    new_leaves = f.leaves()
    st.activate(new_leaves[rng.random(new_leaves.size) < 0.8])
    st.stats[:] = rng.integers(0, 5, st.stats.shape)
    tot, stats, n = st.tot.copy(), st.stats.copy(), st.n.copy()
    ind = st.indicators(rows).astype(np.int64)
    leaf_after = kernels.route(rows, f.roots, f.links)
    for r in range(first, rows.shape[0]):
        for t in range(len(cards)):
            leaf, y = leaf_after[r, t], rows[r, t]
            s = f.slot[leaf]
            if leaf_before[r, t] in split and s >= 0 and y != kernels.MISSING:
                tot[s, y] += 1
                stats[s, y] += ind[r]
                n[s] += 1
    packed = np.zeros((rows.shape[0], replay.packed_words(st.K)), dtype=np.uint64)
    st.pack(buf, 0, rows.shape[0], packed)
    args = (
        packed,
        bits,
        rows.shape[0],
        st.offsets,
        np.sort(split).astype(np.int64),
        f.links,
        f.parent,
        f.tree,
        f.cards,
        f.slot,
        st.tot,
        st.stats,
        st.n,
    )
    row_cost = {"rows": 0, "bits": 2**40, "either": -1}[sums]
    if n_blocks == 1:
        replay.replay(replay.Replay(*args, row_cost, first), n_blocks)
    else:
        replay.replay_parallel(replay.Replay(*args, row_cost, first), n_blocks)
    np.testing.assert_array_equal(st.tot, tot)
    np.testing.assert_array_equal(st.stats, stats)
    np.testing.assert_array_equal(st.n, n)


@pytest.mark.parametrize("n_rows", [1, 63, 64, 130])
def test_value_bits_of_complete_rows_derive_value_zero(n_rows):
    """Rows without missing values: value 0's bitmaps made as the complement of the others'
    are those made by comparison, for binary and mixed cardinalities, with a last word of
    fewer than 64 rows (its bits past the rows stay clear); with a missing value, no bit."""
    rng = np.random.default_rng(n_rows)
    for cards in ((2,) * 7, (2, 3, 4, 2, 5)):
        rows = (rng.random((n_rows, len(cards))) * np.array(cards)).astype(np.uint8)
        bits = leaf_counting.value_bits(rows, max(cards), True)
        np.testing.assert_array_equal(bits, leaf_counting.value_bits(rows, max(cards)))
        for j, a in ((0, 0), (len(cards) - 1, 1)):
            set_rows = np.flatnonzero(np.unpackbits(bits[j, a].view(np.uint8), bitorder="little"))
            np.testing.assert_array_equal(set_rows, np.flatnonzero(rows[:, j] == a))
    rows[0, 0] = 255  # missing
    assert not (leaf_counting.value_bits(rows, max(cards))[0, :, 0] & np.uint64(1)).any()


@pytest.mark.parametrize("cards,missing", [((2,) * 130, True), ((2, 3, 4, 2, 5, 3) * 12, True)])
def test_packed_rows_are_the_indicator_vectors(cards, missing):
    """Rows packed as bits (binary: 64 bytes compared at a time, into a third word; else value
    by value) hold exactly their indicator vectors, missing values none, the rows not packed
    untouched; the bytes past a row (the next row's) add nothing."""
    from streammn.trees.hoeffding import _padded_buffer

    rng = np.random.default_rng(len(cards))
    schema = Schema.from_cardinalities(list(cards)).with_missing(missing)
    st = LeafStats(Forest(schema), capacity=1)
    buf = _padded_buffer(50, len(cards))
    buf[:] = (rng.random(buf.shape) * np.array(cards)).astype(np.uint8)
    buf[rng.random(buf.shape) < 0.1] = kernels.MISSING
    packed = np.full((50, replay.packed_words(st.K)), 7, dtype=np.uint64)
    st.pack(buf, 10, 39, packed)
    as_bits = np.unpackbits(packed.view(np.uint8), axis=1, bitorder="little")[:, : st.K]
    np.testing.assert_array_equal(as_bits[10:49], st.indicators(buf[10:49]))
    assert (packed[:10] == 7).all() and (packed[49:] == 7).all()


@pytest.mark.parametrize("cards,missing", [((2,) * 70, False), ((2, 3, 4, 2, 5, 3), True)])
@pytest.mark.parametrize("first", [0, 141])
def test_roots_counted_from_bitmaps_equal_the_gram_count(cards, missing, first):
    """The roots' statistics from the buffer's value bitmaps (popcounts; from a first row on,
    mid-word; stale bits past the buffered rows ignored) equal the Gram-matrix count of the
    same rows, missing values and all."""
    rng = np.random.default_rng(len(cards))
    schema = Schema.from_cardinalities(list(cards)).with_missing(missing)
    buf = (rng.random((400, len(cards))) * np.array(cards)).astype(np.uint8)
    if missing:
        buf[rng.random(buf.shape) < 0.1] = kernels.MISSING
    bits = leaf_counting.value_bits(
        buf, max(cards)
    )  # the buffer holds 301 rows: bits past are stale
    trees = np.arange(1, len(cards), 2)
    by_bits, by_gram = (LeafStats(Forest(schema), capacity=len(cards)) for _ in range(2))
    for st in (by_bits, by_gram):
        st.activate(st.forest.roots[trees])
    by_bits.count_roots(bits, 301, trees, first=first)
    by_gram.add_at_roots(buf[first:301], trees)
    np.testing.assert_array_equal(by_bits.tot, by_gram.tot)
    np.testing.assert_array_equal(by_bits.stats, by_gram.stats)


def test_replay_sums_flush_before_uint8_overflows():
    """600 identical buffered rows reach a just-split root: more than a byte lane holds."""
    schema = Schema.binary(3)
    f = Forest(schema)
    f.split(f.roots[:1], [1], [1], [np.zeros(2)])
    st = LeafStats(f, capacity=3)
    st.activate(f.leaves())
    from streammn.trees.hoeffding import _padded_buffer

    rows = _padded_buffer(600, 3)
    rows[:] = 1
    packed = np.zeros((600, 1), dtype=np.uint64)
    st.pack(rows, 0, 600, packed)
    args = (
        packed,
        leaf_counting.value_bits(rows, 2),
        600,
        st.offsets,
        f.roots[:1].astype(np.int64),
        f.links,
        f.parent,
        f.tree,
        f.cards,
        f.slot,
        st.tot,
        st.stats,
        st.n,
    )
    replay.replay(replay.Replay(*args, 0), 1)  # every row summed
    s = f.slot[f.links[f.roots[0], 2]]
    assert (st.stats[s, 1] == 600).all() and st.tot[s, 1] == 600


def test_copy_bits_moves_bit_ranges_between_bitmaps():
    """Bit ranges at any offsets and lengths (within a word, across words, whole words) land
    where they should and leave the other bits alone."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        src = rng.integers(0, 2**63, (3, 2, 5), dtype=np.uint64) * np.uint64(2) + rng.integers(
            0, 2, (3, 2, 5), dtype=np.uint64
        )
        dst = rng.integers(0, 2**63, (3, 2, 7), dtype=np.uint64)
        count = int(rng.integers(0, 5 * 64 + 1))
        src_at = int(rng.integers(0, 5 * 64 - count + 1))
        dst_at = int(rng.integers(0, 7 * 64 - count + 1))

        def as_bits(a):
            return np.unpackbits(a.view(np.uint8), axis=-1, bitorder="little")

        expected = as_bits(dst.copy())
        expected[..., dst_at : dst_at + count] = as_bits(src)[..., src_at : src_at + count]
        leaf_counting.copy_bits(dst, dst_at, src, src_at, count)
        np.testing.assert_array_equal(as_bits(dst), expected)


@pytest.mark.parametrize("cards,prior", [((2,) * 6, 1.0), ((2, 3, 4, 2, 5, 3), 2.5)])
def test_scoring_log_tables_leave_every_gain_unchanged(cards, prior):
    """Split scoring with the logarithms of counts looked up (tables of any size, counts past
    the table computed), and by the binary path when every variable is binary, gives bit for
    bit the gains and choices computed without tables by the general path."""
    rng = np.random.default_rng(11)
    schema = Schema.from_cardinalities(list(cards))
    f = random_forest(schema, rng, 12)
    f.prior = prior
    st = LeafStats(f, capacity=f.leaves().size)
    st.activate(f.leaves())
    st.add((rng.random((3000, len(cards))) * np.array(cards)).astype(np.uint8))
    slots = np.flatnonzero(st.slot_node >= 0).astype(np.int64)
    values = np.unique(f.cards)
    log_row = np.zeros(f.max_card + 1, dtype=np.int64)
    log_row[values] = np.arange(1, values.size + 1)
    binary_paths = (False, True) if max(cards) == 2 else (False,)
    # a min_count near the rows on a side leaves out candidates (and some slots entirely)
    side = np.minimum(st.stats.sum(axis=1), st.tot.sum(axis=1)[:, None] - st.stats.sum(axis=1))
    for min_count in (1, int(np.median(side))):
        args = (
            slots,
            st.slot_target,
            st.tot,
            st.stats,
            f.cards,
            st.offsets,
            min_count,
            f.prior,
            True,
        )
        computed = kernels.score_slots(*args, kernels.log_tables(f.prior, values, 0), log_row)
        assert np.isfinite(computed[2]).sum() > 5
        for size in (1, 64, 1 << 15):
            for binary in binary_paths:  # every variable binary: the binary path too
                looked_up = kernels.score_slots(
                    *args, kernels.log_tables(f.prior, values, size), log_row, binary
                )
                for a, b in zip(computed, looked_up):
                    np.testing.assert_array_equal(a, b)
        for a, b in zip(computed, st.score(slots, min_count)):
            np.testing.assert_array_equal(a, b)
