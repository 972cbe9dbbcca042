"""EdgeGrafting at stream speed (issue 41): warm-started, noise-scaled, skipped updates and a
prompt stop that abandons an update in flight and resumes byte-identically."""

import os
import signal
import threading
import time

import numpy as np
import pytest

from streammn.connectors import ArraySource
from streammn import read_snapshot
from streammn.stream.engine import StreamLearner
from streammn.errors import GraftingError
from streammn.grafting import EdgeGrafting, planted_potts
from streammn.grafting.objective import GraftingObjective


@pytest.fixture(scope="module")
def planted():
    mrf = planted_potts("random", 16, states=2, coupling=(0.8, 1.5), seed=3)
    rows = mrf.sample(40000, seed=4, chains=32)
    return mrf, rows[np.random.default_rng(5).permutation(rows.shape[0])]


def stream(learner, rows, batch=3000):
    for k in range(0, rows.shape[0], batch):
        learner.partial_fit(rows[k : k + batch])
    return learner


def recovery(learner, mrf):
    found = set(learner.edges)
    hit = len(found & mrf.edges)
    return hit / len(mrf.edges), hit / max(len(found), 1)


def test_warm_started_skipping_updates_find_the_structure_cold_ones_do(planted):
    """The defaults (warm starts, noise-scaled tolerances, updates only when the statistics
    moved) against fits from zero at every check: the same bars on the planted graph, and the
    same graph here."""
    mrf, rows = planted
    rows = rows[:24000]
    warm = stream(EdgeGrafting(mrf.schema, update_every=4000), rows)
    cold = stream(
        EdgeGrafting(mrf.schema, update_every=4000, warm_start=False, min_change=0.0), rows
    )
    for learner in (warm, cold):
        recall, precision = recovery(learner, mrf)
        assert recall >= 0.95 and precision >= 0.9
    assert set(warm.edges) == set(cold.edges)
    assert cold.updates == 6 and cold.skipped == 0
    assert warm.skipped > 0 and warm.updates + warm.skipped == 6
    # at the same cadence, fits from zero publish the warm-started weights, up to the tolerance
    same = stream(EdgeGrafting(mrf.schema, update_every=4000, warm_start=False), rows)
    assert same.edges == warm.edges
    # mean PLL on the sample: its sampling noise is about 2 / sqrt(24000) = 0.013 here
    fitted = warm.stats.reservoir.rows
    assert abs(warm.score(fitted) - same.score(fitted)) < 1e-3


def test_a_skipped_update_changes_nothing_but_the_counts(planted):
    mrf, rows = planted
    learner = stream(EdgeGrafting(mrf.schema, update_every=4000), rows[:8000], batch=4000)
    assert learner.updates == 2  # 4000 and 8000 rows: the sample doubled
    before = learner.to_bytes()
    snap = EdgeGrafting.from_bytes(before)
    learner.partial_fit(rows[8000:12000])  # the sample grew by half: less than its noise
    assert learner.change() < 1.0 and learner.skipped == 1 and learner.updates == 2
    assert learner.edges == snap.edges
    for name in ("theta", "refit_theta", "score_theta"):
        np.testing.assert_array_equal(getattr(learner, name), getattr(snap, name))
    assert learner._strategy.get_state() == snap._strategy.get_state()
    assert learner.rng.bit_generator.state == snap.rng.bit_generator.state
    assert learner.last_update_rows == 8000 and learner.stats.n_rows == 12000
    # the next check (16000 rows: the sample doubled again) updates
    learner.partial_fit(rows[12000:16000])
    assert learner.updates == 3


def test_drift_in_the_marginals_makes_an_update(planted):
    mrf, rows = planted
    learner = stream(EdgeGrafting(mrf.schema, update_every=4000), rows[:8000], batch=4000)
    drifted = rows[8000:12000].copy()
    drifted[:, 0] = 1  # a variable stuck at one value
    learner.partial_fit(drifted[:3999])
    assert learner.change() >= 1.0  # the turnover alone is below 1 (previous test)
    learner.partial_fit(drifted[3999:])
    assert learner.updates == 3 and learner.skipped == 0


def test_stop_leaves_the_update_pending_and_continuing_equals_one_run(planted):
    mrf, rows = planted
    whole = stream(EdgeGrafting(mrf.schema, update_every=4000), rows[:16000], batch=4000)
    learner = stream(EdgeGrafting(mrf.schema, update_every=4000), rows[:4000], batch=4000)
    learner.stop()
    learner.partial_fit(rows[4000:8000])  # ends on a boundary: its update is not begun
    assert learner.pending_update and learner.updates == 1
    assert learner.rows_to_pause() is None
    with pytest.raises(GraftingError, match="clear_stop"):
        learner.partial_fit(rows[8000:9000])
    saved = EdgeGrafting.from_bytes(learner.to_bytes())
    assert saved.pending_update
    for one in (learner, saved):
        one.clear_stop()
        stream(one, rows[8000:16000], batch=4000)
        assert one.to_bytes() == whole.to_bytes()


