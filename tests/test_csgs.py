"""CSGS: chi-square against scipy, feature generation on the paper's examples, recovery of the
planted context-specific structure, test counts, cut independence, state round trips."""

import itertools

import numpy as np
import pytest
from scipy.stats import chi2, chi2_contingency

from helpers.helpers_mn import holds, random_featureset
from streammn import Schema
from streammn.csgs import CSGS, CSGSError, CSGSStateError, pearson_test
from streammn.csgs.canonical import CanonicalModel, learn_canonical_model, maximal_cliques
from streammn.csgs.pll import fit_pattern_weights, noise_tolerance
from streammn.csgs.synthetic import context_specific_network, kl_divergence, sample_rows
from streammn.network.model import MarkovNetwork
from streammn.network.weights import WeightLearningError, fit_weights, pll_objective


# chi-square ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,seed", [((2, 2), 0), ((3, 4), 1), ((4, 2), 2), ((5, 5), 3)])
def test_chi_square_matches_scipy(shape, seed):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        table = rng.integers(1, 40, size=shape)
        if rng.random() < 0.5:  # a dependent table
            table[0, 0] += 60
        ours = pearson_test(table, min_rows_per_cell=0)
        stat, p, dof, _ = chi2_contingency(table, correction=False)
        assert ours["statistic"] == pytest.approx(stat, rel=1e-10)
        assert ours["dof"] == dof and ours["p_value"] == pytest.approx(p, rel=1e-8, abs=1e-300)
        assert ours["verdict"] == ("dependent" if p < 0.05 else "independent")


def test_empty_rows_and_columns_lower_the_degrees_of_freedom():
    table = np.array([[30, 5, 0, 12], [0, 0, 0, 0], [8, 25, 0, 9]])
    ours = pearson_test(table, min_rows_per_cell=0)
    stat, p, dof, _ = chi2_contingency(table[[0, 2]][:, [0, 1, 3]], correction=False)
    assert (ours["dof"], ours["statistic"]) == (dof, pytest.approx(stat))
    assert ours["p_value"] == pytest.approx(p)


def test_degenerate_and_sparse_tables():
    # one variable constant in the context: no degree of freedom, independence
    assert pearson_test(np.array([[50, 70], [0, 0]]))["verdict"] == "independent"
    # a clear dependence on too few rows per cell (19 < 5 * 4) is not trusted
    sparse = np.array([[9, 0], [0, 10]])
    assert pearson_test(sparse)["verdict"] == "unreliable"
    assert pearson_test(sparse, min_rows_per_cell=4)["verdict"] == "dependent"
    assert pearson_test(np.zeros((2, 2)))["verdict"] == "independent"


# feature generation (paper Sections 2.2 and 4.1) --------------------------------------------
def canonical(contexts, edge_lists, n):
    adj = np.zeros((len(contexts), n, n), dtype=bool)
    for k, edges in enumerate(edge_lists):
        for a, b in edges:
            adj[k, a, b] = adj[k, b, a] = True
    return CanonicalModel(Schema.binary(n), np.array(contexts, dtype=np.uint8), adj, 0, 0, 0, 0, 0)


def feature_sets(fs):
    return {
        tuple(
            (int(v), int(a))
            for v, a in zip(fs.var[fs.ptr[f] : fs.ptr[f + 1]], fs.val[fs.ptr[f] : fs.ptr[f + 1]])
        )
        for f in range(fs.n_features)
    }


def test_features_of_the_section_4_canonical_model():
    """Section 4.1: G(x_w = 0) complete, G(x_w = 1) a star on w (w = 0, n = 4). Each maximal
    clique instantiated by its context is one feature; shared cliques are kept once."""
    complete = list(itertools.combinations(range(4), 2))
    star = [(0, 1), (0, 2), (0, 3)]
    model = canonical([[0, 1, 0, 1], [1, 0, 1, 1], [1, 0, 0, 1]], [complete, star, star], 4)
    assert feature_sets(model.features()) == {
        ((0, 0), (1, 1), (2, 0), (3, 1)),
        ((0, 1), (1, 0)),
        ((0, 1), (2, 1)),
        ((0, 1), (3, 1)),
        ((0, 1), (2, 0)),
    }
    assert model.max_degree == 3 and model.features().eq.all()


