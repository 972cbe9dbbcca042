"""Logistic-regression conditionals: the L1 fit against scikit-learn, its optimality conditions
and against the path solved exactly, their CPDs through DN2MN against brute force, and DTSL's
``cpd='lr'`` / ``'auto'`` (cut and resume identity, the choice)."""

import json
import warnings

import numpy as np
import pytest

from helpers.helpers_mn import all_rows, brute_joint
from streammn import Schema
from streammn.dn import DependencyNetwork
from streammn.dn.conversion import dn2mn
from streammn.cli import main
from streammn.dtsl import DTSL
from streammn.errors import DTSLError
from streammn.logistic.batch import (
    PATH_RATIO,
    PATH_STEPS,
    Problem,
    fit_l1,
    fit_with_held_out,
    intercepts_only,
    kkt_violation,
    largest_penalties,
)
from streammn.logistic.coding import Coding
from streammn.logistic.conditionals import batch_fit_affordable

CARDS = [2, 3, 2, 4]


def random_rows(rng, cards, n):
    return np.column_stack([rng.integers(0, d, n) for d in cards]).astype(np.uint8)


def pairwise_mrf(rng, cards):
    """Unary tables ``h[i][a]`` and pairwise tables ``theta[i][j][a, v]`` (symmetric)."""
    n = len(cards)
    h = [rng.normal(0, 0.5, d) for d in cards]
    theta = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            t = rng.normal(0, 1.0, (cards[i], cards[j]))
            theta[i][j], theta[j][i] = t, t.T
    return h, theta


def mrf_log_score(h, theta, row):
    n = len(h)
    s = sum(h[i][row[i]] for i in range(n))
    return s + sum(theta[i][j][row[i], row[j]] for i in range(n) for j in range(i + 1, n))


def mrf_as_regressions(coding, h, theta):
    """The exact logistic conditionals of the pairwise MRF in ``coding``'s columns."""
    W = np.zeros((coding.n_inputs, coding.n_outputs))
    b = np.zeros(coding.n_outputs)
    for o, (i, a) in enumerate(zip(coding.out_var, coding.out_val)):
        others = [j for j in range(len(h)) if j != i]
        if coding.binary[i]:  # the logit of value 1 against value 0
            b[o] = h[i][1] - h[i][0] + sum(theta[i][j][1, 0] - theta[i][j][0, 0] for j in others)
        else:
            b[o] = h[i][a] + sum(theta[i][j][a, 0] for j in others)
        for c, (j, v) in enumerate(zip(coding.in_var, coding.in_val)):
            if j == i:
                continue
            if coding.binary[i]:
                W[c, o] = (theta[i][j][1, v] - theta[i][j][0, v]) - (
                    theta[i][j][1, 0] - theta[i][j][0, 0]
                )
            else:
                W[c, o] = theta[i][j][a, v] - theta[i][j][a, 0]
    return W, b


@pytest.mark.parametrize("seed", [0, 1])
def test_consistent_regressions_convert_to_the_mrf_exactly(seed):
    rng = np.random.default_rng(seed)
    schema = Schema.from_cardinalities(CARDS)
    coding = Coding(schema)
    h, theta = pairwise_mrf(rng, CARDS)
    W, b = mrf_as_regressions(coding, h, theta)
    rows = all_rows(schema)
    scores = np.array([mrf_log_score(h, theta, r) for r in rows])
    joint = np.exp(scores - scores.max())
    joint /= joint.sum()
    # the regressions are the MRF's conditionals ...
    for i, d in enumerate(CARDS):
        logits = np.array(
            [[mrf_log_score(h, theta, np.r_[r[:i], a, r[i + 1 :]]) for a in range(d)] for r in rows]
        )
        exact = logits[np.arange(len(rows)), rows[:, i]] - np.logaddexp.reduce(logits, axis=1)
        np.testing.assert_allclose(coding.log_conditionals(rows, W, b)[:, i], exact, atol=1e-10)
        # a subset of the variables gets the same terms (a prequential score asks for a few)
        subset = coding.log_conditionals(rows, W, b, np.array([i, 0]))
        np.testing.assert_allclose(subset[:, 0], exact, atol=1e-10)
    # ... as CPDs too, and DN2MN of the consistent DN is the MRF, for every base and ordering
    dn = DependencyNetwork(schema, coding.cpds(W, b), counts=[np.ones(d) for d in CARDS])
    np.testing.assert_allclose(dn.pll_terms(rows), coding.log_conditionals(rows, W, b), atol=1e-10)
    for base, orderings in [("marginals", "rotations2"), ("uniform", "one"), ("marginals", "two")]:
        mn = dn2mn(dn, base=base, orderings=orderings)
        _, p = brute_joint(mn.features, schema)
        np.testing.assert_allclose(p, joint, atol=1e-9)


