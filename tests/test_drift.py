"""Drift adaptation and forgetting in one-pass DTSL (streammn.trees.adaptive, streammn.trees.decay).

Planted logistic Bayesian networks give the truth: a stream that switches from one network to
another must be detected and the swapped trees must be the new network's conditionals; a
stationary stream must raise nothing; forgetting without a finite half-life must not change a
bit; a resumed learner must continue exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from streammn.dtsl import DTSL, DTSLError
from streammn.planted import LogisticBN
from streammn.schema import Schema
from streammn.trees.adaptive import EVENTS

N_VARS = 12


def blanket(bn: LogisticBN, t: int) -> set[int]:
    return {j for edge in bn.edges() if t in edge for j in edge} - {t}


@pytest.fixture(scope="module")
def switch():
    """100k rows of one planted network, then 100k rows of another."""
    before, after = LogisticBN(N_VARS, seed=1), LogisticBN(N_VARS, seed=2)
    rng = np.random.default_rng(5)
    rows = np.concatenate([before.sample(100_000, rng), after.sample(100_000, rng)])
    return before, after, rows


def events(model: DTSL, kind: str) -> np.ndarray:
    ev = model._drift.events
    return ev[ev[:, 2] == EVENTS.index(kind)]


def test_abrupt_switch_is_detected_and_swapped_trees_follow_the_new_model(switch):
    before, after, rows = switch
    adaptive = DTSL(Schema.binary(N_VARS), drift="page-hinkley").fit(rows)
    plain = DTSL(Schema.binary(N_VARS)).fit(rows)
    alarms, swaps = events(adaptive, "alarm"), events(adaptive, "swap")
    assert alarms[:, 0].min() > 100_000  # nothing before the switch
    assert alarms[:, 0].min() <= 105_000  # found within a few periods
    swapped = np.unique(swaps[:, 1])
    changed = [t for t in range(N_VARS) if blanket(before, t) != blanket(after, t)]
    assert len(swapped) >= 0.75 * len(changed)
    summary = adaptive.drift_summary()
    assert summary["swaps"] == len(swaps) and summary["alternating"] == []
    f = adaptive.forest
    for t in swapped:  # the root tests the new network's Markov blanket
        assert int(f.var[t]) in blanket(after, t), t
    test = after.sample(20_000, np.random.default_rng(11))
    truth = after.pll_terms(test).mean(axis=0)[swapped]
    gap_adaptive = truth - adaptive.pll_terms(test).mean(axis=0)[swapped]
    gap_plain = truth - plain.pll_terms(test).mean(axis=0)[swapped]
    assert gap_adaptive.mean() < 0.2 * gap_plain.mean()
    assert gap_adaptive.max() < 0.01  # nats per row: the new conditionals, not a mixture


def test_only_the_changed_conditionals_are_replaced():
    """Flip one variable's CPD: only its own tree and its parents' change conditionals
    (``P(x_i | x_-i)`` involves ``P(x_j | pa_j)`` only for ``i = j`` and ``i`` in ``pa_j``).
    Those are all swapped; most others keep their trees and the counts of every row (an
    unchanged target's tree may still be replaced when its alternate is clearly better on the
    new rows: the inputs' distribution moved under a tree that approximates its conditional)."""
    import copy

    before = LogisticBN(N_VARS, seed=1)
    after = copy.deepcopy(before)
    j = 3
    after.weights[j] = -before.weights[j]
    after.bias[j] = -before.bias[j]
    affected = {j, *before.parents[j].tolist()}
    rng = np.random.default_rng(5)
    rows = np.concatenate([before.sample(100_000, rng), after.sample(100_000, rng)])
    model = DTSL(Schema.binary(N_VARS), drift="page-hinkley").fit(rows)
    swapped = set(events(model, "swap")[:, 1].tolist())
    assert affected <= swapped
    unaffected = set(range(N_VARS)) - affected
    assert len(unaffected - swapped) >= 2 * len(unaffected) / 3
    f = model.forest
    for t in set(range(N_VARS)) - swapped:
        assert f.counts[f.leaves(t)].sum() == rows.shape[0], t


def test_stationary_stream_raises_no_alarm_over_two_million_rows():
    bn = LogisticBN(10, seed=3)
    model = DTSL(Schema.binary(10), drift="page-hinkley")
    rng = np.random.default_rng(7)
    for _ in range(4):
        model.partial_fit(bn.sample(500_000, rng))
    assert model.rows_seen == 2_000_000
    assert model._drift.events.shape[0] == 0
    assert model.drift_summary()["alarms"] == 0
    assert model._grower.rebuilds  # no alarm, so the exact rebuilds stayed on


def _state_arrays(model: DTSL) -> dict:
    return model.get_state()[1]


@pytest.mark.parametrize("half_life", [float("inf"), 10**9])
def test_forgetting_without_a_finite_horizon_is_bit_identical(switch, half_life):
    rows = switch[2][:60_000]
    # the trees' counts (regressions do not forget yet: cpd='auto' keeps trees with half_life)
    base = DTSL(Schema.binary(N_VARS), cpd="tree").fit(rows)
    other = DTSL(Schema.binary(N_VARS), half_life=half_life, cpd="tree").fit(rows)
    if half_life == float("inf"):
        assert other.half_life is None and other.to_bytes() == base.to_bytes()
    a, b = _state_arrays(base), _state_arrays(other)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    shorter = DTSL(Schema.binary(N_VARS), half_life=5_000).fit(rows)
    assert not np.array_equal(_state_arrays(shorter)["node_counts"], a["node_counts"])


def test_halving_counts_exactly():
    """Root-only trees: every leaf count is the stream's counts halved every 1,000 rows."""
    rng = np.random.default_rng(0)
    rows = (rng.random((2_500, 4)) < [0.2, 0.5, 0.7, 0.9]).astype(np.uint8)
    model = DTSL(Schema.binary(4), max_depth=0, half_life=1_000)
    model.partial_fit(rows[:700]).partial_fit(rows[700:])
    expect = np.zeros((4, 2), dtype=np.int64)
    for start in range(0, 2_500, 1_000):
        block = rows[start : start + 1_000]
        expect += np.stack([np.bincount(block[:, j], minlength=2) for j in range(4)])
        if start + 1_000 <= 2_500:
            expect >>= 1
    assert np.array_equal(model.forest.counts[:4], expect)


def test_forgetting_follows_a_switch(switch):
    _, after, rows = switch
    test = after.sample(20_000, np.random.default_rng(12))
    plain = DTSL(Schema.binary(N_VARS)).fit(rows).pll_terms(test).sum(axis=1).mean()
    decayed = DTSL(Schema.binary(N_VARS), half_life=10_000).fit(rows)
    assert decayed.pll_terms(test).sum(axis=1).mean() > plain + 0.1
    # the total weight stays within two half-lives
    assert decayed.forest.counts[decayed.forest.leaves(0)].sum() <= 2 * 10_000


def test_resume_and_batch_cuts_are_exact_with_drift_on(switch):
    rows = switch[2][:130_000]
    whole = DTSL(Schema.binary(N_VARS), drift="page-hinkley", half_life=50_000)
    for start in range(0, rows.shape[0], 65_536):
        whole.partial_fit(rows[start : start + 65_536])
    assert whole.drift_summary()["swaps"] > 0
    cuts = [0, 41_333, 100_777, 101_999, 103_210, 104_005, 117_000, rows.shape[0]]
    model = DTSL(Schema.binary(N_VARS), drift="page-hinkley", half_life=50_000)
    during_episode = False
    for lo, hi in zip(cuts, cuts[1:]):
        model.partial_fit(rows[lo:hi])
        during_episode |= model._drift.alt is not None
        model = DTSL.from_bytes(model.to_bytes())
    assert during_episode  # a cut fell while alternates were growing
    assert model.to_bytes() == whole.to_bytes()


def test_bad_settings_are_refused():
    schema = Schema.binary(3)
    with pytest.raises(DTSLError, match="drift"):
        DTSL(schema, drift="adwin")
    with pytest.raises(DTSLError, match="half_life"):
        DTSL(schema, half_life=0)
    with pytest.raises(DTSLError, match="hoeffding"):
        DTSL(schema, mode="exact", drift="page-hinkley")


@pytest.mark.slow
def test_cli_reports_drift_in_the_progress_line_and_the_manifest(tmp_path):
    import os
    import subprocess
    import sys

    from streammn.connectors import write_parquet
    from streammn import read_snapshot
    from streammn.stream.snapshot import resolve_snapshot

    rng = np.random.default_rng(3)
    rows = np.concatenate(
        [LogisticBN(8, seed=1).sample(40_000, rng), LogisticBN(8, seed=2).sample(40_000, rng)]
    )
    write_parquet(tmp_path / "switch.parquet", rows, Schema.binary(8), row_group_size=5000)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "streammn.cli",
            "learn",
            str(tmp_path / "switch.parquet"),
            "--out",
            str(tmp_path / "out"),
            "--drift",
            "page-hinkley",
            "--half-life",
            "1000000",
            "--every-rows",
            "40000",
            "--formats",
            "json",
        ],
        env={**os.environ, "PYTHONPATH": root},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("done:") and "drift alarms" in last
    manifest = read_snapshot(resolve_snapshot(tmp_path / "out")).manifest
    assert manifest["learner"]["params"]["drift"] == "page-hinkley"
    assert manifest["learner"]["params"]["half_life"] == 1_000_000
    drift = manifest["drift"]
    assert drift["alarms"] > 0 and drift["swaps"] > 0
    assert all(e["row"] > 40_000 for e in drift["recent"])


def test_drift_with_forgetting_keeps_counts_consistent(switch):
    """Halvings on both growers' clocks and swaps between them: every leaf's split statistics
    stay within its counts (a false child's counts are counts minus the true side's)."""
    rows = switch[2]
    model = DTSL(Schema.binary(N_VARS), drift="page-hinkley", half_life=2_000)
    for start in range(0, rows.shape[0], 25_000):
        model.partial_fit(rows[start : start + 25_000])
        for grower in filter(None, (model._grower, model._drift.alt)):
            f, st = grower.forest, grower.stats
            assert (f.counts[: f.n_nodes] >= 0).all()
            active = np.flatnonzero(st.slot_node >= 0)
            assert (st.tot[active] <= f.counts[st.slot_node[active]]).all()
    assert model.drift_summary()["swaps"] > 0
