"""The look kernels (streammn.trees.looks) against the numpy steps they replaced."""

import numpy as np

from streammn.trees import looks
from streammn.trees.criterion import SignificanceThresholds, significance_threshold, n_candidates


def test_a_look_schedules_counts_and_tests_as_the_numpy_steps_did():
    rng = np.random.default_rng(11)
    cards = rng.integers(2, 5, 30)
    n_slots, n_nodes = 200, 400
    slot_n = rng.integers(0, 5000, n_slots)
    slot_n[:5] = [0, 1, 19, 20, 2**40]
    last = rng.integers(0, 100, n_slots)
    attempts = rng.integers(0, 12, n_slots)
    slot_target = rng.integers(0, cards.size, n_slots).astype(np.int32)
    slot_node = rng.permutation(n_nodes)[:n_slots].astype(np.int32)
    counts = rng.integers(0, 3000, (n_nodes, 4))
    slots = np.sort(rng.choice(n_slots, 80, replace=False)).astype(np.int64)
    slots[:2] = [0, 1]  # slot_n 0 (a gain over no rows, as numpy divides) and 1

    want_last, want_attempts = last.copy(), attempts.copy()
    n = slot_n[slots]
    following = np.maximum(np.ceil(n * 1.5).astype(np.int64), n + 1)
    want_last[slots] = np.maximum(following, 40) - 1
    want_attempts[slots] += 1
    most = looks.begin(slots, slot_n, last, attempts, 1.5, 40)
    np.testing.assert_array_equal(last, want_last)
    np.testing.assert_array_equal(attempts, want_attempts)
    assert most == attempts[slots].max()

    var = rng.integers(-1, 30, slots.size)
    gain = rng.exponential(20.0, slots.size)
    var[0], gain[0] = 3, 1e3
    limits = SignificanceThresholds(0.05, cards).up_to(most)
    floor = 0.002 * 123_456.0
    go = looks.passing(
        slots, var, gain, slot_n, slot_target, attempts, limits, slot_node, counts, floor
    )
    targets = slot_target[slots]
    want = (var >= 0) & (
        gain
        > significance_threshold(
            0.05, cards[targets], n_candidates(cards)[targets], attempts[slots]
        )
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        want &= (
            gain / slot_n[slots].astype(np.float64) * counts[slot_node[slots]].sum(axis=1) >= floor
        )
    np.testing.assert_array_equal(go, want)
    assert 0 < go.sum() < go.size
