"""OnDemandPairCounts: tables vs direct counting, reservoir provenance, merge, bytes."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from streammn.connectors import ArraySource
from streammn import Schema, SchemaError
from streammn.stats import (
    OnDemandPairCounts,
    RowReservoir,
    StatsFormatError,
    StatsMergeError,
    from_bytes,
)

CARDS = [2, 3, 2, 5, 4, 2, 7]


def random_rows(seed, cards, n_rows):
    rng = np.random.default_rng(seed)
    cols = [rng.choice(c, size=n_rows, p=rng.dirichlet(np.ones(c))) for c in cards]
    return np.ascontiguousarray(np.stack(cols, axis=1).astype(np.uint8)).reshape(n_rows, len(cards))


def brute_table(rows, i, j, cards=CARDS):
    out = np.zeros((cards[i], cards[j]), dtype=np.int64)
    np.add.at(out, (rows[:, i], rows[:, j]), 1)
    return out


def all_pairs(n):
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def test_pairs_requested_first_are_exact():
    schema = Schema.from_cardinalities(CARDS)
    rows = random_rows(0, CARDS, 3000)
    store = OnDemandPairCounts(schema, reservoir_capacity=50, seed=0)
    wanted = [(0, 3), (6, 1), (2, 4), (5, 6)]
    store.request(wanted)
    for batch in ArraySource(rows, schema, batch_size=512):
        store.update(batch)
    for i, j in wanted:
        t = store.table(i, j)
        assert (t.i, t.j) == (i, j)
        np.testing.assert_array_equal(t.counts, brute_table(rows, i, j))
        assert t.exact and t.n_rows == 3000 and t.from_reservoir == 0 and t.n_missing == 0
    for i, c in enumerate(CARDS):
        np.testing.assert_array_equal(
            store.marginals.counts(i), np.bincount(rows[:, i], minlength=c)
        )
    assert store.n_pairs_counted == 4
    assert store.fraction_counted == pytest.approx(4 / 21)
    assert store.is_tracked(3, 0) and not store.is_tracked(0, 1)


def test_late_request_uses_reservoir_then_counts_exactly():
    schema = Schema.from_cardinalities(CARDS)
    rows = random_rows(1, CARDS, 2000)
    store = OnDemandPairCounts(schema, reservoir_capacity=100, seed=3)
    store.update(rows[:700])
    sample = np.array(store.reservoir.rows)
    t = store.table(4, 1)
    np.testing.assert_array_equal(t.counts, brute_table(sample, 4, 1))
    assert (t.n_rows, t.from_reservoir, t.n_missing, t.exact) == (100, 100, 600, False)
    store.update(rows[700:1500])
    store.update(rows[1500:])
    t = store.table(1, 4)
    expected = brute_table(sample, 1, 4) + brute_table(rows[700:], 1, 4)
    np.testing.assert_array_equal(t.counts, expected)
    assert (t.n_rows, t.from_reservoir, t.n_missing) == (1400, 100, 600)
    assert t.counts.sum() == t.n_rows
    assert t.probabilities(smoothing=1.0).sum() == pytest.approx(1.0)


def test_late_request_is_exact_while_reservoir_holds_everything():
    schema = Schema.from_cardinalities(CARDS)
    rows = random_rows(2, CARDS, 900)
    store = OnDemandPairCounts(schema, reservoir_capacity=500, seed=1)
    store.update(rows[:400])
    early = store.table(0, 6)
    assert early.exact and early.from_reservoir == 400
    store.update(rows[400:])
    t = store.table(0, 6)
    np.testing.assert_array_equal(t.counts, brute_table(rows, 0, 6))
    assert t.exact and t.n_rows == 900 and t.from_reservoir == 400


def test_bad_requests_and_rows():
    schema = Schema.from_cardinalities([2, 3])
    store = OnDemandPairCounts(schema, reservoir_capacity=5, seed=0)
    with pytest.raises(ValueError, match="not a pair"):
        store.table(1, 1)
    with pytest.raises(IndexError):
        store.table(0, 2)
    with pytest.raises(SchemaError):
        store.update(np.array([[2, 0]], dtype=np.uint8))
    assert store.n_rows == 0 and store.n_pairs_counted == 0


# hypothesis -------------------------------------------------------------------------------
@st.composite
def cases(draw):
    cards = draw(st.lists(st.integers(2, 5), min_size=2, max_size=6))
    n_rows = draw(st.integers(0, 80))
    split = draw(st.integers(0, n_rows))
    seed = draw(st.integers(0, 2**32 - 1))
    pairs = all_pairs(len(cards))
    chosen = draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=len(pairs), unique=True))
    capacity = draw(st.integers(1, 30))
    schema = Schema.from_cardinalities(cards)
    return schema, random_rows(seed, cards, n_rows), split, chosen, capacity


@settings(max_examples=50, deadline=None)
@given(cases())
def test_merge_of_halves_equals_whole_for_pairs_requested_first(case):
    schema, rows, split, pairs, capacity = case
    whole = OnDemandPairCounts(schema, capacity, seed=0)
    whole.request(pairs)
    whole.update(rows)
    a = OnDemandPairCounts(schema, capacity, seed=1)
    b = OnDemandPairCounts(schema, capacity, seed=2)
    a.request(pairs)
    b.request(pairs[::-1])  # other order: merge matches pairs, not positions
    a.update(rows[:split]).merge(b.update(rows[split:]))
    assert a.n_rows == whole.n_rows == rows.shape[0]
    np.testing.assert_array_equal(a.marginals.flat, whole.marginals.flat)
    assert a.reservoir.n_seen == rows.shape[0] and a.reservoir.size == min(capacity, len(rows))
    for p in pairs:
        ta, tw = a.table(*p), whole.table(*p)
        np.testing.assert_array_equal(ta.counts, tw.counts)
        assert ta.exact and ta.n_rows == tw.n_rows == rows.shape[0]


@settings(max_examples=50, deadline=None)
@given(cases())
def test_merge_pairs_tracked_on_one_side_use_the_other_reservoir(case):
    schema, rows, split, pairs, capacity = case
    only_a, only_b = pairs[::2], pairs[1::2]
    a = OnDemandPairCounts(schema, capacity, seed=5)
    b = OnDemandPairCounts(schema, capacity, seed=6)
    a.request(only_a)
    b.request(only_b)
    a.update(rows[:split])
    b.update(rows[split:])
    sample_a, sample_b = np.array(a.reservoir.rows), np.array(b.reservoir.rows)
    a.merge(b)
    for p, sample, exact_rows in [(q, sample_b, rows[:split]) for q in only_a] + [
        (q, sample_a, rows[split:]) for q in only_b
    ]:
        i, j = p
        cards = schema.cardinalities
        expected = brute_table(exact_rows, i, j, cards) + brute_table(sample, i, j, cards)
        t = a.table(i, j)
        np.testing.assert_array_equal(t.counts, expected)
        assert t.n_rows == len(exact_rows) + len(sample) and t.from_reservoir == len(sample)
        other_side = len(rows) - len(exact_rows)
        assert t.n_missing == other_side - len(sample)
        assert t.exact == (other_side <= capacity)


@settings(max_examples=50, deadline=None)
@given(cases())
def test_bytes_round_trip_lossless(case):
    schema, rows, split, pairs, capacity = case
    store = OnDemandPairCounts(schema, capacity, seed=9)
    store.request(pairs[:1])
    store.update(rows[:split])
    store.request(pairs)
    data = store.to_bytes()
    back = OnDemandPairCounts.from_bytes(data)
    assert type(from_bytes(data)) is OnDemandPairCounts
    assert back.to_bytes() == data
    # continuing after the round trip is identical, reservoir included
    store.update(rows[split:])
    back.update(rows[split:])
    for p in pairs:
        t, u = store.table(*p), back.table(*p)
        np.testing.assert_array_equal(t.counts, u.counts)
        assert (t.n_rows, t.from_reservoir, t.n_missing) == (
            u.n_rows,
            u.from_reservoir,
            u.n_missing,
        )
    np.testing.assert_array_equal(back.reservoir.rows, store.reservoir.rows)
    np.testing.assert_array_equal(back.marginals.flat, store.marginals.flat)
    assert back.n_pairs_counted == store.n_pairs_counted
    np.testing.assert_array_equal(back.pairs, store.pairs)


def test_merge_rejects_mismatch_and_corrupt_bytes_raise():
    schema = Schema.from_cardinalities([2, 3, 4])
    a = OnDemandPairCounts(schema, 10, seed=0)
    with pytest.raises(StatsMergeError, match="schemas"):
        a.merge(OnDemandPairCounts(Schema.from_cardinalities([2, 3, 5]), 10, seed=0))
    with pytest.raises(StatsMergeError, match="reservoir_capacity"):
        a.merge(OnDemandPairCounts(schema, 11, seed=0))
    with pytest.raises(StatsMergeError):
        a.merge(RowReservoir(schema, 10, seed=0))
    a.request([(0, 2)])
    a.update(random_rows(3, [2, 3, 4], 50))
    data = a.to_bytes()
    for bad in (data[:-1], data[:100], data + b"\x00"):
        with pytest.raises(StatsFormatError):
            OnDemandPairCounts.from_bytes(bad)
    flipped = bytearray(data)
    flipped[-40] ^= 0x04
    with pytest.raises(StatsFormatError):
        OnDemandPairCounts.from_bytes(bytes(flipped))
    with pytest.raises(StatsFormatError, match="not a"):
        RowReservoir.from_bytes(data)
