"""Readers of a snapshot root racing its writer's retention (issue 42, finding 2), and ``score``
refusing a file of the wrong width at once (finding 5).

A writer with ``keep=1`` removes the snapshot a reader has just picked as soon as it publishes
the next one: during the reader's checksums, or between them and its reading of the model file.
The first tests put the writer's removal at each of those points deterministically (a hook in
the reader's own steps), the last one races a real writer process.
"""

import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streammn import Schema
from streammn.stream import snapshot
from streammn.cli import main
from streammn.errors import EXIT_BAD_INPUT, EXIT_UNAVAILABLE, exit_code
from streammn.features import FeatureSet
from streammn.stream.snapshot import (
    LATEST,
    SnapshotError,
    SnapshotMissingFile,
    SnapshotVanished,
    SnapshotWriter,
    latest_snapshot,
    latest_valid_snapshot,
    list_snapshots,
    load_snapshot,
    model_files,
    with_snapshot,
)

NAMES = ["a", "b", "c", "d", "e"]


def _model(weight: float = 0.5):
    schema = Schema.from_cardinalities([2] * len(NAMES), NAMES)
    fs = FeatureSet.from_features(
        schema, [(weight, [(0, 1, True), (1, 1, True)]), (-0.25, [(3, 0, True)]), (0.0, [])]
    )
    return schema, fs


def _publish(writer: SnapshotWriter, i: int):
    """Snapshot ``i``: the model files (the first feature's weight is ``i``) and a checkpoint."""
    schema, fs = _model(float(i))
    return writer.write({**model_files(schema, fs), "learner.ckpt": bytes(1000)}, {"rows_seen": i})


def _weight(model) -> float:
    return float(model.features.weights[0])


@pytest.fixture
def root(tmp_path):
    """A root with one snapshot (weight 1) and its writer, keeping one snapshot."""
    writer = SnapshotWriter(tmp_path / "out", keep=1)
    _publish(writer, 1)
    return writer


def _undercut(monkeypatch, module, name, action, times=1):
    """Run ``action`` (the writer's next step) before the first ``times`` calls of
    ``module.name``, a step of the reader; calls made by the action itself pass straight on."""
    original = getattr(module, name)
    state = {"left": times, "busy": False}

    def hooked(*args, **kwargs):
        if state["left"] and not state["busy"]:
            state["left"] -= 1
            state["busy"] = True
            try:
                action()
            finally:
                state["busy"] = False
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, hooked)
    return state


