"""Edge grafting: BP vs exact enumeration, objective gradients, activation score and C2,
best-choice bookkeeping on scripted scores, strategies on planted MRFs, state round trips."""

import numpy as np
import pytest

from streammn import Schema
from streammn.grafting import EdgeGrafting, GraftingStateError, scale_free_mrf
from streammn.grafting.activation import (
    BestChoice,
    EdgeReservoir,
    activation_scores,
    passes_c2,
    violation_offset,
)
from streammn.grafting.bp import belief_propagation
from streammn.grafting.mrf import PairwiseLayout, to_markov_network
from streammn.grafting.objective import GraftingObjective, pseudo_loglik
from streammn.grafting.synthetic import SyntheticMRF

CARDS = [2, 3, 4, 2, 3]
TREE = [(0, 1), (1, 2), (1, 3), (3, 4)]
LOOPY = [(0, 1), (1, 2), (0, 2), (2, 3), (3, 4), (1, 4)]


def exact_marginals(cards, edges, theta):
    layout = PairwiseLayout(cards, edges)
    mn = to_markov_network(Schema.from_cardinalities(cards), layout, theta)
    states, p = mn.joint()
    out = np.concatenate(mn.marginals())
    pairs = []
    for i, j in edges:
        m = np.zeros((cards[i], cards[j]))
        np.add.at(m, (states[:, i], states[:, j]), p)
        pairs.append(m.ravel())
    return np.concatenate([out] + pairs), mn.log_partition()


@pytest.mark.parametrize("damping", [0.0, 0.5])
def test_bp_is_exact_on_trees(damping):
    rng = np.random.default_rng(0)
    layout = PairwiseLayout(CARDS, TREE)
    theta = rng.normal(size=layout.size)
    res = belief_propagation(layout, theta, damping=damping, tol=1e-10, max_iter=500)
    exact, log_z = exact_marginals(CARDS, TREE, theta)
    assert res.converged
    np.testing.assert_allclose(res.marginals, exact, atol=1e-7)
    assert res.log_z == pytest.approx(log_z, abs=1e-7)


def test_bp_is_close_on_a_small_loopy_graph():
    rng = np.random.default_rng(1)
    layout = PairwiseLayout(CARDS, LOOPY)
    theta = 0.4 * rng.normal(size=layout.size)
    res = belief_propagation(layout, theta, tol=1e-9, max_iter=1000)
    exact, log_z = exact_marginals(CARDS, LOOPY, theta)
    assert res.converged
    assert np.abs(res.marginals - exact).max() < 0.02
    assert abs(res.log_z - log_z) < 0.05


def test_to_markov_network_scores_rows_like_the_tables():
    rng = np.random.default_rng(2)
    layout = PairwiseLayout(CARDS, LOOPY)
    theta = rng.normal(size=layout.size)
    mn = to_markov_network(Schema.from_cardinalities(CARDS), layout, theta)
    rows = np.stack([rng.integers(0, c, 50) for c in CARDS], axis=1).astype(np.uint8)
    by_hand = theta[layout.uoff[:-1] + rows].sum(axis=1)
    for k, (i, j) in enumerate(LOOPY):
        by_hand += theta[layout.eoff[k] + rows[:, i] * CARDS[j] + rows[:, j]]
    np.testing.assert_allclose(mn.log_score(rows), by_hand)
    np.testing.assert_allclose(pseudo_loglik(layout, theta, rows), mn.pll_terms(rows), atol=1e-9)


def finite_difference(f, x, h=1e-6):
    g = np.empty_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = h
        g[k] = (f(x + e)[0] - f(x - e)[0]) / (2 * h)
    return g


@pytest.mark.parametrize("kind", ["likelihood", "pseudo"])
def test_objective_gradient_matches_finite_differences(kind):
    rng = np.random.default_rng(3)
    layout = PairwiseLayout(CARDS, TREE)
    theta = rng.normal(size=layout.size)
    rows = np.stack([rng.integers(0, c, 40) for c in CARDS], axis=1).astype(np.uint8)
    data = rng.random(layout.size)
    obj = GraftingObjective(
        layout, data, lambda_=0.05, lambda2=0.1, kind=kind, rows=rows, tol=1e-12, max_iter=1000
    )
    _, grad = obj(theta)
    np.testing.assert_allclose(grad, finite_difference(obj, theta), atol=1e-5)


