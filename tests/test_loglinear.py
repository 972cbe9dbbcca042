"""Feature sets and the log-linear kernels against brute-force evaluation."""

import itertools

import numpy as np
import pytest

from streammn import Schema
from streammn.network import loglinear
from streammn.dn import DependencyNetwork
from streammn.features import FeatureSet, canonical_conditions
from streammn.features._canonical import canonical_flat


def random_featureset(rng, schema, n_features, max_len=3):
    feats = []
    for _ in range(n_features):
        k = rng.integers(1, max_len + 1)
        vs = rng.choice(schema.n_vars, size=k, replace=False)
        conds = [
            (int(v), int(rng.integers(schema.cardinalities[v])), bool(rng.random() < 0.7))
            for v in vs
        ]
        feats.append((float(rng.normal()), conds))
    return FeatureSet.from_features(schema, feats)


def holds(conds, row):
    return all((row[v] == a) == eq for v, a, eq in conds)


def brute_score(fs, row):
    return sum(w for w, c in fs if holds(c, row))


def all_rows(schema):
    return np.array(
        list(itertools.product(*[range(c) for c in schema.cardinalities])), dtype=np.uint8
    )


def test_canonical_conditions():
    cards = [2, 3, 4]
    assert canonical_conditions([(0, 1, False)], cards) == ((0, 0, True),)
    assert canonical_conditions([(1, 0, False), (1, 1, False)], cards) == ((1, 2, True),)
    assert canonical_conditions([(1, 0, True), (1, 0, True)], cards) == ((1, 0, True),)
    assert canonical_conditions([(1, 0, True), (1, 1, True)], cards) is None
    assert canonical_conditions([(1, 0, True), (1, 1, False)], cards) == ((1, 0, True),)
    assert canonical_conditions([(2, 3, False), (2, 0, False)], cards) == (
        (2, 0, False),
        (2, 3, False),
    )
    assert canonical_conditions([(2, 1, False), (0, 0, True)], cards) == (
        (0, 0, True),
        (2, 1, False),
    )
    with pytest.raises(ValueError):
        canonical_conditions([(0, 2, True)], cards)


def test_canonical_form_preserves_truth():
    rng = np.random.default_rng(0)
    schema = Schema.from_cardinalities([2, 3, 4, 2])
    for _ in range(200):
        raw = [
            (int(v), int(rng.integers(schema.cardinalities[v])), bool(rng.random() < 0.5))
            for v in rng.integers(0, 4, size=rng.integers(1, 5))
        ]
        canon = canonical_conditions(raw, schema.cardinalities)
        for row in all_rows(schema):
            assert holds(raw, row) == (canon is not None and holds(canon, row))


def test_the_flat_kernel_gives_each_conjunctions_canonical_form():
    """canonical_flat over many conjunctions at once (tree paths: up to dozens of conditions,
    repeated variables) equals canonical_conditions on each."""
    rng = np.random.default_rng(3)
    cards = np.array([2, 3, 4, 2, 5, 3], dtype=np.int64)
    raws = [
        [
            (int(v), int(rng.integers(cards[v])), bool(rng.random() < 0.5))
            for v in rng.integers(0, len(cards), size=rng.integers(0, 40))
        ]
        for _ in range(300)
    ]
    ptr = np.concatenate([[0], np.cumsum([len(r) for r in raws])]).astype(np.int64)
    flat = [c for r in raws for c in r]
    var = np.array([c[0] for c in flat], dtype=np.int32)
    val = np.array([c[1] for c in flat], dtype=np.uint8)
    eq = np.array([c[2] for c in flat], dtype=np.bool_)
    keep, out_ptr, out_var, out_val, out_eq = canonical_flat(ptr, var, val, eq, cards)
    expected = [canonical_conditions(r, cards) for r in raws]
    assert keep.tolist() == [e is not None for e in expected]
    got = [
        tuple(zip(out_var[a:b].tolist(), out_val[a:b].tolist(), out_eq[a:b].tolist()))
        for a, b in zip(out_ptr[:-1], out_ptr[1:])
    ]
    assert got == [e for e in expected if e is not None]


def test_scores_and_conditionals_match_brute_force():
    rng = np.random.default_rng(1)
    schema = Schema.from_cardinalities([2, 3, 2, 4, 2])
    fs = random_featureset(rng, schema, 25)
    rows = all_rows(schema)
    np.testing.assert_allclose(loglinear.log_scores(fs, rows), [brute_score(fs, r) for r in rows])
    terms = loglinear.pll_terms(fs, rows)
    for i in range(schema.n_vars):
        logc = loglinear.log_conditional(fs, rows, i)
        for r, row in enumerate(rows):
            scores = []
            for a in range(schema.cardinalities[i]):
                x = row.copy()
                x[i] = a
                scores.append(brute_score(fs, x))
            expect = np.array(scores) - np.logaddexp.reduce(scores)
            np.testing.assert_allclose(logc[r], expect, atol=1e-12)
            assert terms[r, i] == pytest.approx(expect[row[i]], abs=1e-12)


def test_merge_duplicates_sums_and_drops_zero():
    schema = Schema.binary(3)
    fs = FeatureSet.from_features(
        schema,
        [
            (1.0, [(0, 1, True), (1, 0, True)]),
            (0.5, [(1, 1, False), (0, 0, False)]),  # same conjunction, other spelling
            (2.0, [(2, 1, True)]),
            (-2.0, [(2, 1, True)]),
        ],
    )
    merged = fs.merge_duplicates()
    assert merged.to_list() == [(1.5, ((0, 1, True), (1, 0, True)))]
    rows = all_rows(schema)
    np.testing.assert_allclose(loglinear.log_scores(merged, rows), loglinear.log_scores(fs, rows))


def test_select_concat_and_index():
    rng = np.random.default_rng(2)
    schema = Schema.from_cardinalities([3, 2, 2, 3])
    a, b = random_featureset(rng, schema, 5), random_featureset(rng, schema, 7)
    both = FeatureSet.concat(schema, [a, b])
    assert both.to_list() == a.to_list() + b.to_list()
    assert both.select(np.arange(5, 12)).to_list() == b.to_list()
    var_ptr, var_feats = both.features_by_variable()
    for i in range(schema.n_vars):
        got = set(var_feats[var_ptr[i] : var_ptr[i + 1]].tolist())
        assert got == {f for f in range(both.n_features) if i in both.scope(f)}


def test_dependency_network_conditionals():
    rng = np.random.default_rng(3)
    schema = Schema.from_cardinalities([2, 3, 2])
    cpds = [random_featureset(rng, schema, 6) for _ in range(3)]
    dn = DependencyNetwork(schema, cpds)
    rows = all_rows(schema)
    terms = dn.pll_terms(rows)
    for i in range(3):
        np.testing.assert_allclose(
            terms[:, i],
            loglinear.log_conditional(cpds[i], rows, i)[np.arange(len(rows)), rows[:, i]],
        )
        np.testing.assert_allclose(
            dn.log_conditional(rows, i), loglinear.log_conditional(cpds[i], rows, i)
        )
    assert dn.pll(rows) == pytest.approx(terms.sum(axis=1).mean())
