"""Gibbs sampling, marginals, CMLL and PLL against exact enumeration."""

import numpy as np
import pytest

from helpers.helpers_mn import all_rows, brute_conditional_marginals, random_featureset
from streammn import Schema
from streammn.schema import SchemaError
from streammn.dn import DependencyNetwork
from streammn.inference import (
    InferenceError,
    cmll,
    cmll_terms,
    gibbs_marginals,
    pll,
    pll_terms,
    sample,
    variable_groups,
)
from streammn.network.loglinear import value_offsets
from streammn.network.model import MarkovNetwork


@pytest.fixture(scope="module")
def mn():
    rng = np.random.default_rng(11)
    schema = Schema.from_cardinalities([2, 3, 2, 2, 3, 2])
    return MarkovNetwork(schema, random_featureset(rng, schema, 16, max_len=3, scale=0.8))


@pytest.mark.parametrize("method", ["table", "bitset"])
def test_gibbs_marginals_match_exact(mn, method):
    evidence = np.array(
        [[-1, -1, -1, -1, -1, -1], [1, -1, 0, -1, -1, 1], [-1, 2, -1, 1, -1, -1]] * 30
    )  # 90 rows: more than one 64-chain word
    got = gibbs_marginals(mn, evidence, burn_in=100, samples=1000, chains=4, seed=1, method=method)
    for r, ev in enumerate(evidence[:3]):
        exact = brute_conditional_marginals(mn, ev[None])[0]
        np.testing.assert_allclose(got[r::3].mean(axis=0), exact, atol=0.01)
        np.testing.assert_allclose(got[r::3], np.broadcast_to(exact, got[r::3].shape), atol=0.05)
    again = gibbs_marginals(
        mn, evidence, burn_in=100, samples=1000, chains=4, seed=1, method=method
    )
    np.testing.assert_array_equal(got, again)
    offs = value_offsets(mn.schema.cardinalities)
    assert got[1, offs[0] + 1] == 1.0 and got[1, offs[0]] == 0.0


@pytest.mark.parametrize("method", ["table", "bitset"])
def test_cmll_matches_exact(mn, method):
    rows = sample(mn, 40, seed=3)
    terms = cmll_terms(mn, rows, groups=3, burn_in=50, samples=2000, seed=2, method=method)
    blocks = variable_groups(mn.schema.n_vars, 3)
    offs = value_offsets(mn.schema.cardinalities)
    exact = np.empty_like(terms)
    for r, row in enumerate(rows):
        for block in blocks:
            ev = row.astype(int).copy()
            ev[block] = -1
            marg = brute_conditional_marginals(mn, ev[None])[0]
            exact[r, block] = np.log(marg[offs[block] + row[block]])
    np.testing.assert_allclose(terms, exact, atol=0.05)
    assert cmll(
        mn, rows, groups=3, burn_in=50, samples=2000, seed=2, method=method
    ) == pytest.approx(terms.sum(axis=1).mean())


def test_samples_follow_the_joint(mn):
    x = sample(mn, 30000, seed=5, burn_in=50, thin=2, chains=8)
    states, p = mn.joint()
    cards = mn.schema.cardinalities
    idx = np.ravel_multi_index(x.T.astype(np.int64), cards)
    freq = np.bincount(idx, minlength=len(p)) / len(x)
    assert 0.5 * np.abs(freq - p).sum() < 0.03
    np.testing.assert_array_equal(
        x[:100], sample(mn, 30000, seed=5, burn_in=50, thin=2, chains=8)[:100]
    )


def test_dependency_network_gibbs_and_pll(mn):
    # the DN of an MN (CPD i = the MN's features mentioning X_i) has the MN as its joint
    var_ptr, var_feats = mn.index
    dn = DependencyNetwork(
        mn.schema,
        [
            mn.features.select(var_feats[var_ptr[i] : var_ptr[i + 1]])
            for i in range(mn.schema.n_vars)
        ],
    )
    ev = np.full((1, mn.schema.n_vars), -1)
    for method in ("table", "bitset"):
        got = gibbs_marginals(dn, ev, samples=3000, chains=4, seed=0, method=method)
        np.testing.assert_allclose(got[0], brute_conditional_marginals(mn, ev)[0], atol=0.02)
    rows = all_rows(mn.schema)
    np.testing.assert_allclose(pll_terms(dn, rows), dn.pll_terms(rows), atol=1e-12)
    assert pll(mn, rows) == pytest.approx(mn.pll(rows))
    # an inconsistent DN: PLL still reads each CPD for its own variable only
    rng = np.random.default_rng(2)
    dn2 = DependencyNetwork(
        mn.schema, [random_featureset(rng, mn.schema, 5) for _ in range(mn.schema.n_vars)]
    )
    np.testing.assert_allclose(pll_terms(dn2, rows), dn2.pll_terms(rows), atol=1e-12)


def test_bad_arguments(mn):
    with pytest.raises(SchemaError, match="columns"):  # evidence is validated like rows
        gibbs_marginals(mn, np.zeros((1, 3)))
    with pytest.raises(SchemaError, match="out of range"):
        gibbs_marginals(mn, np.full((1, 6), 5))
    with pytest.raises(InferenceError):
        gibbs_marginals(mn, np.full((1, 6), -1), samples=0)
    with pytest.raises(InferenceError):
        cmll(mn, np.zeros((2, 6), np.uint8), groups=7)
    with pytest.raises(InferenceError, match="method"):
        gibbs_marginals(mn, np.full((1, 6), -1), method="exact")