def test_likelihood_objective_is_exact_negative_log_likelihood_on_trees():
    rng = np.random.default_rng(4)
    layout = PairwiseLayout(CARDS, TREE)
    theta = rng.normal(size=layout.size)
    rows = np.stack([rng.integers(0, c, 30) for c in CARDS], axis=1).astype(np.uint8)
    mn = to_markov_network(Schema.from_cardinalities(CARDS), layout, theta)
    data = np.zeros(layout.size)
    for v in range(len(CARDS)):
        np.add.at(data, layout.uoff[v] + rows[:, v], 1.0)
    for k, (i, j) in enumerate(TREE):
        np.add.at(data, layout.eoff[k] + rows[:, i] * CARDS[j] + rows[:, j], 1.0)
    obj = GraftingObjective(
        layout, data / len(rows), lambda_=0.0, lambda2=0.0, tol=1e-12, max_iter=1000
    )
    value, _ = obj(theta)
    assert value == pytest.approx(-mn.log_probability(rows).mean(), abs=1e-8)


def test_activation_score_and_c2_by_hand():
    # node marginals (.5, .5) and (.25, .75); data table [[3, 1], [1, 3]] over 8 rows:
    # model - data = [[.125-.375, .375-.125], [.125-.125, .375-.375]], norm sqrt(.125), / 4
    model = np.outer([0.5, 0.5], [0.25, 0.75]).ravel()
    s = activation_scores(
        np.array([[0, 1]]),
        [2, 2],
        model,
        np.array([0, 4]),
        np.array([3, 1, 1, 3]),
        np.array([0, 4]),
        np.array([8]),
    )
    expected = np.sqrt(0.125) / 4
    assert s[0] == pytest.approx(expected)
    assert passes_c2(s[0], 0.08) and not passes_c2(s[0], 0.09)
    assert violation_offset(s[0], 0.1) == pytest.approx(1 - expected / 0.1)


class ScriptedContext:
    """A strategy context whose scores come from a dict."""

    def __init__(self, scores, n_vars, lambda_):
        self.scores, self.n_vars, self.strength = dict(scores), n_vars, lambda_
        self.active, self.rng, self.tested = set(), np.random.default_rng(0), []

    def degrees(self):
        d = np.zeros(self.n_vars)
        for i, j in self.active:
            d[i] += 1
            d[j] += 1
        return d

    def score_pairs(self, pairs):
        pairs = np.asarray(pairs).reshape(-1, 2)
        self.tested.extend(map(tuple, pairs.tolist()))
        return pairs, np.array([self.scores[tuple(p)] for p in pairs.tolist()])


def scripted(order_scores, capacity=2, t_max=3, threshold=0.0, lambda_=1.5):
    ctx = ScriptedContext(dict(order_scores), 4, lambda_)
    bc = BestChoice(4, ctx.rng, capacity=capacity, t_max=t_max, threshold=threshold, hubs=False)
    for k, (e, _) in enumerate(order_scores):  # script the stream order through priorities
        bc.queue.push(e, -10 + k)
    return ctx, bc


STREAM = [((0, 2), 1.0), ((1, 3), 0.5), ((0, 3), 3.0), ((2, 3), 2.0), ((1, 2), 4.0), ((0, 1), 5.0)]


def test_first_round_fills_the_reservoir_then_tau_selects():
    ctx, bc = scripted(STREAM)
    bc.test_edges(ctx)
    # t_max = 3 tests, then continue until R (capacity 2) is full in the first round
    assert ctx.tested == [(0, 2), (1, 3), (0, 3), (2, 3)]
    assert bc.reservoir.scores == {(0, 3): 3.0, (2, 3): 2.0}
    assert bc.frozen.offsets == pytest.approx({(0, 2): 1 - 1 / 1.5, (1, 3): 1 - 0.5 / 1.5})
    assert bc.reservoir.tau(0.0) == pytest.approx(2.5)
    assert bc.reservoir.tau(1.0) == pytest.approx(3.0)
    assert bc.reservoir.tau(0.5) == pytest.approx(2.75)
    assert bc.select(limit=10) == [(0, 3)]  # 2.0 < tau_0 = mean
    assert bc.reservoir.scores == {(2, 3): 2.0}


