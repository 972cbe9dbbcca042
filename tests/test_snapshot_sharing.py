"""Snapshots share unchanged files with the previous one (hard links), and stay whole alone."""

import os

import numpy as np
import pytest

from streammn.connectors import ArraySource
from streammn import DTSL, Schema
from streammn.formats import model_files
from streammn.grafting import EdgeGrafting, planted_potts
from streammn.stream.engine import StreamLearner
from streammn.stream.snapshot import (
    Keyed,
    SnapshotError,
    SnapshotWriter,
    list_snapshots,
    load_snapshot,
    read_snapshot,
)


def inode(path):
    return os.stat(path).st_ino


class Maker:
    """A snapshot file made by a callable, counting how often it is made."""

    def __init__(self, data: bytes):
        self.data, self.calls = data, 0

    def __call__(self, path):
        self.calls += 1
        path.write_bytes(self.data)


def test_unchanged_bytes_are_linked_changed_ones_written(tmp_path):
    writer = SnapshotWriter(tmp_path, keep=5)
    first = writer.write({"same": b"x" * 1000, "moving": b"a"}, {"rows_seen": 1})
    assert writer.last_write == {"bytes_written": 1001, "bytes_shared": 0}
    second = writer.write({"same": b"x" * 1000, "moving": b"b"}, {"rows_seen": 2})
    assert writer.last_write == {"bytes_written": 1, "bytes_shared": 1000}
    assert inode(first / "same") == inode(second / "same")
    assert inode(first / "moving") != inode(second / "moving")
    # each manifest lists what its snapshot holds, as if written whole
    for path, moving in ((first, b"a"), (second, b"b")):
        snap = read_snapshot(path)
        assert snap.file("moving").read_bytes() == moving
        assert snap.manifest["files"]["same"]["size"] == 1000


def test_keyed_files_are_made_only_when_their_key_changes(tmp_path):
    writer = SnapshotWriter(tmp_path, keep=5)
    one, two = Maker(b"model one"), Maker(b"model two")
    a = writer.write({"model": Keyed("k1", one)}, {"rows_seen": 1})
    b = writer.write({"model": Keyed("k1", one)}, {"rows_seen": 2})
    c = writer.write({"model": Keyed("k2", two)}, {"rows_seen": 3})
    assert one.calls == 1 and two.calls == 1
    assert inode(a / "model") == inode(b / "model") != inode(c / "model")
    assert read_snapshot(b).manifest["files"]["model"]["key"] == "k1"
    assert (c / "model").read_bytes() == b"model two"
    assert writer.last_write == {"bytes_written": 9, "bytes_shared": 0}


def test_shared_files_outlive_the_snapshot_they_came_from(tmp_path):
    writer = SnapshotWriter(tmp_path, keep=1)
    for i in range(4):
        writer.write({"state": b"unchanged" * 100, "n": str(i).encode()}, {"rows_seen": i})
    (only,) = list_snapshots(tmp_path)
    snap = read_snapshot(only)  # its shared file is whole after three deletions
    assert snap.file("state").read_bytes() == b"unchanged" * 100
    assert os.stat(only / "state").st_nlink == 1


def test_damage_to_a_shared_file_is_refused_by_every_snapshot_and_never_linked_again(tmp_path):
    writer = SnapshotWriter(tmp_path, keep=5)
    a = writer.write({"state": b"good state", "n": b"1"}, {"rows_seen": 1})
    b = writer.write({"state": b"good state", "n": b"2"}, {"rows_seen": 2})
    with open(b / "state", "r+b") as f:  # one file on disk: both snapshots hold it
        f.write(b"bad!")
    for path in (a, b):
        with pytest.raises(SnapshotError, match="checksum mismatch"):
            read_snapshot(path)
    c = writer.write({"state": b"good state", "n": b"3"}, {"rows_seen": 3})
    assert inode(c / "state") != inode(b / "state")  # a good copy, written anew
    assert read_snapshot(c).file("state").read_bytes() == b"good state"
    assert writer.last_write["bytes_shared"] == 0


def test_a_previous_snapshot_with_a_bad_manifest_shares_nothing(tmp_path):
    writer = SnapshotWriter(tmp_path, keep=5)
    a = writer.write({"state": b"same"}, {"rows_seen": 1})
    (a / "manifest.json").write_text("{ not json")
    b = writer.write({"state": b"same"}, {"rows_seen": 2})
    assert inode(a / "state") != inode(b / "state")
    read_snapshot(b)


def test_model_key_follows_the_model_files():
    schema = Schema.binary(3)
    rows = np.random.default_rng(0).integers(0, 2, size=(500, 3))
    mn = DTSL(schema, cpd="tree", weights="closed-form").fit(rows).to_markov_network()
    again = model_files(mn.schema, mn.features.with_weights(mn.features.weights.copy())).key
    assert model_files(mn.schema, mn.features).key == again
    moved = mn.features.weights.copy()
    moved[0] += 1e-12  # bit for bit: any weight that moves is another model
    moved = mn.features.with_weights(moved)
    assert model_files(mn.schema, moved).key != again


def test_a_stream_shares_what_did_not_change_and_resumes_from_shared_files(tmp_path):
    """Edge grafting's model changes only at its structure updates: the snapshots between two
    updates share the model files (and the manifest records the bytes each wrote and shared);
    a run resumed from such a snapshot ends where an uninterrupted run ends."""
    mrf = planted_potts("random", 8, states=2, coupling=(0.8, 1.5), seed=3)
    rows = mrf.sample(12000, seed=4, chains=8)

    def run(out, n_rows, resume=False):
        source = ArraySource(rows[:n_rows], schema=mrf.schema, batch_size=1000)
        learner = EdgeGrafting(mrf.schema, update_every=3000, weights="closed-form")
        engine = StreamLearner(
            source, learner, out, every_rows=1000, keep=100, progress=None, background=False
        )
        if resume:
            assert engine.resume()
        engine.run()
        return engine

    whole = run(tmp_path / "whole", 12000)
    snaps = list_snapshots(tmp_path / "whole")
    keys = [read_snapshot(p).manifest["files"]["model.json"]["key"] for p in snaps]
    linked = [inode(p / "model.json") == inode(q / "model.json") for p, q in zip(snaps, snaps[1:])]
    assert linked == [a == b for a, b in zip(keys, keys[1:])]  # shared exactly when unchanged
    assert sum(linked) >= 3
    history = whole.state.history
    assert all(h["bytes_written"] > 0 and h["bytes_shared"] >= 0 for h in history)
    assert any(h["bytes_shared"] > 0 for h in history)

    run(tmp_path / "cut", 7000)  # stops between updates: its last snapshots share files
    resumed = run(tmp_path / "cut", 12000, resume=True)
    assert resumed.learner.to_bytes() == whole.learner.to_bytes()
    assert load_snapshot(tmp_path / "cut").features.equals(
        load_snapshot(tmp_path / "whole").features
    )