def test_features_encode_a_context_specific_independence():
    """Section 2.2: I(X_a, X_b | x_w) holds in the features iff no feature with X_w = x_w
    mentions both a and b. Contexts with x_2 = 1 separate 0 and 1; those with x_2 = 0 join
    them."""
    model = canonical([[0, 0, 1], [1, 1, 1], [1, 0, 0]], [[(0, 2), (1, 2)]] * 2 + [[(0, 1)]], 3)
    features = feature_sets(model.features())
    with_context = [f for f in features if (2, 1) in f]
    assert with_context and all({0, 1} - {v for v, _ in f} for f in with_context)
    assert ((0, 1), (1, 0)) in features


def test_maximal_cliques_against_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(1, 8))
        upper = np.triu(rng.random((n, n)) < 0.5, 1)
        adj = upper | upper.T
        cliques = set()
        for size in range(1, n + 1):
            for c in itertools.combinations(range(n), size):
                if all(adj[a, b] for a, b in itertools.combinations(c, 2)):
                    cliques.add(c)
        maximal = {c for c in cliques if not any(set(c) < set(d) for d in cliques)}
        assert set(maximal_cliques(adj)) == maximal


# learning -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def planted():
    true = context_specific_network(5, seed=0)
    return true, sample_rows(true, 20000, seed=100)


def test_planted_context_specific_structure_is_recovered(planted):
    """With x_w = 1 every graph is the star on w; with x_w = 0 the graphs of the contexts with
    enough rows are complete, and rare ones keep most pairs; the single-graph ablation finds
    the complete graph."""
    true, rows = planted
    learner = CSGS(true.schema).fit(rows)
    cm = learner.canonical_
    star = {(0, v) for v in range(1, 5)}
    among = set(itertools.combinations(range(1, 5), 2))
    complete = set(itertools.combinations(range(5), 2))
    count = {bytes(p): c for p, c in zip(learner.counts.patterns, learner.counts.counts)}
    ones = [cm.edges(i) for i in range(len(cm.contexts)) if cm.contexts[i, 0] == 1]
    zeros = [(cm.edges(i), count[bytes(x)]) for i, x in enumerate(cm.contexts) if x[0] == 0]
    assert len(ones) == len(zeros) == 16
    assert all(e == star for e in ones)
    assert all(e == complete for e, c in zeros if c >= 150)
    assert np.mean([len(among & e) / len(among) for e, _ in zeros]) > 0.9
    ablation = CSGS(true.schema, context_specific=False).fit(rows)
    assert ablation.canonical_.edges(0) == set(itertools.combinations(range(5), 2))
    # few rows per pattern here: both reach the true distribution closely
    assert kl_divergence(true, learner.to_markov_network()) < 0.005


def test_context_specific_beats_one_graph_on_more_variables():
    true = context_specific_network(8, seed=8000)
    rows = sample_rows(true, 10000, seed=8001)
    csgs = CSGS(true.schema).fit(rows).to_markov_network()
    gs = CSGS(true.schema, context_specific=False).fit(rows).to_markov_network()
    assert kl_divergence(true, csgs) < kl_divergence(true, gs)


def test_repeated_grow_finds_a_neighbour_hidden_at_first():
    """X_0 and X_2 are (almost) marginally independent here but conditionally dependent: the
    single grow pass of Algorithm 2 tests them first with small blankets and misses the edge;
    repeating the grow pass finds it."""
    true = context_specific_network(6, seed=6007)
    rows = sample_rows(true, 100000, seed=6008)
    one = CSGS(true.schema, context_specific=False).fit(rows)
    again = CSGS(true.schema, context_specific=False, repeat_grow=True).fit(rows)
    assert (0, 2) not in one.canonical_.edges(0)
    assert again.canonical_.edges(0) == set(itertools.combinations(range(6), 2))
    assert again.canonical_.n_tests > one.canonical_.n_tests


def test_shared_tests_give_the_same_graphs(planted):
    """Binary data compute a test once for the contexts that ask it together (the context
    tree); the kernel of contexts in turn computes every test. Same graphs, same counts of
    tests asked, far fewer computed."""
    from streammn.csgs import kernels
    from streammn.csgs.canonical import critical_values

    true, rows = planted
    patterns, counts = np.unique(rows[:5000], axis=0, return_counts=True)
    patterns = np.ascontiguousarray(patterns)
    cards = np.full(5, 2, dtype=np.int64)
    crit = critical_values(0.05, 1)
    tree = kernels.canonical_graphs_tree(patterns, counts, patterns, cards, crit, 5.0, False)
    plain = kernels.canonical_graphs(patterns, counts, patterns, cards, crit, 5.0, False)
    np.testing.assert_array_equal(tree[0], plain[0])
    np.testing.assert_array_equal(tree[1][:, :4], plain[1][:, :4])
    assert plain[1][:, 4].sum() == plain[1][:, 0].sum() > 3 * tree[1][:, 4].sum()