def test_eviction_refill_and_rescoring():
    ctx, bc = scripted(STREAM)
    bc.test_edges(ctx)
    bc.select(limit=10)
    ctx.tested.clear()
    bc.test_edges(ctx)
    # (1,2) joins R; (0,1) evicts the minimum (2,3) into L; queue empty -> refill from L,
    # lowest offset first: (2,3) (offset < 0) is re-tested and rejected by the full R
    assert ctx.tested == [(1, 2), (0, 1), (2, 3)]
    assert bc.reservoir.scores == {(1, 2): 4.0, (0, 1): 5.0}
    assert set(bc.frozen.offsets) == {(2, 3)}
    assert bc.frozen.offsets[(2, 3)] == pytest.approx(1 - 2 / 1.5)
    assert bc.queue.priority((0, 2)) == pytest.approx(1 - 1 / 1.5)
    # after an optimisation (1,2) no longer passes C2: it is dropped to L
    ctx.scores[(1, 2)] = 1.0
    bc.after_optimisation(ctx)
    assert bc.reservoir.scores == {(0, 1): 5.0}
    assert bc.frozen.offsets[(1, 2)] == pytest.approx(1 - 1 / 1.5)


def test_select_skips_adjacent_edges_and_respects_limit():
    bc = BestChoice(5, np.random.default_rng(0), capacity=5, t_max=1, threshold=0.0, hubs=False)
    bc.reservoir.scores = {(0, 1): 5.0, (1, 2): 4.9, (2, 3): 4.8, (0, 4): 1.0}
    assert bc.select(limit=10) == [(0, 1), (2, 3)]  # tau = mean = 3.925; (1,2) is adjacent
    bc.reservoir.scores = {(0, 1): 5.0, (2, 3): 4.8}
    assert bc.select(limit=1) == [(0, 1)]


def test_reservoir_keeps_the_best_scores():
    r = EdgeReservoir(2)
    assert r.offer((0, 1), 1.0) is None and r.offer((0, 2), 3.0) is None
    assert r.offer((0, 3), 2.0) == ((0, 1), 1.0)
    assert r.offer((1, 2), 0.5) == ((1, 2), 0.5)
    assert r.scores == {(0, 2): 3.0, (0, 3): 2.0}


def test_hub_heuristic_raises_priority_of_hub_edges():
    ctx = ScriptedContext({}, 6, 1.0)
    ctx.active = {(0, 1), (0, 2)}
    bc = BestChoice(6, ctx.rng, capacity=2, t_max=1, threshold=0.0, c_hat=0.3)
    bc.reorganise(ctx)  # centrality of 0: 2/5 > 0.3
    assert {e for e in [(0, 3), (0, 4), (0, 5)] if bc.queue.priority(e) == -1.0} == {
        (0, 3),
        (0, 4),
        (0, 5),
    }
    assert bc.queue.priority((1, 2)) is None and bc.queue.priority((0, 1)) is None


@pytest.fixture(scope="module")
def planted():
    """A 7-variable, 3-state tree MRF with strong (diagonal) edges and its data."""
    edges = np.array([(0, 1), (1, 2), (1, 3), (3, 4), (4, 5), (2, 6)])
    schema = Schema.from_cardinalities([3] * 7)
    layout = PairwiseLayout(schema.cardinalities, edges)
    rng = np.random.default_rng(5)
    theta = np.concatenate(
        [0.2 * rng.normal(size=int(layout.uoff[-1])), np.tile(2.0 * np.eye(3).ravel(), len(edges))]
    )
    mrf = SyntheticMRF(schema, layout, theta)
    return mrf, mrf.sample(3000, seed=1, burn_in=50, chains=4)


