"""Logistic-regression conditionals: the L1 fit against scikit-learn, their CPDs through DN2MN
against brute force, and DTSL's ``cpd='lr'`` / ``'auto'`` (cut and resume identity, the choice)."""

import json

import numpy as np
import pytest

from helpers.helpers_mn import all_rows, brute_joint
from streammn import Schema
from streammn.dn import DependencyNetwork
from streammn.dn.conversion import dn2mn
from streammn.cli import main
from streammn.dtsl import DTSL
from streammn.errors import DTSLError
from streammn.logistic.batch import Problem, fit_l1
from streammn.logistic.coding import Coding

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


def objective(problem, lam, W, b):
    return float(
        (problem.losses(W, b) + lam * np.abs(W).sum(axis=0)[problem.coding.out_start[:-1]]).sum()
    )


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
        DTSL(Schema.binary(3), cpd="lr", drift="page-hinkley")
    schema, x = lr_data(5000, seed=4)
    for settings in ({"drift": "page-hinkley"}, {"half_life": 1000.0}):
        auto = DTSL(schema, cpd="auto", **settings).partial_fit(x)
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
