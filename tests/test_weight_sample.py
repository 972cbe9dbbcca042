"""The weight sample (streammn.network.weight_sample): algorithm L gives a uniform sample of the
rows offered, whatever the batches; the held-out split depends on the row index only; the sample
stays within its budget and round-trips exactly."""

import numpy as np
import pytest

from streammn.errors import WeightStateError
from streammn.packed_state import pack_state, unpack_state
from streammn.schema import Schema
from streammn.network.weight_sample import (
    HELD_OUT_EVERY,
    WeightSample,
    held_out_index,
    held_out_mask,
    list_bytes,
    sample_rows,
)


def numbered_rows(n, n_vars=3):
    """Row ``t`` spells ``t`` in base 200 over its columns, so a row names its own index."""
    t = np.arange(n)
    return np.stack([t // 200**c % 200 for c in range(n_vars)], axis=1).astype(np.uint8)


def index_of(rows):
    return sum(rows[:, c].astype(np.int64) * 200**c for c in range(rows.shape[1]))


def small_sample(capacity_rows, seed=0, n_vars=3):
    """A sample whose capacity is ``capacity_rows`` (training rows plus a quarter held out)."""
    schema = Schema.from_cardinalities([200] * n_vars)
    train = capacity_rows * (HELD_OUT_EVERY - 1) // HELD_OUT_EVERY
    mb = train * (n_vars + 8) * 8 * HELD_OUT_EVERY / (HELD_OUT_EVERY - 1) / 2**20
    sample = WeightSample(schema, memory_mb=mb * 1.0001, seed=seed)
    assert sample.capacity == capacity_rows
    return sample


def test_every_row_is_equally_likely_to_be_kept():
    n, k, trials = 400, 20, 4000
    kept = np.zeros(n)
    rows = numbered_rows(n)
    for seed in range(trials):
        sample = small_sample(k, seed=seed)
        sample.update(rows, 0)
        index = index_of(sample.rows)
        assert np.array_equal(index, sample._index[: sample.size])
        assert len(set(index.tolist())) == k  # no row twice
        kept[index] += 1
    share = kept / trials
    se = np.sqrt(k / n * (1 - k / n) / trials)
    assert abs(share.mean() - k / n) < 1e-12  # k rows kept in every trial
    assert np.abs(share - k / n).max() < 5 * se  # no index favoured (4.4 sd ~ 1 in 400 draws)
    # early and late rows alike (the jumps are exact, not an approximation that drifts)
    assert abs(share[: n // 4].mean() - share[-n // 4 :].mean()) < 4 * se / np.sqrt(n / 4)


def test_the_sample_does_not_depend_on_the_batches():
    rows = numbered_rows(60_000)
    whole = small_sample(1000, seed=7)
    whole.update(rows, 0)
    cut = small_sample(1000, seed=7)
    for start, stop in [(0, 1), (1, 999), (999, 1001), (1001, 20_000), (20_000, 60_000)]:
        cut.update(rows[start:stop], start)
    assert whole.to_bytes() == cut.to_bytes()
    assert whole.n_seen == 60_000


def test_held_out_rows_depend_on_the_stream_index_only():
    rows = numbered_rows(50_000)
    sample = small_sample(2000, seed=3)
    sample.update(rows, 0)
    held = index_of(sample.held_out)
    train = index_of(sample.train)
    assert held_out_index(held).all() and not held_out_index(train).any()
    assert held.size + train.size == 2000
    assert abs(held.size / 2000 - 1 / HELD_OUT_EVERY) < 0.05
    mask = held_out_mask(0, 100_000)
    assert abs(mask.mean() - 1 / HELD_OUT_EVERY) < 0.01
    assert np.array_equal(held_out_mask(500, 1000), mask[500:1500])


def test_rows_are_offered_under_their_stream_index():
    rows = numbered_rows(3000)
    sample = small_sample(100)
    sample.update(rows[:1000], 5000)  # rows 5000 .. 5999 of a stream
    assert (sample._index[: sample.size] >= 5000).all()
    assert np.array_equal(sample._index[: sample.size], index_of(sample.rows) + 5000)


def test_missing_mode_keeps_complete_rows_only():
    schema = Schema.binary(3).with_missing()
    rows = np.array([[0, 1, 0], [255, 1, 0], [1, 1, 1]] * 10, dtype=np.uint8)
    sample = WeightSample(schema)
    sample.update(rows, 0)
    assert sample.n_seen == 20 and sample.rows.shape[0] == 20 and (sample.rows != 255).all()
    held = sample._index[: sample.size]
    assert (held % 3 != 1).all()  # the stream index of each kept row is its own


def test_the_sample_and_the_reach_lists_stay_within_the_budget():
    for n_vars, mb in [(100, 64.0), (2000, 4.0), (16, 0.5)]:
        sample = WeightSample(Schema.binary(n_vars), memory_mb=mb)
        assert sample.nbytes + list_bytes(sample) <= mb * 2**20
        assert sample.nbytes <= mb * 2**20 / 8
    assert sample_rows(100, 64.0) == 20_000
    assert sample_rows(2000, 4.0) < 20_000


def test_the_sample_round_trips_and_continues_exactly():
    rows = numbered_rows(30_000)
    sample = small_sample(500, seed=1)
    sample.update(rows[:10_000], 0)
    again = WeightSample.from_bytes(sample.to_bytes())
    assert np.array_equal(again.train, sample.train)
    assert np.array_equal(again.held_out, sample.held_out)
    again.update(rows[10_000:], 10_000)
    sample.update(rows[10_000:], 10_000)
    assert again.to_bytes() == sample.to_bytes()
    young = small_sample(500)
    young.update(rows[:10], 0)  # not yet full
    assert WeightSample.from_bytes(young.to_bytes()).to_bytes() == young.to_bytes()


@pytest.mark.parametrize(
    "data", [b"not a sample", b"", b"PK\x03\x04 truncated"], ids=["garbage", "empty", "truncated"]
)
def test_bytes_that_are_no_sample_are_refused(data):
    with pytest.raises(WeightStateError, match="not a weight sample"):
        WeightSample.from_bytes(data)


def test_a_sample_with_values_out_of_range_is_refused():
    sample = WeightSample(Schema.from_cardinalities([3, 3, 3]))
    sample.update(np.full((10, 3), 2, dtype=np.uint8), 0)
    meta, arrays = unpack_state(sample.to_bytes())
    meta["schema"] = Schema.binary(3).to_dict()
    with pytest.raises(WeightStateError, match="out of range"):
        WeightSample.from_bytes(pack_state(meta, arrays))