def test_l1_fit_matches_scikit_learn_per_variable():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.linear_model import LogisticRegression

    version = tuple(int(part) for part in sklearn.__version__.split(".")[:2])
    L1 = {"l1_ratio": 1.0} if version >= (1, 8) else {"penalty": "l1"}  # 1.8 renamed it
    rng = np.random.default_rng(3)
    schema = Schema.from_cardinalities(CARDS)
    coding = Coding(schema)
    h, theta = pairwise_mrf(rng, CARDS)
    rows = random_rows(rng, CARDS, 600)
    problem = Problem(coding, rows)
    lam = 0.01
    W, b, _ = fit_l1(problem, np.full(coding.n_outputs, lam), tol=1e-12)
    Z = coding.indicators(rows)
    for i in range(schema.n_vars):
        cols = coding.in_var != i
        lo, hi = coding.out_start[i], coding.out_start[i + 1]
        ref = LogisticRegression(
            C=1.0 / (lam * rows.shape[0]), solver="saga", tol=1e-10, max_iter=100_000, **L1
        ).fit(Z[:, cols], rows[:, i])
        coef = ref.coef_.T  # (inputs, 1) binary, (inputs, d) multinomial
        np.testing.assert_allclose(W[cols, lo:hi], coef, atol=2e-3)
        assert not W[~cols, lo:hi].any()  # own inputs stay zero


def planted_rows(seed, cards, n):
    """``n`` rows drawn exactly from a random pairwise MRF over ``cards``: regressions with
    real signal, so the L1 optima have many nonzero weights."""
    rng = np.random.default_rng(seed)
    h, theta = pairwise_mrf(rng, cards)
    states = all_rows(Schema.from_cardinalities(cards))
    scores = np.array([mrf_log_score(h, theta, r) for r in states])
    p = np.exp(scores - scores.max())
    return states[rng.choice(len(states), n, p=p / p.sum())]


def objective(problem, lam, weights, bias):
    """Each variable's mean log-loss plus ``lam`` times the L1 norm of its weights."""
    coding = problem.coding
    l1 = np.add.reduceat(np.abs(weights).sum(axis=0), coding.out_start[:-1])
    return problem.losses(weights, bias) + lam * l1


def sklearn_fit(coding, rows, i, lam):
    """Variable ``i``'s L1 regression by scikit-learn on the same indicators, in ``coding``'s
    columns: liblinear for a binary variable (its intercept penalised by ``lam / 1e4`` only),
    saga's multinomial for more values."""
    sklearn = pytest.importorskip("sklearn")
    from sklearn.linear_model import LogisticRegression

    version = tuple(int(part) for part in sklearn.__version__.split(".")[:2])
    l1 = {"l1_ratio": 1.0} if version >= (1, 8) else {"penalty": "l1"}
    others = coding.in_var != i
    z = coding.indicators(rows)[:, others]
    c = 1.0 / (lam * rows.shape[0])
    if coding.binary[i]:
        model = LogisticRegression(
            C=c, solver="liblinear", intercept_scaling=1e4, tol=1e-12, max_iter=100_000, **l1
        )
    else:
        model = LogisticRegression(C=c, solver="saga", tol=1e-12, max_iter=200_000, **l1)
    model.fit(z, rows[:, i])
    lo, hi = coding.out_start[i], coding.out_start[i + 1]
    weights = np.zeros((coding.n_inputs, coding.n_outputs))
    bias = np.zeros(coding.n_outputs)
    weights[others, lo:hi] = model.coef_.T
    bias[lo:hi] = model.intercept_
    return weights, bias


@pytest.mark.parametrize("cards", [CARDS, [2] * 6], ids=["softmax", "binary"])
@pytest.mark.parametrize("lam", [0.002, 0.02])
def test_l1_optimum_agrees_with_scikit_learn(cards, lam):
    rows = planted_rows(5, cards, 800)
    coding = Coding(Schema.from_cardinalities(cards))
    problem = Problem(coding, rows, np.float64)
    weights, bias, _ = fit_l1(problem, np.full(coding.n_outputs, lam), tol=1e-13)
    mine = objective(problem, lam, weights, bias)
    for i in range(len(cards)):
        lo, hi = coding.out_start[i], coding.out_start[i + 1]
        ref_w, ref_b = sklearn_fit(coding, rows, i, lam)
        theirs = objective(problem, lam, ref_w, ref_b)[i]
        assert mine[i] <= theirs + 1e-9  # never worse than scikit-learn's optimum ...
        assert mine[i] >= theirs - 1e-6  # ... and the same one
        # a softmax's weights of one input may shift together (the same probabilities and,
        # with an even number of values, the same L1 norm): compare them less their mean
        ours, ref = weights[:, lo:hi], ref_w[:, lo:hi]
        if hi - lo > 1:
            ours, ref = (
                ours - ours.mean(axis=1, keepdims=True),
                ref - ref.mean(axis=1, keepdims=True),
            )
        np.testing.assert_allclose(ours, ref, atol=2e-3)
        assert not weights[coding.in_var == i, lo:hi].any()  # own inputs stay zero


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_returned_optimum_satisfies_the_optimality_conditions(dtype):
    """At every weight: the loss's gradient plus lam times the sign of a nonzero weight is
    zero, and under lam at a zero one; the intercepts' gradient is zero. Also for a variable
    a copy of another (nearly separable: the fit takes Newton steps there)."""
    rows = planted_rows(6, [2] * 8, 1500)
    rng = np.random.default_rng(0)
    rows[:, 0] = rows[:, 1] ^ (rng.random(len(rows)) < 0.01)  # x0 = x1 but for 1% of rows
    coding = Coding(Schema.binary(8))
    problem = Problem(coding, rows, dtype)
    lam = np.geomspace(0.05, 0.0005, 8)  # a penalty per variable
    weights, bias, _ = fit_l1(problem, lam, tol=1e-12)
    violation = kkt_violation(Problem(coding, rows, np.float64), lam, weights, bias)
    assert violation.max() <= 1e-7  # (lam >= 5e-4; at tol 1e-7 the violation is ~1e-5)
    assert (weights != 0).sum() > 20 and not weights[coding.in_var == 0, 0].any()


