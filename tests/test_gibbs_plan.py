"""The lockstep Gibbs kernel's evidence plan: conditions on variables observed in every chain of
a block are applied once, which must not change a single bit of the marginals; and seeded
marginals do not depend on the thread count."""

import numpy as np

from helpers.helpers_mn import at_each_thread_count, mixed_mn_and_rows
from streammn.inference import gibbs_marginals


def model_and_evidence():
    mn, evidence = mixed_mn_and_rows(21, 90, scale=0.8)
    evidence[:, [1, 4, 7]] = -1  # the query group: 7 variables observed in every chain
    return mn, evidence


def test_static_evidence_gives_the_same_bits_as_without_it():
    """One extra chain with nothing observed leaves no variable static in the block, so the
    kernel ANDs every condition at every sweep; the other chains' marginals must not change
    (each chain's random stream depends only on its index)."""
    mn, evidence = model_and_evidence()
    planned = gibbs_marginals(mn, evidence, burn_in=20, samples=50, seed=3, method="bitset")
    all_free = np.vstack([evidence, np.full((1, 10), -1)])
    unplanned = gibbs_marginals(mn, all_free, burn_in=20, samples=50, seed=3, method="bitset")
    assert np.array_equal(planned, unplanned[:-1])


def test_marginals_do_not_depend_on_the_thread_count():
    mn, evidence = model_and_evidence()
    evidence = np.tile(evidence, (4, 1))  # 360 chains: two blocks
    out = at_each_thread_count(
        lambda: gibbs_marginals(mn, evidence, burn_in=10, samples=30, seed=4, method="bitset")
    )
    assert all(np.array_equal(out[0], o) for o in out)
