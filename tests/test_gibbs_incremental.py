"""The incremental Gibbs kernel (streammn.inference.incremental): its marginals match brute-force
conditional marginals within Monte-Carlo error, follow the lockstep kernel's chains exactly
(same seeds, same conditionals up to rounding), and do not depend on the thread count."""

import numba
import numpy as np

from helpers_mn import random_featureset
from streammn import Schema
from streammn.inference import InferenceError, gibbs_marginals
from streammn.loglinear import value_offsets
from streammn.model import MarkovNetwork

import pytest


def model_and_evidence(n_rows=40):
    rng = np.random.default_rng(5)
    schema = Schema.from_cardinalities([2, 3, 2, 2, 3, 2, 2, 4, 2, 2])
    mn = MarkovNetwork(schema, random_featureset(rng, schema, 60, max_len=4, scale=0.9))
    rows = rng.integers(0, schema.cardinalities, size=(n_rows, 10))
    evidence = rows.copy()
    evidence[:, [1, 4, 7, 8]] = -1
    evidence[::3, [0, 2]] = -1  # a second evidence pattern
    return mn, evidence


def exact_conditionals(mn, evidence):
    states, p = mn.joint()
    offs = value_offsets(mn.schema.cardinalities)
    out = np.zeros((len(evidence), offs[-1]))
    for r, e in enumerate(evidence):
        keep = np.all((states == e) | (e < 0), axis=1)
        q = p[keep] / p[keep].sum()
        for j, card in enumerate(mn.schema.cardinalities):
            out[r, offs[j]:offs[j + 1]] = np.bincount(states[keep, j], weights=q, minlength=card)
    return out


def test_marginals_match_brute_force():
    mn, evidence = model_and_evidence(12)
    got = gibbs_marginals(mn, evidence, burn_in=50, samples=4000, chains=4, seed=1,
                          method="incremental")
    assert np.abs(got - exact_conditionals(mn, evidence)).max() < 0.03


def test_follows_the_lockstep_chains():
    """Both kernels draw the same random numbers in the same order, so with the same
    conditionals (summed in another order) every chain takes the same path."""
    mn, evidence = model_and_evidence()
    lockstep = gibbs_marginals(mn, evidence, burn_in=10, samples=100, seed=3, method="bitset")
    incremental = gibbs_marginals(mn, evidence, burn_in=10, samples=100, seed=3,
                                  method="incremental")
    np.testing.assert_allclose(incremental, lockstep, rtol=0, atol=1e-9)


def test_marginals_do_not_depend_on_the_thread_count():
    mn, evidence = model_and_evidence()
    threads = numba.get_num_threads()
    try:
        out = []
        for n in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(n)
            out.append(gibbs_marginals(mn, evidence, burn_in=10, samples=50, seed=4,
                                       method="incremental"))
    finally:
        numba.set_num_threads(threads)
    assert all(np.array_equal(out[0], o) for o in out)


def test_needs_a_markov_network():
    from streammn.dn import DependencyNetwork
    mn, evidence = model_and_evidence(2)
    with pytest.raises(InferenceError, match="incremental"):
        gibbs_marginals(object.__new__(DependencyNetwork), evidence, method="incremental")
