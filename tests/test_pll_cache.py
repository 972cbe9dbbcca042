"""The reach lists of weight learning (reach_lists.ReachLists): PLL and gradient against brute force
with the lists kept and with every evaluation rescanning, each way the same bits at any thread
count, word lists kept within the budget giving the scan's bits, rows weighted by counts as
repeats, and fits the same at one and two threads."""

import numpy as np
import pytest

from helpers.helpers_mn import all_rows, at_each_thread_count, holds, random_featureset
from streammn import Schema
from streammn.network import bitscan, loglinear, reach_lists
from streammn.features import FeatureSet
from streammn.network.model import MarkovNetwork
from streammn.network.weights import fit_weights


def indicators(fs, rows):
    """(n, F) 0/1 matrix: feature f holds on row r."""
    return np.array([[holds(c, r) for _, c in fs] for r in rows], dtype=float)


def brute_pll_and_gradient(fs, rows, owner):
    """Summed PLL and gradient from the definition: log P(x_j | x_-j) with every feature that
    counts for j (all of them for an MN, CPD j's for a DN), by replacing x_j by each value."""
    cards = fs.schema.cardinalities
    counts = np.array(
        [[owner[f] < 0 or owner[f] == j for f in range(fs.n_features)] for j in range(len(cards))],
        dtype=float,
    )
    value, grad = 0.0, np.zeros(fs.n_features)
    observed = indicators(fs, rows)
    for j, card in enumerate(cards):
        flipped = []
        for a in range(card):
            x = rows.copy()
            x[:, j] = a
            flipped.append(indicators(fs, x) * counts[j])
        logits = np.stack([h @ fs.weights for h in flipped], axis=1)
        logz = np.log(np.exp(logits).sum(axis=1))
        p = np.exp(logits - logz[:, None])
        value += float((logits[np.arange(len(rows)), rows[:, j]] - logz).sum())
        grad += (observed * counts[j]).sum(axis=0)
        grad -= sum(p[:, a] @ flipped[a] for a in range(card))
    return value, grad


@pytest.mark.slow
@pytest.mark.parametrize(
    "cards,dn", [([2] * 7, False), ([2, 3, 2, 4, 2, 3], False), ([3, 2, 4, 2, 2], True)]
)
def test_cache_matches_brute_force(cards, dn):
    rng = np.random.default_rng(len(cards) + dn)
    schema = Schema.from_cardinalities(cards)
    fs = random_featureset(rng, schema, 40, max_len=4, p_eq=0.6)
    owner = rng.integers(0, len(cards), fs.n_features) if dn else np.full(fs.n_features, -1)
    rows = rng.integers(0, schema.cardinalities, size=(300, len(cards))).astype(np.uint8)
    kept = reach_lists.ReachLists(fs, rows, owner)
    scan = reach_lists.ReachLists(fs, rows, owner, list_bytes=0)
    assert kept.n_entries > 0 and len(kept.rows) < len(rows)  # repeated rows counted once
    for w in (fs.weights, rng.normal(size=fs.n_features)):
        want_value, want_grad = brute_pll_and_gradient(fs.with_weights(w), rows, owner)
        for lists in (kept, scan):
            value, grad = lists.pll_and_gradient(w)
            assert value == pytest.approx(want_value, rel=1e-12)
            np.testing.assert_allclose(grad, want_grad, rtol=1e-10, atol=1e-9)


