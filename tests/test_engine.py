"""StreamLearner in process: cadence, signals, resume, bad batches, skipped formats."""

import os
import signal

import numpy as np
import pytest

from streammn.connectors import ArraySource, Batch, Source
from streammn import Schema, SchemaError, load_snapshot, read_snapshot
from streammn.stream import engine as engine_module
from streammn.dtsl import DTSL
from streammn.stream.engine import EngineError, StreamLearner
from streammn.stats import MarginalCounts
from streammn.stream.snapshot import list_snapshots


def chain_rows(n, n_vars=8, seed=0):
    rng = np.random.default_rng(seed)
    x = np.empty((n, n_vars), dtype=np.uint8)
    x[:, 0] = rng.random(n) < 0.5
    for j in range(1, n_vars):
        x[:, j] = x[:, j - 1] ^ (rng.random(n) < 0.2)
    return x


def make(tmp_path, rows, cpd="tree", **kw):
    source = ArraySource(rows, schema=Schema.binary(rows.shape[1]), batch_size=250)
    learner = DTSL(source.schema, kappa=0.1, grace_period=100, cpd=cpd)
    return StreamLearner(source, learner, tmp_path / "out", progress=None, **kw)


def test_default_progress_goes_to_stderr_as_it_is_when_printing(tmp_path, capsys):
    """The default binds no stream at import: a redirection made later (here capsys's) holds."""
    rows = chain_rows(500)
    source = ArraySource(rows, schema=Schema.binary(rows.shape[1]), batch_size=250)
    StreamLearner(source, DTSL(source.schema), tmp_path / "out").run()
    assert "done: rows 500" in capsys.readouterr().err


def test_snapshot_cadence_and_scores(tmp_path):
    rows = chain_rows(3000)
    eng = make(tmp_path, rows, every_rows=1000, validation=chain_rows(500, seed=1))
    path = eng.run()
    manifests = [read_snapshot(p).manifest for p in list_snapshots(tmp_path / "out")]
    assert [m["rows_seen"] for m in manifests] == [1000, 2000, 3000]
    # the last row falls on a cut: that snapshot is the end's (its weights' full search)
    assert [m["reason"] for m in manifests] == ["periodic", "periodic", "end"]
    assert path.name == "snap-000003"
    # the prequential score counts every row after the first batch, scored before learning
    assert eng.state.preq_rows == 3000 - 250
    assert manifests[-1]["scores"]["validation_pll"] == pytest.approx(
        load_snapshot(path).pll(chain_rows(500, seed=1))
    )
    assert manifests[-1]["peak_rss_mb"] > 0


def test_signal_stops_after_the_batch_with_a_snapshot(tmp_path):
    rows = chain_rows(3000)
    eng = make(tmp_path, rows)
    learner_fit = eng.learner.partial_fit
    calls = []

    def fit_then_signal(batch):
        learner_fit(batch)
        calls.append(len(batch))
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    eng.learner.partial_fit = fit_then_signal
    path = eng.run()
    m = read_snapshot(path).manifest
    assert m["reason"] == "signal" and m["rows_seen"] == 750
    assert m["source"]["position"] == 750
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # handler restored


@pytest.mark.parametrize("cpd", ["tree", "auto"])  # auto: a batch fit at the first end too
def test_resume_in_process_equals_one_run(tmp_path, cpd):
    rows = chain_rows(4000)
    whole = make(tmp_path / "a", rows, every_rows=1000, cpd=cpd)
    whole.run()
    first = make(tmp_path / "b", rows[:2000], every_rows=1000, cpd=cpd)
    first.run()
    second = make(tmp_path / "b", rows, every_rows=1000, cpd=cpd)
    assert second.resume() and second.state.rows_seen == 2000
    second.run()
    assert second.learner.to_bytes() == whole.learner.to_bytes()
    assert load_snapshot(tmp_path / "b" / "out").features.equals(
        load_snapshot(tmp_path / "a" / "out").features
    )
    # each run's last cut is its end's snapshot (with the regressions' batch fit)
    third = make(tmp_path / "b", rows, every_rows=1000, cpd=cpd)  # nothing left: no new snapshot
    assert third.resume()
    assert third.run().name == "snap-000004"
    assert len(list_snapshots(tmp_path / "b" / "out")) == 4