# a snapshot removed under the reader is passed over for the newest ----------------------------
@pytest.mark.parametrize("spec", ["root", LATEST, "latest"])
def test_snapshot_removed_during_its_checksums_is_passed_over(root, monkeypatch, spec):
    where = root.directory if spec == "root" else root.directory / spec
    _undercut(monkeypatch, snapshot, "_digest", lambda: _publish(root, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a removed snapshot is not an invalid one
        model = load_snapshot(where)
    assert _weight(model) == 2.0
    assert [p.name for p in list_snapshots(root.directory)] == ["snap-000002"]


@pytest.mark.parametrize("read", [latest_snapshot, latest_valid_snapshot])
def test_latest_snapshot_passes_over_a_removed_one(root, monkeypatch, read):
    _undercut(monkeypatch, snapshot, "_digest", lambda: _publish(root, 2))
    assert read(root.directory).manifest["rows_seen"] == 2


def test_snapshot_removed_before_its_model_is_read_is_passed_over(root, monkeypatch):
    _undercut(monkeypatch, snapshot, "read_json", lambda: _publish(root, 2))
    assert _weight(load_snapshot(root.directory)) == 2.0


def test_score_reads_the_newest_when_its_snapshot_is_removed(root, monkeypatch, tmp_path, capsys):
    from streammn import model_spec

    data = tmp_path / "rows.csv"
    np.savetxt(data, np.eye(5, dtype=int), fmt="%d", delimiter=",", header=",".join(NAMES))
    data.write_text(data.read_text().lstrip("# "))
    _undercut(monkeypatch, model_spec, "read_model", lambda: _publish(root, 2))
    code = main(["score", str(root.directory), str(data), "--json"])
    assert code == 0, capsys.readouterr().err
    assert '"rows": 5' in capsys.readouterr().out


def test_a_listing_taken_while_the_writer_swaps_snapshots_is_taken_again(root, monkeypatch):
    """readdir need not show entries renamed while it runs: a listing taken as the writer
    renames the newest snapshot in and the oldest out can hold neither."""
    original = snapshot.list_snapshots
    listings = [[]]  # the reader's first listing holds no snapshot

    def listing(directory):
        return listings.pop() if listings else original(directory)

    monkeypatch.setattr(snapshot, "list_snapshots", listing)
    assert _weight(load_snapshot(root.directory)) == 1.0
    assert listings == []


def test_a_stale_latest_alone_is_still_no_snapshot(root):
    (path,) = list_snapshots(root.directory)
    for name in list(path.iterdir()):
        name.unlink()
    path.rmdir()
    with pytest.raises(SnapshotError, match="no snapshot was completed here .* a stale LATEST"):
        load_snapshot(root.directory)


def test_a_file_missing_while_a_newer_snapshot_appears_is_retried(root, monkeypatch):
    """A file system whose view of the directory lags (NFS): the directory still shows, its
    files are gone, and a newer snapshot has appeared. That is retention, not damage."""
    first = list_snapshots(root.directory)[0]

    def lagging_removal():
        _publish(SnapshotWriter(root.directory, keep=2), 2)  # the old directory stays...
        (first / "model.mn").unlink()  # ...but its files are going

    _undercut(monkeypatch, snapshot, "_digest", lagging_removal)
    assert _weight(load_snapshot(root.directory)) == 2.0


def test_a_reader_undercut_every_time_gives_up_without_calling_it_corruption(root, monkeypatch):
    monkeypatch.setattr(snapshot, "READ_ATTEMPTS", 4)
    state = _undercut(
        monkeypatch, snapshot, "_digest", lambda: _publish(root, 2 + state["left"]), times=10
    )
    with pytest.raises(SnapshotVanished, match="removed by its writer .* 4 times in a row") as e:
        load_snapshot(root.directory)
    assert exit_code(e.value) == EXIT_UNAVAILABLE
    assert "missing" not in str(e.value) and "corrupt" not in str(e.value)
    assert state["left"] == 6  # four attempts, no more


def test_a_snapshot_directory_named_on_its_own_is_not_replaced(root, monkeypatch):
    (path,) = list_snapshots(root.directory)
    _undercut(monkeypatch, snapshot, "_digest", lambda: _publish(root, 2))
    with pytest.raises(SnapshotVanished, match="removed while being read") as e:
        load_snapshot(path)
    assert exit_code(e.value) == EXIT_UNAVAILABLE and str(path) in str(e.value)


# damage is still damage ---------------------------------------------------------------------
def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage, error, message",
    [
        (lambda s: _flip(s / "model.json"), SnapshotError, "checksum mismatch"),
        (lambda s: (s / "learner.ckpt").unlink(), SnapshotMissingFile, "listed in the manifest"),
        (lambda s: (s / "manifest.json").unlink(), SnapshotMissingFile, "missing manifest"),
    ],
)
def test_damage_is_refused_at_once(root, monkeypatch, damage, error, message):
    (path,) = list_snapshots(root.directory)
    damage(path)
    # counts the reader's looks at the root (a no-op before each of the first 100)
    calls = _undercut(monkeypatch, snapshot, "list_snapshots", lambda: None, times=100)
    for where, kind in ((root.directory, SnapshotError), (path, error)):
        with pytest.raises(kind, match=message) as e:
            load_snapshot(where)
        assert not isinstance(e.value, SnapshotVanished)
        assert exit_code(e.value) == EXIT_BAD_INPUT
    assert calls["left"] >= 97  # one look at the root, not a round of retries


def test_an_error_reading_a_snapshot_still_there_is_not_retried(root):
    with pytest.raises(SnapshotError, match="no file 'model.bin'"):
        with_snapshot(root.directory, lambda snap: snap.file("model.bin"))


# a real writer process ----------------------------------------------------------------------
WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from streammn import Schema
    from streammn.features import FeatureSet
    from streammn.stream.snapshot import SnapshotWriter, model_files

    schema = Schema.binary(8)
    fs = FeatureSet.from_features(schema, [(0.1 * j, [(j, 1, True), (j + 1, 0, True)])
                                           for j in range(7)])
    writer = SnapshotWriter(sys.argv[1], keep=1)
    checkpoint = np.random.default_rng(0).bytes(1 << 20)  # a learner state of 1 MB
    i = 0
    while True:
        writer.write({**model_files(schema, fs), "learner.ckpt": checkpoint}, {"rows_seen": i})
        i += 1
        if i == 1:
            print("first", flush=True)
""")


def test_load_snapshot_never_fails_while_a_keep_1_writer_publishes(tmp_path):
    out = tmp_path / "out"
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(out)], stdout=subprocess.PIPE, text=True
    )
    failures = []
    try:
        assert child.stdout.readline().strip() == "first"
        first = latest_snapshot(out).sequence
        start = time.monotonic()
        reads = written = 0
        while (reads < 300 or written < 20) and time.monotonic() - start < 8.0:
            try:
                load_snapshot(out)
            except Exception as e:  # every kind of failure counts
                failures.append(f"{type(e).__name__}: {e}")
            reads += 1
            if reads % 50 == 0:  # snapshots published (and removed) under the reads so far
                written = latest_snapshot(out).sequence - first
    finally:
        child.kill()
        child.wait()
    assert failures == [], f"{len(failures)} of {reads} reads failed: {failures[:3]}"
    assert reads >= 100 and written >= 20  # the writer did replace snapshots under the reads


# score refuses a file of the wrong width before decoding it ---------------------------------
@pytest.fixture
def five_variable_model(tmp_path):
    schema, fs = _model()
    SnapshotWriter(tmp_path / "model", keep=1).write(model_files(schema, fs), {"rows_seen": 0})
    return tmp_path / "model"


def _parquet(path, names, n_rows=200):
    rows = np.random.default_rng(1).integers(0, 2, (n_rows, len(names)))
    pq.write_table(pa.table({name: rows[:, j] for j, name in enumerate(names)}), path)
    return path


def test_score_refuses_a_parquet_file_of_another_width_before_decoding_it(
    five_variable_model, tmp_path, monkeypatch, capsys
):
    wide = _parquet(tmp_path / "wide.parquet", [f"c{j}" for j in range(500)])

    def decode(*args, **kwargs):
        raise AssertionError("rows were decoded before the width was checked")

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", decode)
    start = time.monotonic()
    code = main(["score", str(five_variable_model), str(wide)])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT, err
    assert "wide.parquet" in err and "expected 5 columns" in err and "got 500" in err
    assert time.monotonic() - start < 2.0


def test_score_still_selects_the_models_columns_of_a_wider_parquet_file(
    five_variable_model, tmp_path, capsys
):
    wider = _parquet(tmp_path / "wider.parquet", NAMES + [f"c{j}" for j in range(50)])
    assert main(["score", str(five_variable_model), str(wider), "--json"]) == 0
    assert '"rows": 200' in capsys.readouterr().out
