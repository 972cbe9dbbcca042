"""MarkovNetwork against brute-force enumeration."""

import numpy as np
import pytest

from helpers.helpers_mn import all_rows, brute_joint, brute_score, random_featureset
from streammn import Schema
from streammn.errors import ModelError
from streammn.schema import Variable
from streammn.network import loglinear, reach_lists
from streammn.features import FeatureSet
from streammn.network.model import EnumerationTooLarge, MarkovNetwork


@pytest.fixture
def model():
    rng = np.random.default_rng(7)
    schema = Schema.from_cardinalities([2, 3, 2, 4, 2])
    return MarkovNetwork(schema, random_featureset(rng, schema, 30, max_len=4, p_eq=0.6))


def test_scores_conditionals_and_pll(model):
    rows = all_rows(model.schema)
    np.testing.assert_allclose(
        model.log_score(rows), [brute_score(model.features, r) for r in rows]
    )
    terms = model.pll_terms(rows)
    for i in range(model.schema.n_vars):
        cond = model.conditional(rows, i)
        for r, row in enumerate(rows):
            s = []
            for a in range(model.schema.cardinalities[i]):
                x = row.copy()
                x[i] = a
                s.append(brute_score(model.features, x))
            expect = np.exp(np.array(s) - np.logaddexp.reduce(s))
            np.testing.assert_allclose(cond[r], expect, atol=1e-12)
            assert terms[r, i] == pytest.approx(np.log(expect[row[i]]), abs=1e-12)
    assert model.pll(rows) == pytest.approx(terms.sum(axis=1).mean())
    np.testing.assert_allclose(model.conditional_log_likelihoods(rows), terms.mean(axis=0))


def test_bitset_kernel_matches_row_kernel_on_many_rows():
    # more rows than one chunk, a partial last word, long features, != conditions
    rng = np.random.default_rng(3)
    schema = Schema.from_cardinalities([2, 5, 3, 2, 2, 4, 2, 3])
    fs = random_featureset(rng, schema, 200, max_len=6, p_eq=0.5)
    rows = rng.integers(0, schema.cardinalities, size=(1000, 8)).astype(np.uint8)
    np.testing.assert_allclose(
        MarkovNetwork(schema, fs).pll_terms(rows), loglinear.pll_terms(fs, rows), atol=1e-12
    )
    # owner: each feature only for one variable's conditional (dependency-network reading)
    owner = np.array([fs.var[fs.ptr[f]] for f in range(fs.n_features)])
    cpds = [fs.select(owner == i) for i in range(schema.n_vars)]
    expect = np.stack(
        [
            loglinear.log_conditional(cpds[i], rows, i)[np.arange(len(rows)), rows[:, i]]
            for i in range(schema.n_vars)
        ],
        axis=1,
    )
    _, terms = loglinear.all_conditionals(fs, rows, owner=owner)
    np.testing.assert_allclose(terms, expect, atol=1e-12)


def test_exact_enumeration(model):
    rows, p = brute_joint(model.features, model.schema)
    states, q = model.joint()
    np.testing.assert_array_equal(states, rows)
    np.testing.assert_allclose(q, p, atol=1e-12)
    np.testing.assert_allclose(np.exp(model.log_probability(rows)), p, atol=1e-12)
    marg = model.marginals()
    for i, m in enumerate(marg):
        np.testing.assert_allclose(
            m, [p[rows[:, i] == a].sum() for a in range(model.schema.cardinalities[i])]
        )


def test_enumeration_refused_above_limit():
    schema = Schema.binary(21)
    mn = MarkovNetwork(schema, FeatureSet.from_features(schema, [(1.0, [(0, 1, True)])]))
    with pytest.raises(EnumerationTooLarge, match="max_states"):
        mn.log_partition()
    small = MarkovNetwork(Schema.binary(4), FeatureSet.empty(Schema.binary(4)), max_states=8)
    with pytest.raises(EnumerationTooLarge):
        small.marginals()


def test_edges_and_repr():
    schema = Schema.binary(4)
    fs = FeatureSet.from_features(
        schema,
        [
            (1.0, [(0, 1, True), (2, 0, True)]),
            (0.5, [(1, 1, True)]),
            (0.2, [(3, 1, True), (2, 1, True), (0, 0, True)]),
        ],
    )
    mn = MarkovNetwork(schema, fs)
    assert mn.edges() == {(0, 2), (0, 3), (2, 3)}
    assert mn.markov_blanket(0) == {2, 3}
    assert mn.n_features == 3
    assert "3 features" in repr(mn)


def test_strongest_feature_of_each_edge_matches_a_loop_over_the_features():
    rng = np.random.default_rng(5)
    schema = Schema.from_cardinalities([2, 3, 4, 2, 3, 2])
    mn = MarkovNetwork(schema, random_featureset(rng, schema, 60, max_len=4))
    pairs = sorted(mn.edges())
    best = {}
    for f, (w, conds) in enumerate(mn.features):
        scope = sorted({v for v, _, _ in conds})
        for a_i, a in enumerate(scope):
            for b in scope[a_i + 1 :]:
                if (a, b) not in best or abs(w) > abs(mn.features.weights[best[a, b]]):
                    best[a, b] = f
    assert mn.strongest_features(pairs) == [best[p] for p in pairs]
    assert mn.strongest_features(iter(pairs)) == [best[p] for p in pairs]
    lone = MarkovNetwork(schema, FeatureSet.from_features(schema, [(1.0, [(0, 1, True)])]))
    for missing in ([(0, 1)], iter([(0, 1)])):  # named as well from a generator
        with pytest.raises(ModelError, match="no feature tests variables 0 and 1"):
            lone.strongest_features(missing)