def test_a_row_cadence_given_on_resume_starts_at_its_next_multiple(tmp_path):
    """A run without ``every_rows`` resumed with it: the cadence starts at the first multiple
    after the rows already learned (it used to fail on the first batch: no next cut)."""
    rows = chain_rows(3000)
    make(tmp_path, rows[:1200]).run()  # the end's snapshot only
    resumed = make(tmp_path, rows, every_rows=700)
    assert resumed.resume() and resumed.state.rows_seen == 1200
    resumed.run()
    assert [h["rows_seen"] for h in resumed.state.history] == [1200, 1400, 2100, 2800, 3000]


def test_resume_without_snapshots_starts_fresh_and_rejects_other_schemas(tmp_path):
    eng = make(tmp_path, chain_rows(500))
    assert not eng.resume()
    eng.run()
    other = make(tmp_path, chain_rows(500, n_vars=5))
    with pytest.raises(EngineError, match="schema"):
        other.resume()


def test_bad_batch_keeps_what_was_learned(tmp_path):
    rows = chain_rows(1000).astype(np.int64)
    rows[620, 3] = 7

    class Validating(Source):  # validates per batch, as file sources do
        schema = Schema.binary(8)

        def __init__(self, raw):
            self.raw, self._next = raw, 0

        def _batches(self):
            while self._next < len(self.raw):
                start = self._next
                block = self.schema.validate(self.raw[start : start + 250], row_offset=start)
                self._next = start + len(block)
                yield Batch(block, end=self._next, start=start)

        def position(self):
            return self._next

    eng = StreamLearner(Validating(rows), DTSL(Schema.binary(8)), tmp_path / "out", progress=None)
    with pytest.raises(SchemaError, match="row 620"):
        eng.run()
    m = read_snapshot(list_snapshots(tmp_path / "out")[-1]).manifest
    assert m["reason"] == "error" and m["rows_seen"] == 500 and m["source"]["position"] == 500


def test_oversized_uai_is_skipped_not_fatal(tmp_path, monkeypatch):
    monkeypatch.setattr(engine_module, "SNAPSHOT_UAI_MAX_ENTRIES", 4)
    eng = make(tmp_path, chain_rows(1000))
    path = eng.run()
    m = read_snapshot(path).manifest
    assert "model.uai" not in m["files"] and "uai" in m["skipped_formats"]
    assert "model.mn" in m["files"]


def test_schema_mismatch_and_bad_settings(tmp_path):
    source = ArraySource(chain_rows(10), schema=Schema.binary(8))
    with pytest.raises(EngineError, match="schema"):
        StreamLearner(source, DTSL(Schema.binary(7)), tmp_path)
    with pytest.raises(ValueError, match="every_rows"):
        StreamLearner(source, DTSL(Schema.binary(8)), tmp_path, every_rows=0)
    with pytest.raises(ValueError, match="weights must be one of"):
        DTSL(Schema.binary(8), weights="refine")
    with pytest.raises(EngineError, match="progress must be a text stream"):
        StreamLearner(source, DTSL(Schema.binary(8)), tmp_path, progress="stdout")