@pytest.mark.parametrize("strategy", ["exhaustive", "first_hit", "best_choice"])
def test_every_strategy_recovers_strong_planted_edges(planted, strategy):
    mrf, rows = planted
    g = EdgeGrafting(mrf.schema, lambda_=0.02, lambda2=0.001, strategy=strategy, seed=0)
    g.fit(rows)
    assert mrf.edges <= set(g.edges)
    if strategy == "exhaustive":  # greedy: true edges first
        assert set(g.edges[: len(mrf.edges)]) == mrf.edges
        assert g.fraction_pairs_counted == 1.0


def test_pseudo_likelihood_objective_recovers_planted_edges(planted):
    mrf, rows = planted
    g = EdgeGrafting(mrf.schema, lambda_=0.02, lambda2=0.001, objective="pseudo", seed=0)
    g.fit(rows)
    assert mrf.edges <= set(g.edges)
    assert g.to_markov_network().pll(rows) > EdgeGrafting(
        mrf.schema, lambda_=0.02, max_edges=0
    ).fit(rows).to_markov_network().pll(rows)


def test_exhaustive_and_unlimited_best_choice_choose_the_same_first_edge():
    mrf = scale_free_mrf(12, states=3, seed=3)
    rows = mrf.sample(2000, seed=4, burn_in=50, chains=4)
    ex = EdgeGrafting(mrf.schema, lambda_=1e-3, strategy="exhaustive", max_edges=1).fit(rows)
    bc = EdgeGrafting(
        mrf.schema,
        lambda_=1e-3,
        strategy="best_choice",
        threshold=1.0,
        reservoir_size=100,
        t_max=100,
        hubs=False,
        max_edges=1,
    ).fit(rows)
    assert len(ex.edges) == 1 and ex.edges == bc.edges


def test_streaming_state_round_trip_continues_identically(planted):
    mrf, rows = planted
    params = dict(lambda_=0.02, lambda2=0.001, update_every=1000, steps_per_update=2, seed=3)
    a = EdgeGrafting(mrf.schema, **params)
    b = EdgeGrafting(mrf.schema, **params)
    for k in range(0, 2000, 500):
        a.partial_fit(rows[k : k + 500])
        b.partial_fit(rows[k : k + 500])
    b = EdgeGrafting.from_bytes(b.to_bytes())
    assert "EdgeGrafting(" in repr(b) and b.get_params() == a.get_params()
    for k in range(2000, 3000, 500):
        a.partial_fit(rows[k : k + 500])
        b.partial_fit(rows[k : k + 500])
    assert a.edges == b.edges and len(a.edges) > 0
    np.testing.assert_allclose(a.theta, b.theta)
    mn = a.to_markov_network()
    np.testing.assert_allclose(mn.pll_terms(rows[:100]), a.pll_terms(rows[:100]), atol=1e-9)
    with pytest.raises(GraftingStateError):
        EdgeGrafting.from_bytes(b"not a state")


def test_scale_free_generator_shapes():
    mrf = scale_free_mrf(30, states=5, seed=0)
    assert len(mrf.edges) == 2 * 30 - 4
    deg = np.bincount(np.array(sorted(mrf.edges)).ravel(), minlength=30)
    assert deg.min() >= 2 and deg.max() >= 6  # preferential attachment makes hubs
    rows = mrf.sample(200, seed=0, burn_in=10, thin=2, chains=3)
    assert rows.shape == (200, 30) and rows.max() <= 4
    np.testing.assert_array_equal(rows, mrf.sample(200, seed=0, burn_in=10, thin=2, chains=3))


CLIMB_SCORES = {
    (0, 1): 5.0,
    (0, 2): 3.0,
    (0, 3): 0.1,
    (0, 4): 0.1,
    (1, 2): 0.1,
    (1, 3): 4.5,
    (1, 4): 0.1,
    (2, 3): 0.1,
    (2, 4): 1.6,
    (3, 4): 2.9,
}