def test_rows_to_pause_names_the_next_update(planted):
    mrf, rows = planted
    learner = EdgeGrafting(mrf.schema, update_every=1000)
    assert learner.rows_to_pause() == 1000
    learner.partial_fit(rows[:1500])
    assert learner.updates == 1 and learner.rows_to_pause() == 500  # doubling: at 2000
    learner.partial_fit(rows[1500:2000])
    assert learner.updates == 2 and learner.rows_to_pause() == 2000  # at 4000


def test_sigterm_abandons_a_slow_update_and_resume_is_byte_identical(
    planted, tmp_path, monkeypatch
):
    """A structure update slowed to minutes is abandoned on SIGTERM: the run ends within
    seconds with a snapshot of the state before the update (pending in it), and a run resumed
    from that snapshot ends with the learner an uninterrupted run ends with. The batches (3000
    rows) do not end at the update (4000 rows): the engine cuts them there."""
    mrf, rows = planted
    rows = rows[:12000]

    def engine(out, learner):
        source = ArraySource(rows, schema=mrf.schema, batch_size=3000)
        return StreamLearner(source, learner, out, progress=None, formats=("json",))

    def make():
        return EdgeGrafting(mrf.schema, update_every=4000, weights="closed-form")

    whole = engine(tmp_path / "whole", make())
    whole.run()

    learner = make()
    original = GraftingObjective.__call__
    sent = []

    def slow(self, theta):  # every evaluation inside an abandonable update takes 0.5 s
        if learner._abandonable:
            if not sent:
                sent.append(time.monotonic())
                threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()
            time.sleep(0.5)
        return original(self, theta)

    monkeypatch.setattr(GraftingObjective, "__call__", slow)
    stopped = engine(tmp_path / "stopped", learner)
    path = stopped.run()
    latency = time.monotonic() - sent[0] - 0.5
    monkeypatch.undo()
    assert latency < 10.0  # the update would have run for minutes
    manifest = read_snapshot(path).manifest
    assert manifest["reason"] == "signal" and manifest["rows_seen"] == 4000
    held = EdgeGrafting.from_bytes((path / "learner.bin").read_bytes())
    assert held.pending_update and held.updates == 0 and not held.edges

    resumed = engine(tmp_path / "stopped", make())
    assert resumed.resume()
    resumed.run()
    assert resumed.learner.to_bytes() == whole.learner.to_bytes()


def test_all_pairs_products_score_as_the_pair_kernel(planted):
    """Past FULL_AFTER * n pairs a scorer computes every pair's gradient by two matrix
    products; the scores agree with the pair-by-pair kernel's."""
    from streammn.grafting import pseudo_score

    mrf, rows = planted
    learner = EdgeGrafting(mrf.schema).fit(rows[:6000])
    n = mrf.schema.n_vars
    pairs = np.array(
        [(i, j) for i in range(n) for j in range(i + 1, n) if (i, j) not in learner.active],
        dtype=np.int64,
    )
    args = (learner.layout, learner.score_theta, learner.stats.reservoir.rows, True)
    one = pseudo_score.PseudoScorer(*args)
    raw_one = one.raw_scores(pairs[:3])
    assert one._cross is None
    z_one = one.z_scores(pairs[:3], raw_one)
    every = pseudo_score.PseudoScorer(*args)
    every.raw_scores(pairs)  # more than FULL_AFTER * n pairs: every pair at once
    assert every._cross is not None
    raw_all = every.raw_scores(pairs[:3])
    np.testing.assert_allclose(raw_all, raw_one, rtol=1e-10)
    np.testing.assert_allclose(every.z_scores(pairs[:3], raw_all), z_one, rtol=1e-8)


def test_a_pseudo_likelihood_pass_gives_the_same_bits_on_any_thread_count(planted):
    import numba

    from streammn.grafting.objective import GraftingObjective

    mrf, rows = planted
    obj = GraftingObjective(
        mrf.layout, np.zeros(mrf.layout.size), 0.0, 0.001, kind="pseudo", rows=rows[:20000]
    )
    before = numba.get_num_threads()
    try:
        results = []
        for threads in sorted({1, before}):
            numba.set_num_threads(threads)
            results.append(obj(mrf.theta))
    finally:
        numba.set_num_threads(before)
    for value, grad in results[1:]:
        assert value == results[0][0]
        np.testing.assert_array_equal(grad, results[0][1])
