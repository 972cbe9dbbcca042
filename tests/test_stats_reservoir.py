"""RowReservoir: algorithm R semantics, uniformity (chi-square over seeds), merge, resume."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.stats import chisquare

from streammn import Schema
from streammn.stats import RowReservoir, StatsFormatError, StatsMergeError

# rows carry their own index (one variable of cardinality 255) so a sample names its rows
INDEX_SCHEMA = Schema.from_cardinalities([255])
P_MIN = 1e-3


def index_rows(start, stop):
    return np.arange(start, stop, dtype=np.uint8).reshape(-1, 1)


def feed(reservoir, start, stop, batch_size):
    for b in range(start, stop, batch_size):
        reservoir.update(index_rows(b, min(b + batch_size, stop)))
    return reservoir


def sequential_algorithm_r(rows_batches, capacity, seed):
    """Reference: algorithm R one row at a time, fed the same uniform draws as the store.

    The store draws ``j`` for all post-fill rows of a batch with one ``integers`` call; the
    reference makes the same call per batch and then applies the draws row by row.
    """
    rng = np.random.default_rng(seed)
    sample, seen = [], 0
    for rows in rows_batches:
        fill = min(max(capacity - seen, 0), len(rows))
        sample.extend(rows[:fill].tolist())
        if fill < len(rows):
            t = np.arange(seen + fill, seen + len(rows))
            draws = rng.integers(0, t + 1)
            for row, j in zip(rows[fill:].tolist(), draws.tolist()):
                if j < capacity:
                    sample[j] = row
        seen += len(rows)
    return np.array(sample, dtype=np.uint8).reshape(-1, rows_batches[0].shape[1])


def test_fill_phase_keeps_everything_in_order():
    r = RowReservoir(INDEX_SCHEMA, capacity=10, seed=0)
    feed(r, 0, 7, 3)
    assert r.n_seen == 7 and r.size == 7
    assert r.rows[:, 0].tolist() == list(range(7))
    with pytest.raises(ValueError):
        r.rows[0, 0] = 3  # read-only view


@pytest.mark.parametrize("batch_size", [1, 5, 64, 400])
def test_vectorised_equals_sequential_algorithm_r(batch_size):
    schema = Schema.from_cardinalities([5, 3])
    rng = np.random.default_rng(7)
    rows = rng.integers(0, [5, 3], size=(400, 2)).astype(np.uint8)
    batches = [rows[b : b + batch_size] for b in range(0, 400, batch_size)]
    r = RowReservoir(schema, capacity=8, seed=11)
    for batch in batches:
        r.update(batch)
    np.testing.assert_array_equal(r.rows, sequential_algorithm_r(batches, 8, 11))


@pytest.mark.parametrize("n_rows,capacity,batch_size", [(40, 6, 7), (40, 6, 40), (25, 24, 3)])
def test_inclusion_is_uniform_over_seeds(n_rows, capacity, batch_size):
    n_seeds = 1500
    hits = np.zeros(n_rows, dtype=np.int64)
    for seed in range(n_seeds):
        r = feed(RowReservoir(INDEX_SCHEMA, capacity=capacity, seed=seed), 0, n_rows, batch_size)
        sample = r.rows[:, 0]
        assert len(np.unique(sample)) == capacity
        hits[sample] += 1
    assert chisquare(hits).pvalue > P_MIN


def test_every_subset_equally_likely():
    """Stronger than inclusion: all C(6, 3) samples of 6 rows are equally frequent."""
    subsets = {s: k for k, s in enumerate(itertools.combinations(range(6), 3))}
    freq = np.zeros(len(subsets), dtype=np.int64)
    for seed in range(3000):
        r = feed(RowReservoir(INDEX_SCHEMA, capacity=3, seed=seed), 0, 6, 4)
        freq[subsets[tuple(sorted(r.rows[:, 0].tolist()))]] += 1
    assert chisquare(freq).pvalue > P_MIN


@pytest.mark.parametrize("n_a,n_b,capacity", [(30, 10, 8), (5, 30, 8), (3, 4, 8), (8, 8, 8)])
def test_merge_gives_uniform_sample_of_union(n_a, n_b, capacity):
    n = n_a + n_b
    hits = np.zeros(n, dtype=np.int64)
    for seed in range(1500):
        a = feed(RowReservoir(INDEX_SCHEMA, capacity=capacity, seed=seed), 0, n_a, 6)
        b = feed(RowReservoir(INDEX_SCHEMA, capacity=capacity, seed=10**6 + seed), n_a, n, 6)
        a.merge(b)
        assert a.n_seen == n and a.size == min(capacity, n)
        sample = a.rows[:, 0]
        assert len(np.unique(sample)) == a.size
        hits[sample] += 1
    if n <= capacity:
        assert (hits == 1500).all()
    else:
        assert chisquare(hits).pvalue > P_MIN


def test_merge_then_continue_stays_uniform():
    hits = np.zeros(60, dtype=np.int64)
    for seed in range(1500):
        a = feed(RowReservoir(INDEX_SCHEMA, capacity=5, seed=seed), 0, 20, 7)
        b = feed(RowReservoir(INDEX_SCHEMA, capacity=5, seed=seed + 5000), 20, 30, 7)
        feed(a.merge(b), 30, 60, 7)
        hits[a.rows[:, 0]] += 1
    assert chisquare(hits).pvalue > P_MIN


def test_merge_rejects_other_capacity_or_schema():
    a = RowReservoir(INDEX_SCHEMA, capacity=5, seed=0)
    with pytest.raises(StatsMergeError, match="capacity"):
        a.merge(RowReservoir(INDEX_SCHEMA, capacity=6, seed=0))
    with pytest.raises(StatsMergeError, match="schema"):
        a.merge(RowReservoir(Schema.binary(1), capacity=5, seed=0))


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 20),
    st.integers(0, 120),
    st.integers(0, 120),
    st.integers(1, 50),
    st.integers(0, 2**32 - 1),
)
def test_restore_and_continue_equals_never_stopping(capacity, n_first, n_second, batch, seed):
    schema = Schema.from_cardinalities([3, 2, 4])
    rows = np.random.default_rng(seed).integers(0, [3, 2, 4], size=(n_first + n_second, 3))
    rows = rows.astype(np.uint8)
    straight = RowReservoir(schema, capacity=capacity, seed=seed)
    stopped = RowReservoir(schema, capacity=capacity, seed=seed)
    for b in range(0, n_first, batch):
        chunk = rows[b : min(b + batch, n_first)]
        straight.update(chunk)
        stopped.update(chunk)
    data = stopped.to_bytes()
    resumed = RowReservoir.from_bytes(data)
    assert resumed.to_bytes() == data
    assert resumed.n_seen == n_first and resumed.seed == seed
    for b in range(n_first, n_first + n_second, batch):
        chunk = rows[b : min(b + batch, n_first + n_second)]
        straight.update(chunk)
        resumed.update(chunk)
    np.testing.assert_array_equal(resumed.rows, straight.rows)
    assert resumed.n_seen == straight.n_seen
    # the generators are in the same state too
    assert resumed._rng.integers(2**62) == straight._rng.integers(2**62)


def test_restore_with_other_bit_generator():
    gen = np.random.Generator(np.random.MT19937(3))
    r = feed(RowReservoir(INDEX_SCHEMA, capacity=4, seed=gen), 0, 30, 8)
    back = RowReservoir.from_bytes(r.to_bytes())
    feed(r, 30, 60, 8)
    feed(back, 30, 60, 8)
    np.testing.assert_array_equal(back.rows, r.rows)


def test_missing_values_round_trip_in_missing_mode():
    rows = np.array([[0, 255, 1], [1, 1, 0], [255, 0, 255]], dtype=np.uint8)
    r = RowReservoir(Schema.binary(3).with_missing(), capacity=2, seed=0).update(rows)
    back = RowReservoir.from_bytes(r.to_bytes())
    np.testing.assert_array_equal(back.rows, r.rows)
    assert back.n_seen == 3 and (back.rows == 255).any()
    complete = RowReservoir(Schema.binary(3), capacity=2, seed=0).update(rows[1:2])
    complete._sample[0, 1] = 255  # written past validation: no state without missing mode
    with pytest.raises(StatsFormatError, match="out of range"):
        RowReservoir.from_bytes(complete.to_bytes())


def test_corrupt_bytes_raise():
    data = feed(RowReservoir(INDEX_SCHEMA, capacity=4, seed=1), 0, 30, 8).to_bytes()
    for bad in (data[:-3], data[:20], data + b"x", b"SMNSTATS" + b"\x00" * 40):
        with pytest.raises(StatsFormatError):
            RowReservoir.from_bytes(bad)
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10
    with pytest.raises(StatsFormatError):
        RowReservoir.from_bytes(bytes(flipped))


def test_capacity_must_be_positive():
    with pytest.raises(ValueError):
        RowReservoir(INDEX_SCHEMA, capacity=0)
    assert "capacity=3" in repr(RowReservoir(INDEX_SCHEMA, capacity=3, seed=1))


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 30),
    st.integers(0, 250),
    st.integers(1, 60),
    st.integers(1, 60),
    st.integers(0, 2**32 - 1),
)
def test_sample_does_not_depend_on_batch_boundaries(capacity, n_rows, batch_a, batch_b, seed):
    """One uniform draw per post-fill row, in row order: batching changes nothing, so a stream
    resumed with another batch size still gives the sample of an uninterrupted run."""
    a = feed(RowReservoir(INDEX_SCHEMA, capacity=capacity, seed=seed), 0, n_rows, batch_a)
    b = feed(RowReservoir(INDEX_SCHEMA, capacity=capacity, seed=seed), 0, n_rows, batch_b)
    np.testing.assert_array_equal(a.rows, b.rows)