def test_a_constant_variable_gets_its_smoothed_frequency_and_changes_no_other_fit():
    """A variable with one value in every row has no optimum (its intercept falls for ever):
    no weights, the intercept of the smoothed frequencies; its constant input is no input to
    the others, whose optima are those of the rows without it."""
    rows = planted_rows(9, [2, 3, 2, 2], 600)
    rows = np.insert(rows, 2, 1, axis=1)  # variable 2 always takes value 1 of 3
    cards = [2, 3, 3, 2, 2]
    coding = Coding(Schema.from_cardinalities(cards))
    lam = np.full(coding.n_outputs, 0.004)
    weights, bias, _ = fit_l1(Problem(coding, rows, np.float64), lam, tol=1e-13)
    lo, hi = coding.out_start[2], coding.out_start[3]
    assert not weights[:, lo:hi].any() and not weights[coding.in_var == 2].any()
    expected = np.log(np.array([0.5, 600.5, 0.5]) / 601.0)
    np.testing.assert_allclose(bias[lo:hi], expected, rtol=1e-12)

    others = Coding(Schema.from_cardinalities([2, 3, 2, 2]))
    lam_others = np.full(others.n_outputs, 0.004)
    reference = np.delete(rows, 2, axis=1)
    ref_w, ref_b, _ = fit_l1(Problem(others, reference, np.float64), lam_others, tol=1e-13)
    inputs, outputs = coding.in_var != 2, coding.out_var != 2
    np.testing.assert_allclose(weights[np.ix_(inputs, outputs)], ref_w, atol=1e-6)
    np.testing.assert_allclose(
        coding.indicators(rows)[:, inputs] @ weights[np.ix_(inputs, outputs)] + bias[outputs],
        others.indicators(reference) @ ref_w + ref_b,
        atol=1e-5,
    )


def test_a_value_no_row_takes_leaves_the_fit_and_gets_its_smoothed_frequency():
    """Variable 1 has 4 values and takes 3: the others' fit is the fit of the schema with 3
    (its unseen value's indicator is no input), and the unseen value's probability is the
    smoothed frequency 0.5 / (n + 1) on the rows' mean (no weights)."""
    rows = planted_rows(10, [2, 3, 2, 2], 500)
    fit = {}
    for cards in ([2, 3, 2, 2], [2, 4, 2, 2]):
        coding = Coding(Schema.from_cardinalities(cards))
        problem = Problem(coding, rows, np.float64)
        lam = np.full(coding.n_outputs, 0.004)
        fit[len(cards) + cards[1]] = coding, problem, fit_l1(problem, lam, tol=1e-13)
    coding3, _, (w3, b3, _) = fit[7]
    coding4, problem, (w4, b4, _) = fit[8]
    assert problem.unseen.tolist() == [False, False, False, False, True, False, False]
    seen_in = ~((coding4.in_var == 1) & (coding4.in_val == 3))  # no row has its indicator
    seen_out = ~problem.unseen
    assert not w4[~seen_in].any() and not w4[:, 4].any()
    np.testing.assert_allclose(w4[np.ix_(seen_in, seen_out)], w3, atol=1e-6)
    np.testing.assert_allclose(b4[seen_out], b3, atol=1e-6)
    logits = problem.logits(w4, b4)[:, 1:5]
    p_unseen = np.exp(logits[:, 3] - np.logaddexp.reduce(logits, axis=1))
    # the log of the mean is at least the mean of the logs: within rounding of 0.5 / 501
    assert 0.5 / 501 * 0.9 < problem.weight @ p_unseen < 0.5 / 501 * 1.1


