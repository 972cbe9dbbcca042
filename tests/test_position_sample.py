"""The mergeable sample of exact DTSL's logistic conditionals (streammn.logistic.sample) and the
exact mode's batch fit on it."""

from pathlib import Path

import numpy as np
import pytest

from streammn.connectors.array import ArraySource
from streammn.dtsl import DTSL, DTSLError
from streammn.errors import SettingsError, StatsMergeError, WeightStateError
from streammn.logistic.conditionals import SAMPLE_SEED, LogisticConditionals
from streammn.logistic.sample import PositionSample
from streammn.packed_state import unpack_state
from streammn.schema import Schema
from streammn.trees.exact import SourcePasses

OLD_STATES = Path(__file__).parent / "data" / "exact_logistic_state_3.npz"
OLD_STREAM_STATES = Path(__file__).parent / "data" / "stream_logistic_state_3.npz"


def splitmix_priority(index: np.ndarray, seed: int) -> np.ndarray:
    """The priorities as the module docstring defines them, written again in numpy."""

    def mix(x):
        with np.errstate(over="ignore"):
            x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))

    key = mix(np.uint64(seed) ^ np.uint64(0x9E3779B97F4A7C15))
    return mix(index.astype(np.uint64) ^ key)


def rows_of(n, n_vars=4, seed=0):
    return np.random.default_rng(seed).integers(0, 2, (n, n_vars)).astype(np.uint8)


def test_the_sample_is_the_rows_of_smallest_priority_in_position_order():
    x = rows_of(5000)
    sample = PositionSample(Schema.binary(4), 300, seed=7)
    sample.update(x, 0)
    expected = np.sort(np.argsort(splitmix_priority(np.arange(5000), 7))[:300])
    np.testing.assert_array_equal(sample.index, expected)
    np.testing.assert_array_equal(sample.rows, x[expected])
    assert sample.n_seen == 5000 and sample.size == 300
    # uniform: the kept positions spread over the stream, a fifth of them held out
    assert abs(sample.index.mean() / 5000 - 0.5) < 0.05
    assert 0.12 < sample.held_out_slots.mean() < 0.28
    other = PositionSample(Schema.binary(4), 300, seed=8)
    other.update(x, 0)
    assert np.intersect1d(other.index, sample.index).size < 60  # another seed, another sample


@pytest.mark.parametrize("half_life", [None, 700.0], ids=["uniform", "forgetting"])
@pytest.mark.parametrize("cuts", [[0, 1, 2, 999, 1000, 4096, 5000], [0, 2500, 5000]])
def test_cuts_merges_and_resume_leave_the_sample_one_process_keeps(cuts, half_life):
    x, schema = rows_of(5000), Schema.binary(4)
    whole = PositionSample(schema, 300, half_life=half_life)
    whole.update(x, 0)
    cut = PositionSample(schema, 300, half_life=half_life)
    parts = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        cut.update(x[a:b], a)
        part = PositionSample(schema, 300, half_life=half_life)
        part.update(x[a:b], a)
        parts.append(part)
    assert cut.to_bytes() == whole.to_bytes()
    merged = PositionSample(schema, 300, half_life=half_life)
    for part in parts[::-1]:  # any order
        merged.merge(part)
    assert merged.to_bytes() == whole.to_bytes()
    resumed = PositionSample(schema, 300, half_life=half_life)
    resumed.update(x[:1234], 0)
    resumed = PositionSample.from_bytes(resumed.to_bytes())
    resumed.update(x[1234:], 1234)
    assert resumed.to_bytes() == whole.to_bytes()


