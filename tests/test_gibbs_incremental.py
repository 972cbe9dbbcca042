"""The incremental Gibbs kernel (streammn.inference.incremental): its marginals match brute-force
conditional marginals within Monte-Carlo error, follow the lockstep kernel's chains exactly
(same seeds, same conditionals up to rounding), and do not depend on the thread count."""

import numpy as np

from helpers.helpers_mn import at_each_thread_count, brute_conditional_marginals, mixed_mn_and_rows
from streammn.inference import InferenceError, gibbs_marginals
from streammn.inference.incremental import _unique_rows

import pytest


def model_and_evidence(n_rows=40):
    mn, evidence = mixed_mn_and_rows(5, n_rows, scale=0.9)
    evidence[:, [1, 4, 7, 8]] = -1
    evidence[::3, [0, 2]] = -1  # a second evidence pattern
    return mn, evidence


@pytest.mark.slow
def test_marginals_match_brute_force():
    mn, evidence = model_and_evidence(12)
    got = gibbs_marginals(
        mn, evidence, burn_in=50, samples=4000, chains=4, seed=1, method="incremental"
    )
    assert np.abs(got - brute_conditional_marginals(mn, evidence)).max() < 0.03


@pytest.mark.slow
def test_follows_the_lockstep_chains():
    """Both kernels draw the same random numbers in the same order, so with the same
    conditionals (summed in another order) every chain takes the same path."""
    mn, evidence = model_and_evidence()
    lockstep = gibbs_marginals(mn, evidence, burn_in=10, samples=100, seed=3, method="bitset")
    incremental = gibbs_marginals(
        mn, evidence, burn_in=10, samples=100, seed=3, method="incremental"
    )
    np.testing.assert_allclose(incremental, lockstep, rtol=0, atol=1e-9)


def test_marginals_do_not_depend_on_the_thread_count():
    mn, evidence = model_and_evidence()
    out = at_each_thread_count(
        lambda: gibbs_marginals(mn, evidence, burn_in=10, samples=50, seed=4, method="incremental")
    )
    assert all(np.array_equal(out[0], o) for o in out)


def test_needs_a_markov_network():
    from streammn.dn import DependencyNetwork

    mn, evidence = model_and_evidence(2)
    with pytest.raises(InferenceError, match="incremental"):
        gibbs_marginals(object.__new__(DependencyNetwork), evidence, method="incremental")


def test_parts_are_found_in_numpys_order():
    """Parts are numbered by a lexicographic sort of their keys; the numbering must be numpy's
    (np.unique over rows), or the per-chain sums would be added in another order."""
    rng = np.random.default_rng(8)
    for keys in (
        rng.integers(-1, 4, size=(300, 6)),
        np.repeat([[2, 5, -1, -1]], 3, axis=0),
        np.empty((0, 4), dtype=np.int64),
    ):
        uniq, inverse = _unique_rows(keys)
        want, want_inverse = np.unique(keys, axis=0, return_inverse=True)
        assert np.array_equal(uniq, want) and np.array_equal(inverse, want_inverse.ravel())