def test_a_feature_reads_with_the_names_of_variables_and_states():
    schema = Schema(
        [
            Variable("country", states=("BR", "FR", "US")),
            Variable("returning", states=(False, True)),
            Variable("latency_ms", bins=(43.7, 88.5)),
            Variable("code", 3),
        ]
    )
    fs = FeatureSet.from_features(
        schema,
        [(0.5, [(0, 2, True), (1, 1, False), (2, 1, True)]), (1.0, [(3, 2, True)])],
    )
    # canonical form: a binary != is written as the other value's =
    assert fs.text(0) == "country=US & returning=false & latency_ms=[43.7, 88.5)"
    assert fs.text(1) == "code=2"
    mixed = FeatureSet.from_features(schema, [(1.0, [(0, 0, False), (3, 1, True)])])
    assert mixed.text(0) == "country!=BR & code=1"


def test_variables_with_more_than_64_values():
    # the bitset kernels keep allowed values in a 64-bit mask; wider variables go row by row
    rng = np.random.default_rng(8)
    schema = Schema.from_cardinalities([70, 2, 3, 2])
    fs = random_featureset(rng, schema, 40, max_len=3, p_eq=0.5)
    rows = rng.integers(0, schema.cardinalities, size=(150, 4)).astype(np.uint8)
    np.testing.assert_allclose(
        MarkovNetwork(schema, fs).pll_terms(rows), loglinear.pll_terms(fs, rows), atol=1e-12
    )
    value, grad = reach_lists.pll_and_gradient(fs, rows)
    eps = 1e-6
    for f in range(0, fs.n_features, 5):
        w = fs.weights.copy()
        w[f] += eps
        up = loglinear.pll_terms(fs.with_weights(w), rows).sum()
        w[f] -= 2 * eps
        down = loglinear.pll_terms(fs.with_weights(w), rows).sum()
        assert grad[f] == pytest.approx((up - down) / (2 * eps), abs=1e-5)


def test_merge_duplicates_matches_a_dictionary_reference():
    rng = np.random.default_rng(9)
    schema = Schema.from_cardinalities([2, 3, 2, 4])
    base = random_featureset(rng, schema, 30, max_len=3, p_eq=0.5)
    # many repeats of few conjunctions, some summing to exactly zero
    idx = rng.integers(0, base.n_features, size=400)
    fs = base.select(idx).with_weights(rng.choice([-1.0, 0.5, 1.0, -0.5], size=400))
    sums, order = {}, []
    for w, conds in fs:
        if conds not in sums:
            order.append(conds)
            sums[conds] = 0.0
        sums[conds] += w
    expect = [(sums[c], c) for c in order if sums[c] != 0.0]
    assert fs.merge_duplicates().to_list() == expect
    assert len(fs.merge_duplicates(drop_zero=False)) == len(order)
    assert fs.select(np.zeros(400, bool)).n_features == 0


def test_a_variable_index_out_of_range_is_refused_not_wrapped(model):
    """conditional(rows, -1) used to answer for the last variable (numpy's negative index)
    and conditional(rows, n) raised a raw IndexError (issue 42)."""
    from streammn.dn import DependencyNetwork
    from streammn.errors import ModelError, VariableIndexError

    rows = all_rows(model.schema)
    n = model.schema.n_vars
    dn = DependencyNetwork(model.schema, [model.features] * n)
    for target in (model, dn):
        for bad in (-1, n, 1.0, True):
            with pytest.raises(VariableIndexError, match=r"variable") as info:
                target.log_conditional(rows, bad)
            assert isinstance(info.value, (ModelError, IndexError))
        name = model.schema.names[1]
        np.testing.assert_array_equal(
            target.log_conditional(rows, name), target.log_conditional(rows, 1)
        )


def test_the_pll_of_no_rows_is_an_error_not_nan(model):
    from streammn.dn import DependencyNetwork
    from streammn.errors import DataError, NoRowsError

    empty = np.zeros((0, model.schema.n_vars), dtype=np.uint8)
    dn = DependencyNetwork(model.schema, [model.features] * model.schema.n_vars)
    for target in (model, dn):
        with pytest.raises(NoRowsError, match="no rows to score") as info:
            target.pll(empty)
        assert isinstance(info.value, DataError)


def test_the_cmll_of_no_rows_is_an_error_and_its_terms_are_empty():
    """As the PLL's (issue 42): the terms of no rows are no terms, their mean an error."""
    from streammn.errors import NoRowsError
    from streammn.demo import planted_network
    from streammn.inference import cmll, cmll_terms

    model, _ = planted_network(5, seed=0)
    empty = np.zeros((0, 5), dtype=np.uint8)
    assert cmll_terms(model, empty).shape == (0, 5)
    with pytest.raises(NoRowsError, match="no rows"):
        cmll(model, empty)