def test_a_forgetting_sample_leans_toward_recent_rows_at_its_half_life():
    """Efraimidis-Spirakis keys with weights doubling every half-life: the kept rows' ages
    fall off as the weights do (each half-life older, about half as many)."""
    x, schema = rows_of(200_000, n_vars=2), Schema.binary(2)
    sample = PositionSample(schema, 1000, seed=1, half_life=1000.0)
    sample.update(x, 0)
    age = 200_000 - 1 - sample.index
    counts = np.bincount(age // 1000, minlength=8)[:8].astype(float)
    assert age.max() < 20_000  # nothing from the far past
    ratios = counts[1:5] / counts[0:4]  # each half-life older, about half as many
    assert np.all((ratios > 0.3) & (ratios < 0.75)), counts
    # the keys as the module docstring writes them: the 1,000 smallest are the ones kept
    t = np.arange(200_000)
    u = ((splitmix_priority(t, 1) >> np.uint64(11)).astype(float) + 0.5) / 2.0**53
    keys = np.log(-np.log(u)) - t * np.log(2.0) / 1000.0
    np.testing.assert_array_equal(sample.index, np.sort(np.argsort(keys)[:1000]))


def test_a_source_within_the_capacity_is_held_whole_in_order():
    x, schema = rows_of(200), Schema.binary(4)
    sample = PositionSample(schema, 300)
    sample.update(x[:50], 0)
    sample.update(x[50:], 50)
    np.testing.assert_array_equal(sample.rows, x)
    np.testing.assert_array_equal(sample.index, np.arange(200))


def test_samples_of_other_settings_or_the_same_rows_do_not_merge():
    x, schema = rows_of(100), Schema.binary(4)
    a, b = PositionSample(schema, 50), PositionSample(schema, 50)
    a.update(x, 0)
    b.update(x, 0)
    with pytest.raises(StatsMergeError, match="overlapping"):
        a.merge(b)
    with pytest.raises(StatsMergeError, match="other settings"):
        a.merge(PositionSample(schema, 50, seed=1))
    with pytest.raises(SettingsError, match="capacity"):
        PositionSample(schema, 0)
    with pytest.raises(StatsMergeError, match="other settings"):
        a.merge(PositionSample(schema, 50, half_life=100.0))
    with pytest.raises(SettingsError, match="half_life"):
        PositionSample(schema, 50, half_life=0.0)


def test_a_damaged_sample_state_names_what_is_wrong():
    x, schema = rows_of(100), Schema.binary(4)
    sample = PositionSample(schema, 50)
    sample.update(x, 0)
    with pytest.raises(WeightStateError, match="not a position sample"):
        PositionSample.from_bytes(b"junk")
    from streammn.packed_state import pack_state, unpack_state

    meta, arrays = unpack_state(sample.to_bytes())
    with pytest.raises(WeightStateError, match="not ascending"):
        PositionSample.from_bytes(pack_state(meta, dict(arrays, index=arrays["index"][::-1])))
    rows = arrays["rows"].copy()
    rows[0, 0] = 2
    with pytest.raises(WeightStateError, match="out of range"):
        PositionSample.from_bytes(pack_state(meta, dict(arrays, rows=rows)))
    with pytest.raises(WeightStateError, match="offered"):
        PositionSample.from_bytes(pack_state(dict(meta, n_seen=10), arrays))


def planted_lr_rows(n, seed=0):
    """Eight binary variables, each of the last six a noisy function of two earlier ones."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, (n, 8)).astype(np.uint8)
    for j in range(2, 8):
        logit = 2.0 * x[:, j - 1] - 1.5 * x[:, j - 2] + 0.3
        x[:, j] = rng.random(n) < 1 / (1 + np.exp(-logit))
    return Schema.binary(8), x


def test_exact_regressions_are_the_batch_fit_on_a_sample_of_a_longer_file_whatever_the_batches():
    """memory_mb=2 keeps about 1,800 rows for the regressions: a 6,000-row file is fitted on
    a uniform sample of it, the same for any batch size, and no FTRL step is taken."""
    schema, x = planted_lr_rows(6000)
    learners = [
        DTSL(schema, mode="exact", cpd="lr", memory_mb=2, weights="closed-form").fit(
            ArraySource(x, schema, batch_size=size)
        )
        for size in (6000, 999, 128)
    ]
    logistic = learners[0]._logistic
    assert logistic.exact and logistic.batch_current and logistic.online.rows == 0
    assert logistic.sample.n_seen == 6000 and logistic.sample.size == logistic.sample.capacity
    assert 1000 < logistic.sample.capacity < 6000
    for other in learners[1:]:
        assert other.to_bytes() == learners[0].to_bytes()
    # the sample's fit predicts the rows about as well as a fit on all of them
    whole = DTSL(schema, mode="exact", cpd="lr", weights="closed-form").fit(x)
    assert whole._logistic.sample.size == 6000
    test = planted_lr_rows(3000, seed=1)[1]
    sampled_pll = learners[0].to_markov_network().pll(test)
    assert sampled_pll > whole.to_markov_network().pll(test) - 0.02


def test_exact_mode_samples_in_its_first_pass_what_the_positions_choose():
    schema, x = planted_lr_rows(3000)
    conditionals = LogisticConditionals(schema, 0.1, exact=True)
    source = ArraySource(x, schema, batch_size=700)
    passes = SourcePasses(source, on_first_pass=conditionals.update)
    from streammn.trees.forest import Forest
    from streammn.trees.leaf_stats import LeafStats

    forest = Forest(schema)
    stats = LeafStats(forest, capacity=schema.n_vars)
    stats.activate(forest.roots)
    passes(forest, stats, forest.roots, np.arange(schema.n_vars))
    expected = PositionSample(schema, conditionals.sample.capacity, seed=SAMPLE_SEED)
    expected.update(x, 0)
    assert conditionals.sample.to_bytes() == expected.to_bytes()


def test_old_exact_states_load_and_score_as_they_were_saved():
    """States saved before exact mode had its own sample (an algorithm-L sample, fitted when
    it held every row): a cpd='lr' and a cpd='auto' learner on 400 rows."""
    saved = np.load(OLD_STATES)
    x = saved["rows"]
    for cpd in ("lr", "auto"):
        learner = DTSL.from_bytes(saved[f"{cpd}_state"].tobytes())
        assert not learner._logistic.exact
        np.testing.assert_array_equal(learner.pll_terms(x), saved[f"{cpd}_terms"])
        np.testing.assert_array_equal(learner.logistic_variables(), saved[f"{cpd}_mask"])
        assert not learner.finish()  # already fitted on every row: nothing to do
        assert learner.to_bytes() == saved[f"{cpd}_state"].tobytes()
        # learned again now, the model is the same (the file is within the sample), to the
        # batch fit's tolerance (3e-8 relative on its objectives): the fit's kernels round
        # otherwise since they lost fastmath, which moved the terms by up to 3e-7
        again = DTSL(learner.schema, mode="exact", cpd=cpd, weights="closed-form").fit(x)
        assert again._logistic.exact
        np.testing.assert_allclose(again.pll_terms(x), saved[f"{cpd}_terms"], rtol=1e-6)
        assert DTSL.from_bytes(again.to_bytes()).equals(again)


def test_old_one_pass_states_resume_to_the_same_state():
    """One-pass cpd='lr' and 'auto' learners saved at row 2,500 of 5,000 by the code before
    the mergeable sample (c9b0001), with the states that code reached at row 5,000: resumed
    now, they reach the same state (the choice at row 4,096 included), every array to the
    bit but FTRL's, which agree to rounding: its step rounds otherwise since it lost
    fastmath."""
    saved = np.load(OLD_STREAM_STATES)
    x = saved["rows"]
    for cpd in ("lr", "auto"):
        resumed = DTSL.from_bytes(saved[f"{cpd}_midway"].tobytes())
        assert not resumed._logistic.exact and resumed._logistic.interval is None
        resumed.partial_fit(x[2500:])
        (meta, state), (end_meta, end) = (
            resumed.get_state(),
            DTSL.from_bytes(saved[f"{cpd}_end"].tobytes()).get_state(),
        )
        assert meta == end_meta and state.keys() == end.keys()
        for key in state.keys() - {"logistic"}:
            np.testing.assert_array_equal(state[key], end[key])
        (lr_meta, lr), (end_lr_meta, end_lr) = (
            unpack_state(s["logistic"].tobytes()) for s in (state, end)
        )
        assert lr_meta == end_lr_meta and lr.keys() == end_lr.keys()
        for key in lr:
            if key in ("ftrl_z", "ftrl_n", "ftrl_w"):
                np.testing.assert_allclose(lr[key], end_lr[key], rtol=0, atol=1e-12)
            else:
                np.testing.assert_array_equal(lr[key], end_lr[key])


def test_count_pass_that_cannot_sample_gets_trees_or_a_refusal():
    schema, x = planted_lr_rows(1000)
    source = ArraySource(x, schema)

    def plain(forest, stats, chunk, trees):
        SourcePasses(source)(forest, stats, chunk, trees)

    with pytest.raises(DTSLError, match="cannot sample"):
        DTSL(schema, mode="exact", cpd="lr", weights="closed-form").fit(source, count_pass=plain)
    auto = DTSL(schema, mode="exact", weights="closed-form").fit(source, count_pass=plain)
    assert auto._logistic is None and not auto.logistic_variables().any()