def _chains(rng, n, n_rows):
    """Random binary rows: chains of copied variables (each from an earlier one, with noise)."""
    rows = (rng.random((n_rows, n)) < rng.uniform(0.2, 0.6)).astype(np.uint8)
    for j in range(1, n):
        keep = rng.random(n_rows) < rng.uniform(0.05, 0.5)
        rows[:, j] = np.where(keep, rows[:, j], rows[:, rng.integers(0, j)])
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_context_tree_equals_context_by_context(seed):
    """The kernel that runs every context at once as a tree (binary data) gives, context by
    context, the graphs and the tests asked of Grow-Shrink run on each context alone: random
    chains of copied and flipped variables, one or repeated grow passes, sparse tables trusted
    or not, contexts all patterns or a subset."""
    from streammn.csgs import kernels
    from streammn.csgs.canonical import critical_values

    rng = np.random.default_rng(seed)
    n, n_rows = int(rng.integers(3, 9)), int(rng.integers(300, 3000))
    rows = _chains(rng, n, n_rows)
    patterns, counts = np.unique(rows, axis=0, return_counts=True)
    patterns = np.ascontiguousarray(patterns)
    contexts = patterns if seed % 2 else np.ascontiguousarray(patterns[: len(patterns) // 2 + 1])
    cards = np.full(n, 2, dtype=np.int64)
    crit = critical_values(0.05, 1)
    for repeat_grow in (False, True):
        for min_rows in (0.0, 5.0):
            args = (patterns, counts, contexts, cards, crit, min_rows, repeat_grow)
            tree = kernels.canonical_graphs_tree(*args)
            alone = kernels.canonical_graphs(*args)
            np.testing.assert_array_equal(tree[0], alone[0])
            np.testing.assert_array_equal(tree[1][:, :4], alone[1][:, :4])
            assert tree[1][:, 4].sum() <= alone[1][:, 4].sum()


@pytest.mark.parametrize("n, seed", [(64, 0), (70, 1), (100, 2), (100, 3), (130, 4)])
def test_context_tree_equals_context_by_context_on_wide_rows(n, seed):
    """With 64 variables or more a row packs into several words (and a blanket spans them):
    the tree still gives, context by context, the graphs and tests of Grow-Shrink run on each
    context alone, counts of one and of many, some contexts."""
    from streammn.csgs import kernels
    from streammn.csgs.canonical import critical_values

    rng = np.random.default_rng(seed)
    rows = _chains(rng, n, int(rng.integers(500, 1500)))
    rows = rows[rng.integers(0, len(rows), 2 * len(rows))]  # distinct rows counted 0 to ~8 times
    patterns, counts = np.unique(rows, axis=0, return_counts=True)
    patterns = np.ascontiguousarray(patterns)
    contexts = np.ascontiguousarray(patterns[rng.permutation(len(patterns))[:24]])
    cards = np.full(n, 2, dtype=np.int64)
    crit = critical_values(0.05, 1)
    for repeat_grow, min_rows in ((False, 5.0), (True, 0.0)):
        args = (patterns, counts, contexts, cards, crit, min_rows, repeat_grow)
        tree = kernels.canonical_graphs_tree(*args)
        alone = kernels.canonical_graphs(*args)
        assert alone[0].sum() > 0
        np.testing.assert_array_equal(tree[0], alone[0])
        np.testing.assert_array_equal(tree[1][:, :4], alone[1][:, :4])
        assert tree[1][:, 4].sum() <= alone[1][:, 4].sum()


def test_test_counts_within_the_papers_bound(planted):
    true, rows = planted
    cm = CSGS(true.schema).fit(rows[:3000]).canonical_
    m, n, k = len(cm.contexts), 5, cm.max_degree
    assert cm.n_tests == cm.n_grow_tests + cm.n_shrink_tests
    # per graph: at most n - 1 grow tests and at most k shrink tests per node
    assert m * (n - 1) <= cm.n_grow_tests <= m * n * (n - 1)
    assert cm.n_shrink_tests <= m * n * k
    assert cm.n_tests <= m * (n * n + n * k)


def test_same_model_however_the_stream_is_cut(planted):
    true, rows = planted
    rows = rows[:4000]
    whole = CSGS(true.schema).fit(rows)
    cut = CSGS(true.schema)
    for a, b in [(0, 1), (1, 999), (999, 1000), (1000, 2500), (2500, 4000)]:
        cut.partial_fit(rows[a:b])
    assert cut.to_bytes() == whole.to_bytes()
    m1, m2 = whole.to_markov_network(), cut.to_markov_network()
    assert feature_sets(m1.features) == feature_sets(m2.features)
    np.testing.assert_array_equal(m1.weights, m2.weights)


def test_state_round_trip_and_resume(planted):
    true, rows = planted
    first = CSGS(true.schema, max_contexts=10).partial_fit(rows[:1500])
    restored = CSGS.from_bytes(first.to_bytes())
    assert restored.get_params() == first.get_params()
    for learner in (first, restored):
        learner.partial_fit(rows[1500:3000])
    np.testing.assert_array_equal(
        first.to_markov_network().weights, restored.to_markov_network().weights
    )
    assert len(first.canonical_.contexts) == 10
    with pytest.raises(CSGSStateError):
        CSGS.from_bytes(b"not a state")


def test_bad_input_and_settings(planted):
    true, rows = planted
    learner = CSGS(true.schema).partial_fit(rows[:100])
    before = learner.to_bytes()
    bad = rows[:10].copy()
    bad[5, 2] = 7
    with pytest.raises(ValueError):
        learner.partial_fit(bad)
    assert learner.to_bytes() == before
    for kwargs in ({"significance": 0}, {"max_contexts": 0}, {"stddev": -1.0}):
        with pytest.raises(CSGSError):
            CSGS(true.schema, **kwargs)
    with pytest.raises(CSGSError, match="no rows"):
        CSGS(true.schema).learn_structure()
    assert CSGS(true.schema).to_markov_network().n_features == 0  # uniform before any row


def test_sampled_counts_still_learn(planted):
    true, rows = planted
    learner = CSGS(true.schema, max_patterns=8).fit(rows[:2000])
    assert not learner.counts.exact
    assert kl_divergence(true, learner.to_markov_network()) < 1.0


# weights: the shared PLL kernels with the patterns' counts as row weights ----------------------
def brute_csgs_objective(fs, patterns, counts, stddev):
    """CSGS's weight objective from the definition, ``(-sum_p c_p sum_j log P(x_j | x_-j) +
    |w|^2 / (2 stddev^2)) / sum_p c_p``, and its gradient: each conditional by replacing
    ``x_j`` with each of its values."""
    w = fs.weights
    value, grad = 0.0, np.zeros(fs.n_features)
    for x, c in zip(patterns, counts):
        for j, card in enumerate(fs.schema.cardinalities):
            held = []
            for a in range(card):
                y = x.copy()
                y[j] = a
                held.append([holds(conds, y) for _, conds in fs])
            held = np.array(held, dtype=float)
            logits = held @ w
            log_z = np.log(np.exp(logits - logits.max()).sum()) + logits.max()
            p = np.exp(logits - log_z)
            value += c * (logits[x[j]] - log_z)
            grad += c * (held[x[j]] - p @ held)
    n = float(np.sum(counts))
    return (-value + 0.5 * float(w @ w) / stddev**2) / n, (-grad + w / stddev**2) / n


def csgs_feature_cases(planted):
    """(features with random weights, patterns, counts): CSGS's own features on the planted
    rows, and random conditions (equalities and inequalities) on variables of 2 to 4 values."""
    true, rows = planted
    rng = np.random.default_rng(3)
    learner = CSGS(true.schema).fit(rows[:3000])
    fs = learner.model_.features
    yield (
        fs.with_weights(rng.normal(size=fs.n_features)),
        learner.counts.patterns,
        learner.counts.counts,
    )
    schema = Schema.from_cardinalities([2, 3, 2, 4, 3])
    fs = random_featureset(rng, schema, 30, max_len=3, p_eq=0.5)
    assert not fs.eq.all()
    patterns = np.unique(
        rng.integers(0, schema.cardinalities, size=(80, 5)).astype(np.uint8), axis=0
    )
    yield fs, patterns, rng.integers(1, 20, size=len(patterns))


@pytest.mark.parametrize("stddev", [1.0, 0.3])
def test_shared_objective_is_csgs_objective(planted, stddev):
    """The objective CSGS's weights minimise, computed by the shared reach-list kernels
    (weights.pll_objective with the patterns' counts), equals the brute-force CSGS objective:
    count-weighted PLL of the patterns plus the Gaussian prior, over the number of rows."""
    for fs, patterns, counts in csgs_feature_cases(planted):
        value, grad = pll_objective(fs, patterns, stddev, counts=counts)
        want_value, want_grad = brute_csgs_objective(fs, patterns, counts, stddev)
        assert value == pytest.approx(want_value, rel=1e-12)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-9, atol=1e-12)


def test_pattern_weighted_objective_equals_repeated_rows(planted):
    """Patterns with counts give the bits of the rows they count (the same reach lists)."""
    true, rows = planted
    rows = rows[:2000]
    fs = true.features.with_weights(np.random.default_rng(0).normal(size=true.n_features))
    patterns, counts = np.unique(rows, axis=0, return_counts=True)
    value, grad = pll_objective(fs, np.ascontiguousarray(patterns), 0.5, counts=counts)
    v_rows, g_rows = pll_objective(fs, rows, 0.5)
    assert value == v_rows
    np.testing.assert_array_equal(grad, g_rows)


def test_csgs_weights_are_fit_weights_on_the_counted_rows(planted):
    """CSGS's weights are exactly (same bits, same L-BFGS run) those of weights.fit_weights on
    the rows it counted, with its prior, iterations and the tolerance of its rows' sampling
    noise."""
    true, rows = planted
    learner = CSGS(true.schema, stddev=0.5, max_iter=30).fit(rows[:2000])
    got = learner.model_
    want = fit_weights(
        MarkovNetwork(true.schema, got.features.with_weights(np.zeros(got.n_features))),
        rows[:2000],
        stddev=0.5,
        max_iter=30,
        tol=noise_tolerance(2000),
    )
    np.testing.assert_array_equal(got.features.weights, want.features.weights)
    assert got.fit_info == want.fit_info


def test_csgs_model_pll_unchanged_on_a_fixed_seed(planted):
    """The CSGS model of a fixed sample, fitted to ``tol=1e-10``, scores what it scored when
    CSGS had its own PLL code (the structure and every weight the same); at the default
    tolerance of the counts' sampling noise the fit stops after 13 iterations instead of 47,
    within 0.005 nats per row of it on held-out rows."""
    true, rows = planted
    learner = CSGS(true.schema, stddev=0.5, max_iter=50).fit(rows[:5000])
    model = learner.to_markov_network()
    assert model.n_features == 38
    tight = fit_pattern_weights(
        model.with_weights(np.zeros(model.n_features)),
        learner.counts.patterns,
        learner.counts.counts,
        stddev=0.5,
        max_iter=50,
        tol=1e-10,
    )
    assert tight.fit_info["iterations"] == 47
    assert tight.pll(rows[15000:]) == pytest.approx(-2.272521626745463, abs=1e-9)
    assert model.fit_info["iterations"] == 13
    assert model.pll(rows[15000:]) == pytest.approx(-2.272521626745463, abs=0.005)


def test_pattern_weighted_gradient_matches_finite_differences():
    """Any conditions (equalities and inequalities), variables of 2 to 4 values: the gradient
    of the count-weighted objective is the derivative of its value."""
    rng = np.random.default_rng(3)
    schema = Schema.from_cardinalities([2, 3, 2, 4, 3])
    fs = random_featureset(rng, schema, 30, max_len=3, p_eq=0.5)
    patterns = np.unique(
        rng.integers(0, schema.cardinalities, size=(200, 5)).astype(np.uint8), axis=0
    )
    counts = rng.integers(1, 20, size=len(patterns))
    _, grad = pll_objective(fs, patterns, counts=counts)
    step = 1e-6
    for f in rng.choice(fs.n_features, 8, replace=False):
        values = []
        for sign in (1, -1):
            w = fs.weights.copy()
            w[f] += sign * step
            values.append(pll_objective(fs.with_weights(w), patterns, counts=counts)[0])
        assert grad[f] == pytest.approx((values[0] - values[1]) / (2 * step), rel=1e-5, abs=1e-7)


def test_bad_pattern_counts(planted):
    true, rows = planted
    patterns, counts = np.unique(rows[:500], axis=0, return_counts=True)
    model = MarkovNetwork(true.schema, true.features)
    for bad in (counts[:-1], -counts, np.zeros_like(counts)):
        with pytest.raises(WeightLearningError):
            fit_weights(model, patterns, counts=bad)
    with pytest.raises(WeightLearningError):
        fit_pattern_weights(model, patterns, counts[:-1])
    with pytest.raises(WeightLearningError):
        fit_pattern_weights(model, patterns, counts, stddev=0.0)


def test_conditional_ablation_matches_stratified_chi_square(planted):
    """The ablation's first grow test (empty blanket) and its stratified tests agree with
    scipy: I(X_1, X_2 | X_0) sums the per-stratum statistics and degrees of freedom."""
    true, rows = planted
    rows = rows[:3000]
    total, dof = 0.0, 0
    for w in (0, 1):
        sub = rows[rows[:, 0] == w]
        table = np.zeros((2, 2))
        np.add.at(table, (sub[:, 1], sub[:, 2]), 1)
        stat, _, d, _ = chi2_contingency(table, correction=False)
        total, dof = total + stat, dof + d
    expect_dependent = chi2.sf(total, dof) < 0.05
    patterns, counts = np.unique(rows[:, :3], axis=0, return_counts=True)
    cm = learn_canonical_model(Schema.binary(3), patterns, counts, context_specific=False)
    # node 0 joins 1 and 2 first (both depend on the context variable), so the edge 1-2 is
    # decided by exactly this conditional test
    assert (0, 1) in cm.edges(0) and (0, 2) in cm.edges(0)
    assert ((1, 2) in cm.edges(0)) == expect_dependent


def test_engine_resume_mid_stream_equals_one_run(tmp_path, planted):
    from streammn.connectors import ArraySource
    from streammn import load_snapshot
    from streammn.stream.engine import StreamLearner

    true, rows = planted
    rows = rows[:3000]

    def engine(where, data):
        source = ArraySource(data, schema=true.schema, batch_size=400)
        return StreamLearner(
            source,
            CSGS(true.schema),
            tmp_path / where,
            every_rows=1000,
            formats=("json",),
            progress=None,
        )

    engine("whole", rows).run()
    engine("parts", rows[:1600]).run()
    resumed = engine("parts", rows)
    assert resumed.resume() and resumed.state.rows_seen == 1600
    resumed.run()
    a, b = load_snapshot(tmp_path / "whole"), load_snapshot(tmp_path / "parts")
    assert a.features.equals(b.features)


def test_multi_valued_variables():
    """Three-valued variables take the parallel path (contexts in turn): X_1 copies X_0 (with
    noise), X_2 is independent of both."""
    rng = np.random.default_rng(5)
    x0 = rng.integers(0, 3, 4000)
    x1 = np.where(rng.random(4000) < 0.8, x0, rng.integers(0, 3, 4000))
    rows = np.stack([x0, x1, rng.integers(0, 3, 4000)], axis=1).astype(np.uint8)
    learner = CSGS(Schema.from_cardinalities([3, 3, 3])).fit(rows)
    cm = learner.canonical_
    assert cm.n_tests_computed == cm.n_tests  # no sharing off binary data
    graphs = [cm.edges(i) for i in range(len(cm.contexts))]
    assert all((0, 1) in g for g in graphs)  # every context keeps the dependence
    # tests at significance 0.05 in 27 contexts: a few false dependences on X_2 are expected
    assert np.mean([g == {(0, 1)} for g in graphs]) > 0.8
    assert learner.to_markov_network().pll(rows) > -3.2


def test_weights_are_fit_on_a_uniform_sample_of_many_patterns_whatever_their_order():
    from streammn.csgs.pll import fit_sample

    rng = np.random.default_rng(0)
    patterns = np.unique(rng.integers(0, 2, size=(6000, 40), dtype=np.uint8), axis=0)
    counts = rng.integers(1, 5, size=patterns.shape[0])
    same = fit_sample(patterns, counts, size=patterns.shape[0])
    assert same[0] is patterns and same[1] is counts  # few patterns: all of them
    kept, kept_counts = fit_sample(patterns, counts, size=1500)
    order = rng.permutation(patterns.shape[0])
    again, again_counts = fit_sample(patterns[order], counts[order], size=1500)
    as_set = {p.tobytes(): c for p, c in zip(kept, kept_counts)}
    assert len(as_set) == 1500 and as_set == {p.tobytes(): c for p, c in zip(again, again_counts)}
    # uniform over the patterns: the first value splits them as it splits the sample
    assert abs(kept[:, 0].mean() - patterns[:, 0].mean()) < 0.05
