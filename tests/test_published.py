"""The published weights (streammn.network.published): the refined optimum against brute force,
never worse than the closed form on held-out rows, warm start equal to cold start, the row sample's
split, budget and round trip."""

import numpy as np
import pytest
from scipy.optimize import minimize

from streammn.dn.conversion import dn2mn
from streammn.dtsl import DTSL
from streammn.features import FeatureSet
from streammn.network.published import (
    STDDEVS,
    WORK_PER_ROW,
    WeightState,
    WeightStateError,
    _Search,
    publish,
    start_weights,
)
from streammn.schema import Schema
from streammn.network.weight_sample import WeightSample


def near_deterministic_rows(n, n_vars=5, flip=0.02, seed=0):
    """Each variable copies the one before it, flipped rarely: trees of near-deterministic
    leaves, where DN2MN's closed form is far from the best weights."""
    rng = np.random.default_rng(seed)
    x = np.empty((n, n_vars), dtype=np.uint8)
    x[:, 0] = rng.random(n) < 0.5
    for j in range(1, n_vars):
        x[:, j] = x[:, j - 1] ^ (rng.random(n) < flip)
    return x


def closed_form(rows, **kw):
    schema = Schema.binary(rows.shape[1])
    learner = DTSL(schema, mode="exact", kappa=0.5, cpd="tree", **kw)  # the trees' closed form
    return dn2mn(learner.fit(rows).to_dependency_network())


def closed_form_and_sample(rows):
    """The closed form learned on ``rows`` and a weight sample of them (a fifth held out)."""
    model = closed_form(rows)
    sample = WeightSample(model.schema)
    sample.update(rows, 0)
    return model, sample


