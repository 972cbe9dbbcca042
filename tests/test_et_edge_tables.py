"""Edge tables learned with beta (Eq. 7, MAP): gradient, constraints, likelihood, monotone fit."""

import itertools

import numpy as np

from streammn import Schema
from streammn.et import EnsembleOfTrees, ETDensity
from streammn.et.edge_tables import EdgeTables, learn_jointly, map_objective
from streammn.et.kernels import cell_resistance_sums, ratio_table
from helpers.helpers_mn import noisy_chain_rows
from test_et import all_spanning_trees

CARDS = np.array([2, 3, 2, 3])


def independent_model(rng, cards):
    m, k = len(cards), int(cards.max())
    node = np.ones((m, k))
    for u in range(m):
        node[u, : cards[u]] = rng.dirichlet(np.full(cards[u], 3.0))
    pair = np.ones((m, m, k, k))
    for u in range(m):
        for v in range(m):
            pair[u, v, : cards[u], : cards[v]] = np.outer(node[u, : cards[u]], node[v, : cards[v]])
    return node, pair


def dependent_rows(rng, cards, n):
    return noisy_chain_rows(rng, cards, n, p_copy=0.6)


def random_beta(rng, m):
    a = rng.uniform(0.2, 1.0, (m, m))
    beta = (a + a.T) / 2
    np.fill_diagonal(beta, 0)
    return beta / np.triu(beta, 1).sum()


def test_phi_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    node, base = independent_model(rng, CARDS)
    rows = dependent_rows(rng, CARDS, 40)
    beta = random_beta(rng, len(CARDS))
    beta[0, 2] = beta[2, 0] = 0.0  # a pair with only the prior's gradient
    tables = EdgeTables(node, CARDS, pseudo_count=1.0)
    phi = rng.normal(0, 0.7, tables.mask.shape) * tables.mask
    t = tables.tables(phi)
    _, sums = cell_resistance_sums(rows, beta, ratio_table(node, tables.full(t, base)))
    grad = tables.phi_gradient(beta, t, sums, rows.shape[0])
    h = 1e-6
    pairs = list(zip(*tables.upper))
    for p, a, b in [(0, 1, 1), (1, 0, 0), (4, 2, 1), (4, 0, 2), (2, 1, 2), (3, 2, 0), (5, 1, 1)]:
        assert tables.mask[p, a, b] == 1, (pairs[p], a, b)
        plus, minus = phi.copy(), phi.copy()
        plus[p, a, b] += h
        minus[p, a, b] -= h
        fd = (
            map_objective(beta, rows, tables, tables.tables(plus), base)
            - map_objective(beta, rows, tables, tables.tables(minus), base)
        ) / (2 * h)
        np.testing.assert_allclose(grad[p, a, b], fd, rtol=1e-5, atol=1e-9)


def test_tables_start_at_the_smoothed_ones_and_the_fit_keeps_the_constraints():
    rng = np.random.default_rng(2)
    rows = dependent_rows(rng, CARDS, 300)
    learner = EnsembleOfTrees(Schema.from_cardinalities(CARDS)).fit(rows)
    node, pair = learner.theta()
    tables = EdgeTables(node, CARDS, pseudo_count=1.0)
    np.testing.assert_allclose(
        tables.full(tables.tables(tables.phi_of(pair)), pair), pair, rtol=1e-12
    )
    beta, learned, history = learn_jointly(
        learner.beta, learner.sample.rows, node, pair, CARDS, 1.0
    )
    assert len(history) > 2 and not np.allclose(learned, pair)
    for u, v in itertools.permutations(range(len(CARDS)), 2):
        t = learned[u, v, : CARDS[u], : CARDS[v]]
        assert (t > 0).all()
        np.testing.assert_allclose(t.sum(axis=1), node[u, : CARDS[u]], atol=1e-12)
        np.testing.assert_allclose(t.sum(axis=0), node[v, : CARDS[v]], atol=1e-12)
        np.testing.assert_array_equal(t, learned[v, u, : CARDS[v], : CARDS[u]].T)
    np.testing.assert_allclose(beta.sum(), 2.0)


def test_joint_fit_increases_the_objective_monotonically_past_the_plug_in_fit():
    rng = np.random.default_rng(3)
    rows = dependent_rows(rng, np.array([2] * 6), 200)
    learner = EnsembleOfTrees(Schema.from_cardinalities([2] * 6)).fit(rows)
    node, pair = learner.theta()
    _, _, history = learn_jointly(
        learner.beta, learner.sample.rows, node, pair, [2] * 6, 1.0, tol=1e-6
    )
    assert (np.diff(history) > 0).all()
    assert history[-1] > history[0] + 1e-3


def test_learned_model_likelihood_matches_brute_force():
    rng = np.random.default_rng(4)
    cards = CARDS
    m = len(cards)
    learner = EnsembleOfTrees(Schema.from_cardinalities(cards), learn_theta=True).fit(
        dependent_rows(rng, cards, 200)
    )
    density = learner.density()
    beta, node, pair = density.beta, density.node_probs, density.pair_probs
    assert not np.allclose(pair, learner.theta()[1])  # the learned tables, not the smoothed ones
    trees = list(all_spanning_trees(m))
    z = sum(np.prod([beta[u, v] for u, v in t]) for t in trees)
    states = np.array(list(itertools.product(*[range(c) for c in cards])))
    want = []
    for x in states:
        p = 0.0
        for t in trees:
            px = np.prod(node[np.arange(m), x])
            for u, v in t:
                px *= pair[u, v, x[u], x[v]] / (node[u, x[u]] * node[v, x[v]])
            p += np.prod([beta[u, v] for u, v in t]) / z * px
        want.append(np.log(p))
    got = density.log_likelihood(states)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    np.testing.assert_allclose(np.exp(got).sum(), 1.0, rtol=1e-9)


def test_learner_option_state_round_trip_and_streaming_phases():
    rng = np.random.default_rng(5)
    cards = np.array([2] * 5)
    rows = dependent_rows(rng, cards, 600)
    schema = Schema.from_cardinalities(cards)
    learner = EnsembleOfTrees(schema, learn_theta=True, update_every=250)
    learner.partial_fit(rows[:400])
    state = learner.to_bytes()
    resumed = EnsembleOfTrees.from_bytes(state)
    assert resumed.to_bytes() == state
    np.testing.assert_array_equal(resumed.density().pair_probs, learner.density().pair_probs)
    learner.partial_fit(rows[400:])
    resumed.partial_fit(rows[400:])
    assert resumed.to_bytes() == learner.to_bytes()
    density = ETDensity.from_bytes(learner.snapshot_files()["model.et"])
    np.testing.assert_array_equal(density.pair_probs, learner.current_theta()[1])  # 600 rows
    assert learner.learned_pair_probs is not None  # the last phase's, at 500 rows
    assert learner.to_markov_network() is not None
