"""Pseudo-likelihood weight learning: gradient, recovery of known weights, streaming, refine."""

import types

import numpy as np
import pytest

from helpers.helpers_mn import random_featureset
from streammn import Schema
from streammn.schema import MISSING, SchemaError
from streammn.dn import DependencyNetwork
from streammn.dn.conversion import dn2mn
from streammn.features import FeatureSet
from streammn.network.model import MarkovNetwork
from streammn.network.weights import StochasticPLL, WeightLearningError, fit_weights, pll_objective


def exact_sample(mn, n, seed):
    states, p = mn.joint()
    return states[np.random.default_rng(seed).choice(len(p), size=n, p=p)]


def planted(seed=0):
    """Identifiable binary MN: one unary feature per variable plus a few pairs."""
    rng = np.random.default_rng(seed)
    schema = Schema.binary(6)
    feats = [(rng.normal(0, 0.7), [(i, 1, True)]) for i in range(6)]
    for i, j in [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (0, 5), (1, 4)]:
        feats.append((rng.normal(0, 1.0), [(i, 1, True), (j, 1, True)]))
    return MarkovNetwork(schema, FeatureSet.from_features(schema, feats))


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    schema = Schema.from_cardinalities([2, 3, 2, 4, 2])
    fs = random_featureset(rng, schema, 20, max_len=4, p_eq=0.6)
    rows = rng.integers(0, schema.cardinalities, size=(300, 5))
    mu = rng.normal(size=fs.n_features)
    _, grad = pll_objective(fs, rows, stddev=0.7, prior_mean=mu)
    eps = 1e-6
    for f in range(fs.n_features):
        w = fs.weights.copy()
        w[f] += eps
        up = pll_objective(fs.with_weights(w), rows, 0.7, mu)[0]
        w[f] -= 2 * eps
        down = pll_objective(fs.with_weights(w), rows, 0.7, mu)[0]
        assert grad[f] == pytest.approx((up - down) / (2 * eps), abs=1e-7)


def test_recovers_planted_weights():
    truth = planted()
    rows = exact_sample(truth, 40000, seed=2)
    start = truth.with_weights(np.zeros(truth.n_features))
    fit = fit_weights(start, rows, stddev=10.0, max_iter=200)
    assert fit.fit_info["converged"]
    # the optimum is at least as good as the truth on the training objective ...
    assert (
        pll_objective(fit.features, rows, 10.0)[0] <= pll_objective(truth.features, rows, 10.0)[0]
    )
    # ... and within sampling error of it (standard errors here are about 0.02 - 0.04)
    np.testing.assert_allclose(fit.weights, truth.weights, atol=0.12)
    # a strong prior shrinks towards zero
    tight = fit_weights(start, rows, stddev=0.001)
    assert np.abs(tight.weights).max() < 0.05


def test_warm_start_and_errors():
    truth = planted(1)
    rows = exact_sample(truth, 5000, seed=3)
    opt = fit_weights(truth, rows, stddev=5.0)
    again = fit_weights(
        truth.with_weights(np.zeros(truth.n_features)),
        rows,
        stddev=5.0,
        init=opt.weights,
        max_iter=5,
    )
    np.testing.assert_allclose(again.weights, opt.weights, atol=1e-4)
    # a row reservoir (anything with ``rows``) is read like its rows
    reservoir = types.SimpleNamespace(rows=rows)
    np.testing.assert_array_equal(fit_weights(truth, reservoir, stddev=5.0).weights, opt.weights)
    with pytest.raises(WeightLearningError):
        fit_weights(truth, rows, init=np.zeros(3))
    with pytest.raises(WeightLearningError):
        fit_weights(truth, rows[:0])
    nan_start = np.zeros(truth.n_features)
    nan_start[2] = np.nan  # refused with its place, not fitted into NaN weights (issue 42)
    with pytest.raises(WeightLearningError, match="init must be finite, got nan for feature 2"):
        fit_weights(truth, rows, init=nan_start)
    with pytest.raises(WeightLearningError, match="prior_mean must be finite"):
        fit_weights(truth, rows, prior_mean=np.full(truth.n_features, np.inf))
    with pytest.raises(WeightLearningError):
        pll_objective(truth.features, rows, stddev=0.0)


def test_missing_values_are_refused_with_their_place():
    """A model of a missing-mode schema learns weights from complete rows only: a hole is named
    by row and column, not read as a state."""
    truth = planted(1)
    schema = truth.schema.with_missing()
    model = MarkovNetwork(schema, FeatureSet.from_features(schema, truth.features.to_list()))
    rows = exact_sample(truth, 200, seed=4)
    holed = rows.copy()
    holed[17, 2] = MISSING
    for learn in (lambda r: fit_weights(model, r), lambda r: StochasticPLL(model).partial_fit(r)):
        with pytest.raises(SchemaError, match="missing value") as err:
            learn(holed)
        assert (err.value.row, err.value.column) == (17, 2)
    assert np.isfinite(fit_weights(model, rows, max_iter=3).weights).all()


def test_stochastic_pll_approaches_batch_optimum():
    truth = planted(2)
    rows = exact_sample(truth, 20000, seed=4)
    opt = fit_weights(truth.with_weights(np.zeros(truth.n_features)), rows, stddev=5.0)
    sgd = StochasticPLL(
        truth.with_weights(np.zeros(truth.n_features)), stddev=5.0, learning_rate=1.0
    )
    for epoch in range(4):
        for batch in np.array_split(rows, 40):
            sgd.partial_fit(batch)
    assert sgd.n_seen == 80000
    np.testing.assert_allclose(sgd.model.weights, opt.weights, atol=0.1)
    assert "StochasticPLL(" in repr(sgd)


def test_dn2mn_refine_keeps_the_better_model():
    truth = planted(3)
    train, valid = exact_sample(truth, 4000, seed=5), exact_sample(truth, 2000, seed=6)
    # an inconsistent DN: the truth's conditionals with noisy weights per CPD
    rng = np.random.default_rng(7)
    var_ptr, var_feats = truth.index
    cpds = []
    for i in range(6):
        part = truth.features.select(var_feats[var_ptr[i] : var_ptr[i + 1]])
        cpds.append(part.with_weights(part.weights + rng.normal(0, 0.8, part.n_features)))
    dn = DependencyNetwork(truth.schema, cpds)
    plain = dn2mn(dn, train=train, weights="closed-form")
    refined = dn2mn(dn, train=train, valid=valid, refine=30, refine_stddev=5.0)
    assert refined.pll(valid) > plain.pll(valid) + 0.01
    # refining the truth's own (exact) DN on 30 rows with a weak prior overfits: the refined
    # weights lose on validation, so the plain conversion is returned
    exact_dn = DependencyNetwork(
        truth.schema,
        [truth.features.select(var_feats[var_ptr[i] : var_ptr[i + 1]]) for i in range(6)],
    )
    kept = dn2mn(exact_dn, train=train[:30], valid=valid, refine=50, refine_stddev=100.0)
    base = dn2mn(exact_dn, train=train[:30], weights="closed-form")
    overfit = fit_weights(base, train[:30], stddev=100.0, max_iter=50)
    assert overfit.pll(valid) < base.pll(valid)
    np.testing.assert_array_equal(kept.weights, base.weights)