def one_hot_rows(n, seed=0):
    """Two three-valued categoricals, one-hot encoded (six binary columns, exactly one 1 in each
    group) and equal four times in five: the kind of data (mushrooms) where DN2MN's closed form
    puts inconsistent weights on contexts never seen."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = np.where(rng.random(n) < 0.8, a, rng.integers(0, 3, n))
    x = np.zeros((n, 6), dtype=np.uint8)
    x[np.arange(n), a] = 1
    x[np.arange(n), 3 + b] = 1
    return x


def brute_objective(model, rows, stddev):
    """``-PLL/N + |w - w_closed|^2 / (2 stddev^2 N)`` with every conditional enumerated from
    the unnormalised log scores of each distinct row and its one-variable changes."""
    n, n_vars = rows.shape
    distinct, counts = np.unique(rows, axis=0, return_counts=True)
    centre = model.weights

    def value(w):
        m = model.with_weights(w)
        total = 0.0
        for i in range(n_vars):
            scores = []
            for a in range(2):
                changed = distinct.copy()
                changed[:, i] = a
                scores.append(m.log_score(changed))
            scores = np.array(scores)
            top = scores.max(axis=0)
            log_z = top + np.log(np.exp(scores - top).sum(axis=0))
            total += float(
                ((scores[distinct[:, i], np.arange(len(distinct))] - log_z) * counts).sum()
            )
        d = w - centre
        return (-total + 0.5 * float(d @ d) / stddev**2) / n

    return value


@pytest.mark.slow
@pytest.mark.parametrize("stddev", [0.3, 3.0])
def test_a_fit_reaches_the_brute_force_optimum(stddev):
    rows = near_deterministic_rows(2000)
    model = closed_form(rows)
    fs = model.features
    weights = _Search(fs, rows, rows[:10], 2**24, None).fit(rows, fs.weights, stddev)
    objective = brute_objective(model, rows, stddev)
    best = minimize(
        objective,
        fs.weights,
        method="L-BFGS-B",
        options={"ftol": 1e-14, "gtol": 1e-9, "maxiter": 5000},
    )
    # within L-BFGS's stopping tolerance (a relative decrease of TOL = 1e-7 per step)
    assert objective(weights) == pytest.approx(best.fun, rel=5e-5)
    assert objective(weights) >= best.fun - 1e-9
    assert np.abs(weights - best.x).max() < (2e-3 if stddev < 1 else 0.1)


def test_refined_weights_are_published_where_they_score_better():
    rows = one_hot_rows(2000)
    model, sample = closed_form_and_sample(rows)
    published = publish(model, sample.train, sample.held_out)
    pll = published.record["held_out_pll"]
    assert published.record["published"] == "refined"
    assert pll["refined"] > pll["closed_form"] + 0.005
    assert pll["refined"] == pytest.approx(published.model.pll(sample.held_out))
    assert pll["closed_form"] == pytest.approx(model.pll(sample.held_out))
    assert published.record["stddev"] in STDDEVS
    assert published.state.features.equals(published.model.features)
    assert published.state.full_fits == 1 and published.state.spent == 0


@pytest.mark.parametrize("mode", ["exact", "hoeffding"])
def test_a_learner_at_its_defaults_publishes_the_refined_weights(mode):
    """``DTSL(schema).fit(rows).to_markov_network()`` is the refined network, not DN2MN's
    closed form, with nothing set: better on rows it never saw (issue 35)."""
    rows, test = one_hot_rows(4000), one_hot_rows(2000, seed=9)
    learner = DTSL(Schema.binary(6), mode=mode).fit(rows)
    closed, published = learner.learned_network(), learner.publish()
    assert published.record["published"] == "refined"
    # one-hot columns are determined by their group: the closed form loses a little on each,
    # the refined weights far less (3.5 times here, where some conditionals are regressions;
    # 30 times with the trees alone)
    assert closed.pll(test) < -1e-3 and published.model.pll(test) > closed.pll(test) / 3
    assert learner.to_markov_network().features.equals(published.model.features)  # no state
    # a validation set judges instead of the sample's held-out share, every sampled row trains
    valid = learner.publish(validation=test)
    assert valid.record["held_out_rows"] == 2000 and valid.record["train_rows"] == 4000
    restored = DTSL.from_bytes(learner.to_bytes())
    assert restored.to_markov_network().features.equals(published.model.features)


@pytest.mark.parametrize(
    "n_rows, flip, seed", [(400, 0.02, 1), (3000, 0.3, 2), (600, 0.45, 3), (5000, 0.1, 4)]
)
def test_the_published_model_never_scores_the_held_out_rows_worse(n_rows, flip, seed):
    rows = near_deterministic_rows(n_rows, n_vars=7, flip=flip, seed=seed)
    model, sample = closed_form_and_sample(rows)
    published = publish(model, sample.train, sample.held_out)
    assert published.model.pll(sample.held_out) >= model.pll(sample.held_out) - 1e-12
    if published.record["published"] == "closed-form":
        assert published.model is model and published.state.features is None
    else:
        assert published.state.features.equals(published.model.features)


def test_a_sample_that_cannot_help_publishes_the_closed_form():
    """Held-out rows of another distribution than the training rows: refining fits the
    training rows and scores the held-out ones worse, so the closed form stays."""
    rows = near_deterministic_rows(4000, flip=0.05)
    model = closed_form(rows)
    other = near_deterministic_rows(1000, flip=0.5, seed=9)
    published = publish(model, rows, other)
    assert published.record["published"] == "closed-form"
    assert published.model is model


def test_a_probe_that_finds_nothing_waits_for_the_stream_to_double():
    rows = near_deterministic_rows(6000, n_vars=6, flip=0.3, seed=2)
    model, sample = closed_form_and_sample(rows)
    first = publish(model, sample.train, sample.held_out, rows_seen=6000)
    assert first.record["probe"]["result"] == "no better than the closed form"
    assert first.state.probe_after == 12000 and first.model is model
    waiting = publish(
        model, sample.train, sample.held_out, first.state, max_evaluations=50, rows_seen=11999
    )
    assert waiting.record["probe"] == "not before row 12,000"
    assert waiting.record["evaluations"] == 0 and waiting.state == first.state
    again = publish(
        model, sample.train, sample.held_out, first.state, max_evaluations=50, rows_seen=12000
    )
    assert again.record["evaluations"] > 0 and again.state.probe_after == 24000


def test_warm_start_gives_the_cold_start_result():
    rows = one_hot_rows(2000)
    model, sample = closed_form_and_sample(rows)
    cold = publish(model, sample.train, sample.held_out)
    # a warm state from elsewhere: some features shared (perturbed weights), some not
    rng = np.random.default_rng(0)
    shared = cold.model.features.select(np.arange(0, model.n_features, 2))
    stranger = closed_form(near_deterministic_rows(500, n_vars=6, seed=5)).features
    warm_fs = FeatureSet.concat(model.schema, [shared, stranger])
    warm_fs = warm_fs.with_weights(warm_fs.weights + rng.normal(0, 0.3, warm_fs.n_features))
    state = WeightState(warm_fs, cold.record["stddev"], full_fits=1)
    warm = publish(model, sample.train, sample.held_out, state)
    assert warm.record["warm_start"] and warm.record["stddev"] == cold.record["stddev"]
    assert np.abs(warm.model.weights - cold.model.weights).max() < 5e-3
    assert warm.record["held_out_pll"]["refined"] == pytest.approx(
        cold.record["held_out_pll"]["refined"], abs=1e-5
    )


def test_a_budget_bounds_the_fit_and_the_carried_over_weights_still_count():
    rows = one_hot_rows(2000)
    model, sample = closed_form_and_sample(rows)
    first = publish(model, sample.train, sample.held_out)
    # no work left: the last refined weights, carried over, against the closed form
    none = publish(model, sample.train, sample.held_out, first.state, max_evaluations=0)
    assert none.record["evaluations"] == 0 and none.record["published"] == "refined"
    assert none.model.features.equals(first.model.features)
    assert none.state.spent == first.state.spent and none.state.full_fits == 1
    some = publish(
        model, sample.train, sample.held_out, WeightState(full_fits=1), max_evaluations=7
    )
    assert 0 < some.record["evaluations"] <= 7 + 1  # L-BFGS-B ends its last step first
    assert some.state.spent == pytest.approx(
        some.record["evaluations"] * len(sample.train), rel=1e-3
    )
    state = WeightState(full_fits=1, spent=100.0)
    assert WeightState().affordable(10**6, 1000) is None  # the first fit is a full one
    assert state.affordable(1000, 50) == pytest.approx((WORK_PER_ROW * 1000 - 100) / 50)


def test_start_weights_keep_the_surviving_features_weights():
    schema = Schema.binary(3)
    old = FeatureSet.from_features(
        schema, [(1.5, ((0, 1, True),)), (-2.0, ((0, 1, True), (1, 0, True)))]
    )
    new = FeatureSet.from_features(
        schema,
        [(0.1, ((2, 1, True),)), (0.2, ((0, 1, True), (1, 0, True))), (0.3, ((0, 1, True),))],
    )
    assert start_weights(new, old).tolist() == [0.1, -2.0, 1.5]
    assert start_weights(new, None).tolist() == [0.1, 0.2, 0.3]


def test_warm_state_round_trips_and_refuses_garbage():
    rows = near_deterministic_rows(3000)
    model = closed_form(rows)
    state = WeightState(model.features, STDDEVS[1], 12.5, 3, 4000)
    back = WeightState.from_bytes(state.to_bytes())
    assert back.features.equals(model.features) and back.stddev == STDDEVS[1]
    assert (back.spent, back.full_fits, back.probe_after) == (12.5, 3, 4000)
    assert WeightState.from_bytes(WeightState().to_bytes()) == WeightState()
    with pytest.raises(WeightStateError):
        WeightState.from_bytes(b"\x00garbage")