def test_refined_snapshots_equal_publish_and_the_engine_needs_a_learner(tmp_path):
    """With validation rows, the snapshot model is DTSL's DN2MN (marginals from the trees,
    which equal the stream's counts) refined on the learner's row sample, every row of it a
    training row, and judged on the validation rows."""
    from streammn.dn.conversion import dn2mn
    from streammn.network.published import publish

    rows, valid = chain_rows(2000), chain_rows(300, seed=1)
    eng = make(tmp_path, rows, validation=valid)
    eng.run()
    sample = eng.learner.weight_sample
    assert sample.rows.shape[0] == 2000
    counts = MarginalCounts(Schema.binary(8)).update(rows)
    closed = dn2mn(eng.learner.to_dependency_network(), marginals=counts)
    expected = publish(closed, sample.rows, valid, probe=False)  # the end's: no probe
    assert eng.model.features.equals(expected.model.features, atol=1e-9)
    record = read_snapshot(eng._last_path).manifest["weights"]
    assert record["published"] == expected.record["published"]
    assert record["held_out_pll"]["closed_form"] == pytest.approx(closed.pll(valid))
    source = ArraySource(rows, schema=Schema.binary(8))
    with pytest.raises(EngineError, match="not a structure learner"):
        StreamLearner(source, object(), tmp_path / "x", progress=None)


@pytest.mark.slow
def test_refining_over_a_variable_of_more_than_64_values_stays_out_of_the_writer(tmp_path):
    """Weights over a 70-valued variable are refined row by row, on parallel kernels only: the
    engine refines them on the learning thread, and background snapshots still succeed."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 70, 6000)
    b = (a % 2) ^ (rng.random(6000) < 0.1)
    rows = np.column_stack([a, b, b ^ (rng.random(6000) < 0.1)]).astype(np.uint8)
    schema = Schema.from_cardinalities([70, 2, 2])
    engine = StreamLearner(
        ArraySource(rows, schema=schema, batch_size=500),
        DTSL(schema),
        tmp_path / "out",
        every_rows=2000,
        progress=None,
    )
    assert engine._refines_row_by_row()
    engine.run()
    records = [read_snapshot(p).manifest["weights"] for p in list_snapshots(tmp_path / "out")]
    assert len(records) == 3 and all(r["choice"] == "refined" for r in records)


@pytest.mark.parametrize("exact", [False, True])
def test_a_run_with_one_snapshot_publishes_what_the_learner_publishes(tmp_path, exact):
    """The engine's refinement at the end of a finite source is the learner's own (a full fit
    from its weights on its sample): the snapshot holds ``learner.to_markov_network()``."""
    rows = np.repeat(np.eye(4, dtype=np.uint8), 500, axis=0)[
        np.random.default_rng(1).permutation(2000)
    ]
    source = ArraySource(rows, schema=Schema.binary(4), batch_size=300)
    learner = DTSL(source.schema, mode="exact" if exact else "hoeffding")
    engine = StreamLearner(source, learner, tmp_path / "out", progress=None)
    engine.run_multipass() if exact else engine.run()
    record = read_snapshot(engine._last_path).manifest["weights"]
    assert record["published"] == "refined" and record["choice"] == "refined"
    assert engine.model.features.equals(engine.learner.to_markov_network().features)
    assert engine.learner.weight_sample.n_seen == 2000


def test_batches_are_learned_on_one_blas_thread_and_the_end_on_all(tmp_path, monkeypatch):
    """OpenBLAS restarts its pool after every fork of a snapshot writer: the loop keeps it to
    one thread (StreamLearner.run); the end (batch fit, last snapshot) has them all again."""
    from threadpoolctl import threadpool_info

    def blas_threads_now():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    seen = {}
    learn, finish = DTSL.partial_fit, DTSL.finish

    def partial_fit(self, batch):
        seen.setdefault("batch", blas_threads_now())
        return learn(self, batch)

    def finish_seen(self):
        seen.setdefault("end", blas_threads_now())
        return finish(self)

    monkeypatch.setattr(DTSL, "partial_fit", partial_fit)
    monkeypatch.setattr(DTSL, "finish", finish_seen)
    before = blas_threads_now()
    assert before  # numpy's BLAS is there to be limited
    make(tmp_path, chain_rows(1000), every_rows=500).run()
    assert seen["batch"] == [1] * len(before) and seen["end"] == before
    assert blas_threads_now() == before