def test_edges_climbed_away_from_go_back_to_the_queue():
    ctx = ScriptedContext(CLIMB_SCORES, 5, 1.5)
    bc = BestChoice(
        5, ctx.rng, capacity=5, t_max=1, threshold=0.0, hubs=False, climb=True, admit=False
    )
    bc.reservoir.scores = {(0, 2): 3.0, (3, 4): 2.9, (2, 4): 1.6}  # tau_0 = mean = 2.5
    # (0, 2) climbs to (0, 1); (3, 4) climbs via (1, 3) to (0, 1) too, already chosen
    assert bc.select(limit=10, ctx=ctx) == [(0, 1)]
    # both still violate C2: queued with their (negative) violation offsets, tested first
    assert bc.queue.priority((0, 2)) == pytest.approx(1 - 3.0 / 1.5)
    assert bc.queue.priority((3, 4)) == pytest.approx(1 - 2.9 / 1.5)
    assert bc.queue.pop() == (0, 2) and bc.queue.pop() == (3, 4)
    assert bc.reservoir.scores == {(2, 4): 1.6}


def test_pairs_a_climb_scores_that_pass_c2_join_the_reservoir():
    ctx = ScriptedContext(CLIMB_SCORES, 5, 1.5)
    bc = BestChoice(5, ctx.rng, capacity=5, t_max=1, threshold=0.0, hubs=False, climb=True)
    bc.frozen.freeze((1, 3), -2.0)
    bc.queue.push((3, 4), -5.0)
    bc.reservoir.scores = {(0, 2): 3.0, (2, 4): 1.6}  # tau_0 = mean = 2.3
    # (0, 2) climbs to (0, 1), scoring every pair at 0, 1 or 2: the passing ones join R,
    # (1, 3) leaving L; the climbed-away (0, 2) is back in R (scored from (0, 1)), not queued
    assert bc.select(limit=10, ctx=ctx) == [(0, 1)]
    assert bc.reservoir.scores == {(0, 2): 3.0, (1, 3): 4.5, (2, 4): 1.6}
    assert not bc.frozen.offsets and bc.queue.priority((0, 2)) is None
    # a full reservoir: an admitted pair evicts the minimum into L (or is frozen itself); a
    # queued pair leaves the queue when a climb admits it; the climbed-away edge is queued
    bc = BestChoice(5, ctx.rng, capacity=2, t_max=1, threshold=1.0, hubs=False, climb=True)
    bc.queue.push((3, 4), -5.0)
    bc.reservoir.scores = {(2, 4): 1.6}
    # (2, 4) -> (0, 2) -> (0, 1); R takes (0, 2), (3, 4), then (0, 1) evicts (3, 4), (2, 4)
    # is rejected, (1, 3) evicts (0, 2)
    assert bc.select(limit=10, ctx=ctx) == [(0, 1)]
    assert bc.reservoir.scores == {(1, 3): 4.5}
    assert bc.frozen.offsets == pytest.approx({(3, 4): 1 - 2.9 / 1.5, (0, 2): 1 - 3.0 / 1.5})
    assert bc.queue.priority((3, 4)) is None and (3, 4) in bc.queue.seen
    assert bc.queue.priority((2, 4)) == pytest.approx(1 - 1.6 / 1.5)


@pytest.mark.slow
def test_climb_admissions_keep_the_graph_and_need_fewer_rounds(monkeypatch):
    from streammn.grafting import planted_potts

    mrf = planted_potts("random", 24, states=3, coupling=(0.8, 1.5), seed=2)
    rows = mrf.sample(4000, seed=3, burn_in=100, thin=2, chains=4)
    admitting = EdgeGrafting(mrf.schema).fit(rows)
    make = EdgeGrafting._make_strategy

    def without_admissions(self):
        strategy = make(self)
        strategy.admit = False
        return strategy

    monkeypatch.setattr(EdgeGrafting, "_make_strategy", without_admissions)
    moving_only = EdgeGrafting(mrf.schema).fit(rows)
    assert set(admitting.edges) == set(moving_only.edges) == mrf.edges
    assert admitting.steps < moving_only.steps