def test_few_rows_with_unseen_values_fit_finite_weights_without_warnings():
    """18 rows found by the fuzz tests: an 8-valued variable takes 4 of its values (the
    others' Hessians are rounding errors: a Newton step there had no bound and overflowed),
    four variables are constant, one is 1 in three rows."""
    rows = np.zeros((18, 6), dtype=np.uint8)
    rows[[0, 3], 0], rows[2, 0], rows[7, 0] = 1, 3, 7
    rows[[9, 12, 17], 5] = 1
    schema = Schema.from_cardinalities([8, 2, 2, 2, 2, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        learner = DTSL(schema, cpd="lr", mode="exact").fit(rows)
    mn = learner.to_markov_network()
    assert np.isfinite(mn.pll(rows))
    assert np.isfinite(learner._logistic.weights).all()


def test_a_variable_constant_in_the_fitting_rows_keeps_no_weights():
    """Variable 5 is 1 in held-out rows only: its penalty has no path to be chosen on, so it
    keeps no weights (all the rows separate it: the floor's near-zero penalty would fit
    weights without bound), its penalty the smallest that zeroes them on all the rows."""
    rows = np.zeros((18, 6), dtype=np.uint8)
    rows[[0, 3], 0], rows[2, 0], rows[7, 0] = 1, 3, 7
    rows[[10, 15], 5] = 1
    held_out = np.arange(18) % 5 == 0  # rows 0, 5, 10, 15
    coding = Coding(Schema.from_cardinalities([8, 2, 2, 2, 2, 2]))
    weights, bias, lam, _ = fit_with_held_out(coding, rows, held_out)
    assert np.abs(weights[:, coding.out_var == 5]).max() <= 1e-9
    assert lam[5] == largest_penalties(Problem(coding, rows))[5]
    assert np.isfinite(bias).all() and weights[:, coding.out_var == 0].any()


def test_repeated_rows_weigh_as_their_count_and_the_order_of_rows_does_not_matter():
    """The fit sees each distinct row once, weighted by its count: the rows twice over give
    the same optimum to the bit, and so does the path on the rows in another order."""
    rows = planted_rows(7, CARDS, 400)
    coding = Coding(Schema.from_cardinalities(CARDS))
    lam = np.full(coding.n_outputs, 0.003)
    once = fit_l1(Problem(coding, rows), lam)
    twice = fit_l1(Problem(coding, np.concatenate([rows, rows[::-1]])), lam)
    for a, b in zip(once, twice):
        np.testing.assert_array_equal(a, b)
    held_out = np.arange(len(rows)) % 5 == 0
    order = np.random.default_rng(1).permutation(len(rows))
    path = fit_with_held_out(coding, rows, held_out)
    for a, b in zip(path, fit_with_held_out(coding, rows[order], held_out[order])):
        np.testing.assert_array_equal(a, b)


def test_the_path_chooses_as_the_exact_path_does():
    """``fit_with_held_out`` against the same path solved to the last digits in float64 (by
    ``fit_l1``, which the tests above hold to scikit-learn and the optimality conditions):
    the same penalties, the same held-out losses (to 1e-4: first order in the weights, where
    the objective the tolerance bounds is second order), a final fit within its tolerance."""
    cards = CARDS + [2, 2, 3]
    rows = planted_rows(8, cards, 1500)
    coding = Coding(Schema.from_cardinalities(cards))
    held_out = np.arange(len(rows)) % 5 == 0
    weights, bias, lam, held_out_loss = fit_with_held_out(coding, rows, held_out)

    fit, judge = (Problem(coding, part, np.float64) for part in (rows[~held_out], rows[held_out]))
    top = np.maximum(largest_penalties(fit), 1e-8)
    w, b = np.zeros_like(weights), intercepts_only(fit)
    losses, penalties = [], []
    for ratio in np.geomspace(1.0, PATH_RATIO, PATH_STEPS):
        w, b, _ = fit_l1(fit, (top * ratio)[coding.out_var], w, b, tol=1e-13)
        losses.append(judge.losses(w, b))
        penalties.append(top * ratio)
    best = np.argmin(losses, axis=0)
    variables = np.arange(len(cards))
    expected = np.array(penalties)[best, variables] * np.sqrt(fit.n / len(rows))
    np.testing.assert_allclose(lam, expected, rtol=1e-12)
    np.testing.assert_allclose(held_out_loss, np.array(losses)[best, variables], atol=1e-4)

    everything = Problem(coding, rows, np.float64)
    optimum = fit_l1(everything, lam[coding.out_var], weights, bias, tol=1e-13)
    gap = objective(everything, lam, weights, bias) - objective(everything, lam, *optimum[:2])
    assert gap.max() <= 1e-7 * objective(everything, lam, weights, bias).max()  # its tolerance


def test_the_coding_of_a_binary_variable_is_binary_logistic_regression():
    coding = Coding(Schema.from_cardinalities([2, 3, 2]))
    assert coding.n_inputs == 1 + 2 + 1 and coding.n_outputs == 1 + 3 + 1
    assert coding.out_val.tolist() == [1, 0, 1, 2, 1]


def lr_data(n, seed=0):
    """x0 = x1 xor x2 (noisy): a tree's variable; x3 = a noisy sum of x4..x11: a regression's."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, (n, 12)).astype(np.uint8)
    x[:, 0] = (x[:, 1] ^ x[:, 2]) ^ (rng.random(n) < 0.05)
    logit = 0.7 * (x[:, 4:12].astype(float).sum(axis=1) - 4)
    x[:, 3] = rng.random(n) < 1 / (1 + np.exp(-logit))
    return Schema.binary(12), x


def test_auto_chooses_per_variable_and_beats_either_alone():
    schema, x = lr_data(6000)
    train, test = x[:4000], x[4000:]
    auto = DTSL(schema, cpd="auto", mode="exact").fit(train)
    chosen = auto.logistic_variables()
    assert not chosen[0] and chosen[3]
    scores = {
        cpd: DTSL(schema, cpd=cpd, mode="exact").fit(train).score(test) for cpd in ("tree", "lr")
    }
    assert auto.score(test) >= max(scores.values()) - 0.01
    np.testing.assert_allclose(auto.to_dependency_network().pll_terms(test), auto.pll_terms(test))


def learned_whole_and_cut(schema, x, cuts, cpd):
    """DTSL learned from ``x`` in one batch and in the batches ``cuts`` (row ranges); asserts
    that both states are the same and returns the first."""
    whole = DTSL(schema, cpd=cpd).partial_fit(x)
    cut = DTSL(schema, cpd=cpd)
    for a, b in cuts:
        cut.partial_fit(x[a:b])
    assert whole.equals(cut)
    return whole


def test_one_pass_does_not_depend_on_the_cuts_and_finishes_with_the_batch_fit():
    schema, x = lr_data(3000, seed=1)
    cuts = [(0, 7), (7, 999), (999, 1001), (1001, 2500), (2500, 3000)]
    whole = learned_whole_and_cut(schema, x, cuts, "lr")
    online = whole._logistic.online
    assert online.rows == 2944 and online.pending.shape[0] == 56  # whole mini-batches of 128
    assert not whole._logistic.batch_current
    resumed = DTSL.from_bytes(whole.to_bytes())
    assert resumed.finish() and not resumed.finish()  # fitted once: nothing new the second time
    assert resumed._logistic.batch_current and resumed._logistic.fitted_rows == 3000
    assert whole.finish()
    np.testing.assert_array_equal(resumed.pll_terms(x[:50]), whole.pll_terms(x[:50]))


def reference_ftrl(grads, thresholds, alpha, beta):
    """FTRL-Proximal per coordinate as McMahan et al. write it (one coordinate per column)."""
    z = np.zeros(grads.shape[1])
    n = np.zeros(grads.shape[1])
    w = np.zeros(grads.shape[1])
    for g, l1 in zip(grads, thresholds):
        sigma = (np.sqrt(n + g * g) - np.sqrt(n)) / alpha
        z += g - sigma * w
        n += g * g
        w = np.where(np.abs(z) <= l1, 0.0, -(z - np.sign(z) * l1) / ((beta + np.sqrt(n)) / alpha))
    return w


def test_ftrl_steps_follow_the_published_update():
    from streammn.logistic.online import ALPHA, BETA, _ftrl_step

    rng = np.random.default_rng(7)
    grads = rng.normal(0, 1, (30, 5))
    thresholds = np.abs(rng.normal(0, 2, 30))
    z, n, w = (np.zeros((2, 5)) for _ in range(3))  # row 0 an input, row 1 the intercept
    free = np.ones((1, 5), dtype=bool)
    for g, l1 in zip(grads, thresholds):
        _ftrl_step(z, n, w, np.vstack([g, g]), np.full(5, l1), free, ALPHA, BETA)
    np.testing.assert_allclose(w[0], reference_ftrl(grads, thresholds, ALPHA, BETA), atol=1e-12)
    np.testing.assert_allclose(w[1], reference_ftrl(grads, 0 * thresholds, ALPHA, BETA), atol=1e-12)


def test_online_conditionals_approach_the_true_ones_on_a_long_stream():
    from streammn.logistic.online import OnlineConditionals

    rng = np.random.default_rng(11)
    schema = Schema.from_cardinalities(CARDS)
    coding = Coding(schema)
    h, theta = pairwise_mrf(rng, CARDS)
    rows = all_rows(schema)
    scores = np.array([mrf_log_score(h, theta, r) for r in rows])
    p = np.exp(scores - scores.max())
    data = rows[rng.choice(len(rows), 60_000, p=p / p.sum())]
    online = OnlineConditionals(coding)
    online.update(data[:50_000])
    test = data[50_000:]
    truth = coding.log_conditionals(test, *mrf_as_regressions(coding, h, theta)).mean(axis=0)
    learned = coding.log_conditionals(test, *online.weights()).mean(axis=0)
    np.testing.assert_allclose(learned, truth, atol=0.01)


def test_auto_chooses_at_fixed_rows_whatever_the_cuts_and_again_at_the_end():
    from streammn.logistic.choice import choice_rows

    assert choice_rows(0, 20_000) == [4096, 8192, 16_384]
    assert choice_rows(4096, 8192) == [8192] and choice_rows(8192, 9000) == []
    schema, x = lr_data(20_000, seed=3)
    cuts = [(0, 4000), (4000, 4097), (4097, 16_384), (16_384, 16_385), (16_385, 20_000)]
    whole = learned_whole_and_cut(schema, x, cuts, "auto")
    chosen = whole.logistic_variables()
    assert chosen[3] and not chosen[0]  # chosen at row 16,384: 3 a regression, 0 a tree
    ended = DTSL.from_bytes(whole.to_bytes())
    ended.finish()  # the end's choice holds until more rows arrive ...
    ended.partial_fit(x[:10])
    whole.partial_fit(x[:10])
    # ... so a run resumed after an end continues as one run
    np.testing.assert_array_equal(ended.logistic_variables(), chosen)
    np.testing.assert_array_equal(ended.pll_terms(x[:50]), whole.pll_terms(x[:50]))
    assert ended.learned_network().features.equals(whole.learned_network().features)


def test_lr_conditionals_refuse_what_they_do_not_handle_yet_and_auto_keeps_trees():
    with pytest.raises(DTSLError, match="cpd='lr'"):
        DTSL(Schema.binary(3).with_missing(), cpd="lr")
    schema, x = lr_data(5000, seed=4)
    # drift without a half-life: the choice's sample would be of the whole stream
    auto = DTSL(schema, cpd="auto", drift="page-hinkley").partial_fit(x)
    assert not auto.logistic_variables().any()
    assert auto.conditionals() == {"lr": [], "tree": schema.names}
    with pytest.raises(DTSLError, match="cpd"):
        DTSL(Schema.binary(3), cpd="trees")
    with pytest.raises(DTSLError, match="count_pass"):
        DTSL(Schema.binary(3), cpd="auto", mode="exact").fit(np.zeros((4, 3)), count_pass=print)


def test_learn_with_lr_conditionals_from_the_command_line(tmp_path, capsys):
    schema, x = lr_data(2500, seed=2)
    data = tmp_path / "d.data"
    np.savetxt(data, x, fmt="%d", delimiter=",")
    out = tmp_path / "snaps"
    assert main(["learn", str(data), "--out", str(out), "--cpd", "lr", "--quiet"]) == 0
    manifest = json.loads(next(out.glob("snap-*/manifest.json")).read_text())
    assert manifest["learner"]["params"]["cpd"] == "lr"
    assert manifest["conditionals"] == {"lr": schema.names, "tree": []}
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    assert "conditionals: 12 logistic regressions (x0, x1," in capsys.readouterr().out
    assert main(["score", str(out), str(data), "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    learner = DTSL(schema, cpd="lr").partial_fit(x)
    learner.finish()
    assert scored["pll"] == pytest.approx(learner.to_markov_network().pll(x), abs=1e-6)


def test_the_penalty_race_ends_at_the_same_row_whatever_the_cuts_and_resumes():
    from streammn.logistic.online import MINI_BATCH, PENALTIES, RACE_ROWS, OnlineConditionals

    schema, x = lr_data(RACE_ROWS + 3000, seed=5)
    coding = Coding(schema)
    whole = OnlineConditionals(coding)
    whole.update(x)
    cut = OnlineConditionals(coding)
    for a, b in [(0, 1000), (1000, RACE_ROWS - 50), (RACE_ROWS - 50, RACE_ROWS + 70)]:
        cut.update(x[a:b])
    saved = cut.arrays()
    resumed = OnlineConditionals(coding)
    resumed.load(saved)
    for learner in (cut, resumed):
        learner.update(x[RACE_ROWS + 70 :])
        for name, value in whole.arrays().items():
            np.testing.assert_array_equal(learner.arrays()[name], value, err_msg=name)
    assert whole.choice is not None and whole.w.shape[1] == coding.n_outputs
    assert set(whole.choice.tolist()) <= set(range(len(PENALTIES)))

    racing = OnlineConditionals(coding)
    racing.update(x[: RACE_ROWS - MINI_BATCH])  # still racing: three models' columns
    assert racing.choice is None and racing.w.shape[1] == 3 * coding.n_outputs
    leading = racing.losses.argmin(axis=0)  # the race's last mini-batch is not scored
    racing.update(x[RACE_ROWS - MINI_BATCH : RACE_ROWS])
    np.testing.assert_array_equal(racing.choice, leading)


def test_ftrl_thins_late_mini_batches_by_stream_index_whatever_the_cuts():
    from streammn.logistic.online import MINI_BATCH, THIN_FROM, OnlineConditionals, learned

    index = np.arange(8 * THIN_FROM)
    kept = learned(index)
    assert kept[: 2 * THIN_FROM].all()  # in full until the stream is twice THIN_FROM long
    assert kept[2 * THIN_FROM : 4 * THIN_FROM].mean() == 0.5
    assert kept[4 * THIN_FROM :].mean() == 0.25  # each doubling adds the same steps
    boundary = 2 * THIN_FROM * MINI_BATCH
    schema, x = lr_data(boundary + 5 * MINI_BATCH + 17, seed=6)
    coding = Coding(schema)
    whole = OnlineConditionals(coding)
    whole.update(x)
    cut = OnlineConditionals(coding)
    for a, b in [(0, boundary - 1), (boundary - 1, boundary + 130), (boundary + 130, len(x))]:
        cut.update(x[a:b])
    assert whole.steps == 2 * THIN_FROM + 3 and whole.rows == boundary + 5 * MINI_BATCH
    for name, value in whole.arrays().items():
        np.testing.assert_array_equal(cut.arrays()[name], value, err_msg=name)


def test_beyond_the_batch_fits_reach_auto_keeps_the_trees_and_lr_keeps_ftrl():
    """The batch fit costs about outputs x inputs^2: 300 binary variables are within
    ``BATCH_FIT_COST``, 301 are not. There 'auto' learns trees only (FTRL's held-out losses,
    of rows it learned from, would not judge fairly) and 'lr' keeps FTRL's weights."""
    assert batch_fit_affordable(Coding(Schema.binary(300)))
    assert not batch_fit_affordable(Coding(Schema.binary(301)))
    rows = np.random.default_rng(0).integers(0, 2, (400, 301)).astype(np.uint8)
    auto = DTSL(Schema.binary(301), mode="exact").fit(rows)
    assert not auto.logistic_variables().any() and auto.conditionals()["lr"] == []
    lr = DTSL(Schema.binary(301), mode="exact", cpd="lr").fit(rows)
    assert lr._logistic.weights is None and lr._logistic.online.rows > 0  # (whole mini-batches)
    assert lr.logistic_variables().all()


def changing_chain(n_before, n_after, seed):
    """Twelve binary variables: a chain, each copying its predecessor (noisily), for
    ``n_before`` rows; then each the noisy negation of the variable six before it (the first
    six independent), for ``n_after`` rows, and 5,000 more rows of that for a test."""
    rng = np.random.default_rng(seed)

    def phase(n, shift, sign):
        x = rng.integers(0, 2, (n, 12)).astype(np.uint8)
        for j in range(shift, 12):
            logit = sign * (2.5 * x[:, j - shift] - 1.25)
            x[:, j] = rng.random(n) < 1 / (1 + np.exp(-logit))
        return x

    before, after, test = phase(n_before, 1, 1.0), phase(n_after, 6, -1.0), phase(5000, 6, -1.0)
    return Schema.binary(12), before, after, test


def test_forgetting_regressions_recover_a_changed_structure():
    """After 60,000 rows of one structure and 30,000 of another, the regressions with a
    half-life of 2,000 rows predict the new rows nearly as well as regressions learned from
    the new rows alone, and clearly better than the same learner without forgetting."""
    schema, before, after, test = changing_chain(60_000, 30_000, seed=1)
    scores = {}
    for half_life in (None, 2000.0):
        learner = DTSL(schema, cpd="lr", half_life=half_life).partial_fit(before)
        stale = learner.score(test)
        learner.partial_fit(after)
        scores[half_life] = learner.score(test)
        assert scores[half_life] > stale + 4  # both learn the new structure at all ...
    fresh = DTSL(schema, cpd="lr").partial_fit(after).score(test)
    assert scores[2000.0] > scores[None] + 0.04  # ... forgetting much sooner
    assert scores[2000.0] > fresh - 0.08
    assert scores[None] < fresh - 0.08


def test_forgetting_halves_ftrl_where_the_trees_halve_and_keeps_the_weights():
    from streammn.logistic.online import MINI_BATCH, OnlineConditionals

    schema, x = lr_data(3000, seed=7)
    coding = Coding(schema)
    plain, forgetting = OnlineConditionals(coding), OnlineConditionals(coding, interval=1000)
    plain.update(x[:1024])
    forgetting.update(x[:1024])  # the mini-batch reaching row 1,000 ends at 1,024: one halving
    np.testing.assert_array_equal(forgetting.w, plain.w)  # the weights stay at a halving
    np.testing.assert_array_equal(forgetting.n, plain.n / 2)
    assert (forgetting.column_steps == 1024 // MINI_BATCH / 2).all() and plain.steps == 8
    forgetting.update(x[1024:2048])  # rows 1,024 .. 2,047: the halving at 2,000 at 2,048
    assert (forgetting.column_steps == (8 / 2 + 8) / 2).all()
    assert not np.array_equal(forgetting.w, plain.w)


def test_forgetting_regressions_do_not_depend_on_the_cuts_and_resume_exactly():
    schema, x = lr_data(12_000, seed=8)
    settings = dict(cpd="auto", half_life=1500.0, grace_period=100)
    cuts = [(0, 1499), (1499, 1537), (1537, 4096), (4096, 4100), (4100, 9000), (9000, 12_000)]
    whole = DTSL(schema, **settings).partial_fit(x)
    cut = DTSL(schema, **settings)
    for a, b in cuts:
        cut = DTSL.from_bytes(cut.to_bytes()).partial_fit(x[a:b])  # saved and resumed each time
    assert whole.equals(cut) and whole.to_bytes() == cut.to_bytes()
    assert whole._logistic.interval == 1500 and whole._logistic.online.steps == 12_000 // 128
    assert whole._logistic.sample.half_life == 1500
    assert not whole.finish() or not whole._logistic.batch_current  # no batch fit: forgetting


def test_auto_chooses_per_variable_under_forgetting_on_recent_rows():
    """x0 (an xor) is a tree's variable, x3 (a sum of eight) a regression's, and they stay so
    under forgetting: chosen every 4,096 rows (the half-life rounded up) on a sample of about
    two half-lives' rows, mostly recent."""
    from streammn.logistic.choice import choice_rows, forgetting_period

    assert forgetting_period(3000) == 4096 and forgetting_period(5000) == 8192
    assert choice_rows(4000, 13_000, every=4096) == [4096, 8192, 12_288]
    schema, x = lr_data(30_000, seed=9)
    auto = DTSL(schema, cpd="auto", half_life=3000.0).partial_fit(x)
    chosen = auto.logistic_variables()
    assert chosen[3] and not chosen[0]
    sample = auto._logistic.sample
    assert sample.capacity == 2 * 3000 and sample.size == sample.capacity
    age = 30_000 - sample.index  # mostly recent: half within 1.4 half-lives, 95% within 5
    assert np.median(age) < 1.4 * 3000 and np.mean(age > 5 * 3000) < 0.06
    weights = auto._logistic.held_out_weights()
    held = auto._logistic.sample.index[auto._logistic._held_out_slots()]
    np.testing.assert_array_equal(weights, 0.5 ** (10 - held // 3000))


def test_drift_restarts_the_regressions_of_alarmed_variables_which_recover():
    """The changing chain of the forgetting test: with drift detection, the variables whose
    trees alarm relearn their regressions from the buffered rows since the change and the rows
    after the alarm, and 30,000 rows after the change they predict nearly as well as
    regressions of the new rows alone."""
    schema, before, after, test = changing_chain(60_000, 30_000, seed=1)
    plain = DTSL(schema, cpd="lr").partial_fit(before).partial_fit(after).score(test)
    drifting = DTSL(schema, cpd="lr", drift="page-hinkley").partial_fit(before)
    restarted = drifting._logistic.online.column_steps.copy()
    assert (restarted == drifting._logistic.online.steps).all()  # no alarm before the change
    drifting.partial_fit(after[:2000])  # the alarms come at the end of row 62,000
    events = drifting._drift.events
    alarmed = np.unique(events[events[:, 2] == 0, 1])
    assert 5 <= alarmed.size < 12 and 0 not in alarmed  # x0 is independent throughout
    assert (events[events[:, 2] == 0, 0] == 62_000).all()
    # restarted and relearned from the buffered rows since the estimated change point
    since = drifting._drift.calm_row[alarmed].max()
    assert since == 60_000
    steps = drifting._logistic.online.column_steps
    columns_of = drifting._logistic.coding.out_var
    assert (steps[np.isin(columns_of, alarmed)] == 2000 // 128).all()
    assert (steps[~np.isin(columns_of, alarmed)] == drifting._logistic.online.steps).all()
    drifting.partial_fit(after[2000:])
    fresh = DTSL(schema, cpd="lr").partial_fit(after).score(test)
    score = drifting.score(test)
    assert score > plain + 0.05 and score > fresh - 0.05


def test_drift_regressions_do_not_depend_on_the_cuts_and_resume_exactly_across_alarms():
    schema, before, after, _ = changing_chain(20_000, 8_000, seed=2)
    x = np.concatenate([before, after])
    whole = DTSL(schema, cpd="lr", drift="page-hinkley").partial_fit(x)
    assert (whole._drift.events[:, 2] == 0).sum() > 0  # alarms in the run
    cut = DTSL(schema, cpd="lr", drift="page-hinkley")
    for a, b in [(0, 999), (999, 1001), (1001, 19_950), (19_950, 20_500), (20_500, 28_000)]:
        cut = DTSL.from_bytes(cut.to_bytes()).partial_fit(x[a:b])
    assert whole.to_bytes() == cut.to_bytes()
    assert not whole.finish()  # no batch fit under drift: FTRL's weights stay