def planted_rows(n_vars, n_rows, seed):
    """Rows with dependencies, so that features hold often enough to fill many units."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n_rows, n_vars), dtype=np.uint8)
    x[:, 0] = rng.random(n_rows) < 0.4
    for j in range(1, n_vars):
        x[:, j] = np.where(rng.random(n_rows) < 0.8, x[:, j - 1], rng.random(n_rows) < 0.5)
    return x


def test_lists_and_scan_agree_and_give_the_same_bits_at_any_thread_count():
    """Several chunks of rows (so the order of the partial sums matters), entries kept or every
    evaluation rescanning, at one and two threads: each way gives the same bits at any thread
    count, and the two ways agree to rounding."""
    rng = np.random.default_rng(5)
    schema = Schema.binary(20)
    fs = random_featureset(rng, schema, 150, max_len=5, p_eq=0.8)
    rows = planted_rows(20, 3000, seed=6)
    kept = reach_lists.ReachLists(fs, rows, parallel=True)
    scan = reach_lists.ReachLists(fs, rows, list_bytes=0, parallel=True)
    assert len(kept.rows) > 64 * bitscan.CHUNK_WORDS * bitscan.PARTIAL_SUMS
    assert kept.n_entries > 0 and scan.n_entries == 0
    want = {
        way: lists.pll_and_gradient(fs.weights) for way, lists in (("kept", kept), ("scan", scan))
    }
    assert want["scan"][0] == pytest.approx(want["kept"][0], rel=1e-13)
    np.testing.assert_allclose(want["scan"][1], want["kept"][1], rtol=1e-12, atol=1e-9)
    for got in at_each_thread_count(
        lambda: {
            way: lists.pll_and_gradient(fs.weights)
            for way, lists in (("kept", kept), ("scan", scan))
        }
    ):
        for way, (value, grad) in got.items():
            assert value == want[way][0]
            assert np.array_equal(grad, want[way][1])
    # the serial twins (a snapshot writer's, and any small model's) give the same bits
    for way, list_bytes in (("kept", None), ("scan", 0)):
        serial = reach_lists.ReachLists(fs, rows, list_bytes=list_bytes, parallel=False)
        value, grad = serial.pll_and_gradient(fs.weights)
        assert value == want[way][0] and np.array_equal(grad, want[way][1])


def test_the_parallel_twins_run_only_where_the_work_pays(monkeypatch):
    """By default a small model runs the serial twins (so a first run on it never compiles
    the parallel ones), a large one the parallel twins, a snapshot writer the serial ones."""
    from streammn.kernel_mode import serial_kernels

    rng = np.random.default_rng(5)
    fs = random_featureset(rng, Schema.binary(20), 150, max_len=5, p_eq=0.8)
    rows = planted_rows(20, 3000, seed=6)
    small = reach_lists.ReachLists(fs, rows)
    assert small._evaluate is reach_lists._pll_and_gradient_serial
    monkeypatch.setattr(reach_lists, "PARALLEL_WORK", len(small.rows) * fs.n_features)
    assert reach_lists.ReachLists(fs, rows)._evaluate is reach_lists._pll_and_gradient
    with serial_kernels():
        assert reach_lists.ReachLists(fs, rows)._evaluate is reach_lists._pll_and_gradient_serial


def test_word_lists_kept_within_the_budget_give_the_bits_of_the_scan():
    """Past the entries' budget, the chunks' word lists that fit are kept by the first
    evaluation and reused by later ones: every evaluation gives the bits of scanning every
    chunk, at any thread count (variables of 2 to 4 values: groups allowing several)."""
    rng = np.random.default_rng(11)
    schema = Schema.from_cardinalities([2, 3, 2, 4] * 5)
    fs = random_featureset(rng, schema, 120, max_len=4, p_eq=0.5)
    rows = rng.integers(0, schema.cardinalities, size=(3000, 20)).astype(np.uint8)
    weights = [fs.weights, rng.normal(size=fs.n_features)]
    scan = reach_lists.ReachLists(fs, rows, list_bytes=0)
    want = [scan.pll_and_gradient(w) for w in weights]
    budget = len(scan.rows) * int(scan.offs[-1])  # too little for entries, and for all lists
    partly = reach_lists.ReachLists(fs, rows, list_bytes=budget)
    n_chunks = -(-len(partly.rows) // (64 * bitscan.CHUNK_WORDS))
    assert partly.n_entries == 0 and partly.kept_chunks == 0
    for got in at_each_thread_count(lambda: [partly.pll_and_gradient(w) for w in weights * 2]):
        assert 0 < partly.kept_chunks < n_chunks
        for (value, grad), (want_value, want_grad) in zip(got, want * 2):
            assert value == want_value and np.array_equal(grad, want_grad)


@pytest.mark.parametrize("list_bytes", [None, 0])
def test_counts_weigh_rows_as_repeats(list_bytes):
    """Rows with counts give the bits of the rows repeated that many times (entries kept or
    word lists), and the brute-force PLL and gradient of the repeated rows."""
    rng = np.random.default_rng(12)
    schema = Schema.from_cardinalities([2, 3, 2, 4, 2])
    fs = random_featureset(rng, schema, 40, max_len=4, p_eq=0.6)
    rows = rng.integers(0, schema.cardinalities, size=(150, 5)).astype(np.uint8)
    counts = rng.integers(1, 5, size=len(rows))
    repeated = np.repeat(rows, counts, axis=0)
    weighted = reach_lists.ReachLists(fs, rows, list_bytes=list_bytes, counts=counts)
    plain = reach_lists.ReachLists(fs, repeated, list_bytes=list_bytes)
    value, grad = weighted.pll_and_gradient(fs.weights)
    want_value, want_grad = plain.pll_and_gradient(fs.weights)
    assert value == want_value and np.array_equal(grad, want_grad)
    owner = np.full(fs.n_features, -1)
    brute_value, brute_grad = brute_pll_and_gradient(fs, repeated, owner)
    assert value == pytest.approx(brute_value, rel=1e-12)
    np.testing.assert_allclose(grad, brute_grad, rtol=1e-10, atol=1e-9)
    with pytest.raises(ValueError, match="one count per row"):
        reach_lists.ReachLists(fs, rows, counts=counts[1:])


def test_fit_without_kept_lists_gives_the_same_weights(monkeypatch):
    """Over the list budget, every evaluation rescans the rows: the fit is the same."""
    rng = np.random.default_rng(7)
    schema = Schema.from_cardinalities([2, 3, 2, 2, 3, 2])
    fs = random_featureset(rng, schema, 30, max_len=3, p_eq=0.7)
    rows = rng.integers(0, schema.cardinalities, size=(700, 6)).astype(np.uint8)
    start = MarkovNetwork(schema, fs)
    kept = fit_weights(start, rows, stddev=0.5, max_iter=15)
    monkeypatch.setattr(reach_lists, "LIST_BYTES", 0)
    rescanned = fit_weights(start, rows, stddev=0.5, max_iter=15)
    np.testing.assert_allclose(rescanned.weights, kept.weights, rtol=1e-9, atol=1e-10)
    assert rescanned.fit_info["iterations"] == kept.fit_info["iterations"]


def test_conditionals_of_repeated_rows_are_computed_once_with_the_same_bits():
    rng = np.random.default_rng(8)
    schema = Schema.from_cardinalities([2, 3, 2, 2])
    fs = random_featureset(rng, schema, 25, max_len=3)
    distinct = all_rows(schema)
    pick = rng.integers(0, len(distinct), 500)
    probs, terms = loglinear.all_conditionals(fs, distinct[pick])
    once_probs, once_terms = loglinear.all_conditionals(fs, distinct)
    assert np.array_equal(probs, once_probs[pick]) and np.array_equal(terms, once_terms[pick])
    patterns, inverse = loglinear.distinct_rows(distinct[pick])
    assert np.array_equal(patterns[inverse], distinct[pick])


def test_fit_gives_the_same_weights_at_one_and_two_threads():
    rng = np.random.default_rng(9)
    schema = Schema.binary(16)
    fs = random_featureset(rng, schema, 80, max_len=4, p_eq=0.7)
    rows = planted_rows(16, 2500, seed=10)
    start = MarkovNetwork(schema, fs.with_weights(np.zeros(fs.n_features)))
    fits = at_each_thread_count(lambda: fit_weights(start, rows, stddev=1.0, max_iter=10))
    assert all(np.array_equal(fit.weights, fits[0].weights) for fit in fits)


def test_pll_of_extreme_weights_stays_finite_and_exact():
    """Conditionals near 0 and 1 (weights of +-40 on single variables): the row's log
    probabilities, multiplied together in the kernel, still sum to the brute-force value."""
    schema = Schema.binary(30)
    fs = FeatureSet.from_features(schema, [(40.0 * (-1) ** i, [(i, 1, True)]) for i in range(30)])
    rows = np.random.default_rng(11).integers(0, 2, size=(50, 30)).astype(np.uint8)
    for list_bytes in (None, 0):
        value, grad = reach_lists.ReachLists(fs, rows, list_bytes=list_bytes).pll_and_gradient(
            fs.weights
        )
        want_value, want_grad = brute_pll_and_gradient(fs, rows, np.full(30, -1))
        assert np.isfinite(value)
        assert value == pytest.approx(want_value, rel=1e-12)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-10, atol=1e-9)
