"""Snapshots: atomic publication, retention, validation, and surviving a killed writer."""

import json
import math
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from streammn import Schema
from streammn.features import FeatureSet
from streammn.formats import read_libra_mn, read_uai
from streammn.stream.snapshot import (
    LATEST,
    LOCK,
    SnapshotDirectoryBusy,
    SnapshotError,
    SnapshotWriteFailed,
    SnapshotWriter,
    latest_snapshot,
    latest_valid_snapshot,
    list_snapshots,
    load_snapshot,
    model_files,
    model_summary,
    read_snapshot,
    resolve_snapshot,
)

ROOT = Path(__file__).resolve().parents[1]


def small_model():
    schema = Schema.from_cardinalities([2, 3, 2], ["a", "b", "c"])
    fs = FeatureSet.from_features(
        schema,
        [
            (0.1, [(0, 1, True), (1, 2, False)]),
            (-math.inf, [(2, 0, True)]),
            (0.5, []),
            (2.0, [(1, 0, True), (2, 1, True)]),
        ],
    )
    return schema, fs


def write_n(writer, n, start=0):
    return [
        writer.write({"data.bin": f"payload {i}".encode()}, {"rows_seen": i})
        for i in range(start, start + n)
    ]


def test_snapshots_are_numbered_and_latest_is_newest(tmp_path):
    writer = SnapshotWriter(tmp_path / "out", keep=10)
    paths = write_n(writer, 3)
    assert [p.name for p in paths] == ["snap-000001", "snap-000002", "snap-000003"]
    assert list_snapshots(tmp_path / "out") == paths
    snap = latest_snapshot(tmp_path / "out")
    assert snap.path == paths[-1] and snap.sequence == 3
    assert snap.manifest["rows_seen"] == 2
    assert (paths[-1] / "data.bin").read_bytes() == b"payload 2"
    assert (tmp_path / "out" / LATEST).read_text() == "snap-000003\n"
    assert sorted(os.listdir(tmp_path / "out")) == [LOCK, LATEST] + [p.name for p in paths]


def test_manifest_contents(tmp_path):
    writer = SnapshotWriter(tmp_path, keep=2)
    path = writer.write(
        {"x": b"hello", "y": lambda p: p.write_bytes(b"")},
        {"rows_seen": 7, "source": {"desc": "a.parquet", "position": [3, 5]}},
    )
    doc = json.loads((path / "manifest.json").read_text())
    assert doc["format"] == "streammn-snapshot" and doc["format_version"] == 2
    assert doc["streammn_version"] and doc["created"].endswith("+00:00")
    assert doc["source"]["position"] == [3, 5] and doc["sequence"] == 1
    assert doc["files"] == {
        "x": {
            "size": 5,
            "sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        },
        "y": {
            "size": 0,
            "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        },
    }


def test_retention_keeps_the_newest(tmp_path):
    writer = SnapshotWriter(tmp_path, keep=2)
    paths = write_n(writer, 5)
    assert list_snapshots(tmp_path) == paths[-2:]
    # numbering stays monotone across writers, even after old snapshots are gone
    again = SnapshotWriter(tmp_path, keep=2).write({"a": b"1"}, {})
    assert again.name == "snap-000006"


def test_invalid_arguments(tmp_path):
    with pytest.raises(ValueError, match="keep"):
        SnapshotWriter(tmp_path, keep=0)
    writer = SnapshotWriter(tmp_path)
    for name in ("manifest.json", "../x", "a/b", ".tmp-x", ""):
        with pytest.raises(ValueError, match="invalid snapshot file name"):
            writer.write({name: b""}, {})
    with pytest.raises(ValueError, match="set by the snapshot writer"):
        writer.write({"a": b""}, {"files": 1})
    with pytest.raises(ValueError, match="JSON-serialisable"):
        writer.write({"a": b""}, {"score": float("nan")})
    with pytest.raises(SnapshotError, match="did not create the file"):
        writer.write({"a": lambda p: None}, {})
    assert list_snapshots(tmp_path) == []


def test_failed_write_leaves_nothing_behind(tmp_path):
    writer = SnapshotWriter(tmp_path)
    (first,) = write_n(writer, 1)

    def boom(path):
        path.write_bytes(b"partial")
        raise OSError("disk full")

    with pytest.raises(SnapshotWriteFailed, match="disk full.*snap-000001 is intact"):
        writer.write({"ok": b"1", "bad": boom}, {})
    assert sorted(os.listdir(tmp_path)) == [LOCK, LATEST, first.name]
    assert latest_snapshot(tmp_path).path == first


def corrupt(path: Path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda s: corrupt(s / "data.bin"), "checksum mismatch"),
        (lambda s: (s / "data.bin").write_bytes((s / "data.bin").read_bytes()[:-3]), "truncated"),
        (lambda s: (s / "data.bin").unlink(), "missing"),
        (lambda s: (s / "manifest.json").unlink(), "missing manifest"),
        (lambda s: (s / "manifest.json").write_text('{"format": '), "unreadable manifest"),
        (
            lambda s: (s / "manifest.json").write_text(
                (s / "manifest.json")
                .read_text()
                .replace('"format_version": 2', '"format_version": 9')
            ),
            "unsupported snapshot format version 9",
        ),
    ],
)
def test_damaged_snapshot_is_rejected_and_previous_still_loads(tmp_path, damage, message):
    writer = SnapshotWriter(tmp_path)
    first, second = write_n(writer, 2)
    damage(second)
    with pytest.raises(SnapshotError, match=message) as err:
        read_snapshot(second)
    assert str(second) in str(err.value)
    with pytest.raises(SnapshotError):
        latest_snapshot(tmp_path)
    assert read_snapshot(first).manifest["rows_seen"] == 0
    with pytest.warns(UserWarning, match="skipping invalid snapshot"):
        assert latest_valid_snapshot(tmp_path).path == first


def test_half_written_temp_dir_is_ignored_then_cleaned(tmp_path):
    writer = SnapshotWriter(tmp_path)
    (first,) = write_n(writer, 1)
    half = tmp_path / ".tmp-snap-000002-deadbeef"
    half.mkdir()
    (half / "data.bin").write_bytes(b"part")
    with pytest.raises(SnapshotError, match="unfinished"):
        read_snapshot(half)
    assert list_snapshots(tmp_path) == [first]
    assert latest_valid_snapshot(tmp_path).path == first
    second = SnapshotWriter(tmp_path).write({"a": b"b"}, {})
    assert second.name == "snap-000002" and not half.exists()


def test_missing_and_empty(tmp_path):
    assert latest_valid_snapshot(tmp_path / "nothing") is None
    assert list_snapshots(tmp_path / "nothing") == []
    with pytest.raises(SnapshotError, match="no such snapshot directory"):
        read_snapshot(tmp_path / "snap-000001")
    with pytest.raises(SnapshotError, match="no LATEST file"):
        latest_snapshot(tmp_path)
    (tmp_path / "snap-000001").mkdir()  # a complete-looking name without a manifest
    with pytest.raises(SnapshotError, match="no valid snapshot"):
        latest_valid_snapshot(tmp_path)


def test_model_files_and_load_snapshot(tmp_path):
    schema, fs = small_model()
    writer = SnapshotWriter(tmp_path / "out")
    path = writer.write(
        {**model_files(schema, fs), "learner.ckpt": b"\x00\x01"},
        {"rows_seen": 10, **model_summary(schema, fs)},
    )
    snap = read_snapshot(path)
    assert set(snap.files) == {"model.json", "model.mn", "model.uai", "learner.ckpt"}
    assert snap.manifest["n_features"] == 4 and snap.manifest["n_edges"] == 2
    for where in (path, tmp_path / "out", tmp_path / "out" / LATEST, tmp_path / "out" / "latest"):
        assert resolve_snapshot(where) == path
        model = load_snapshot(where)
        assert model.schema == schema and model.features.equals(fs)
    assert read_libra_mn(snap.file("model.mn"), schema=schema)[1].equals(fs)
    assert read_uai(snap.file("model.uai"))[0].n_vars == 3
    with pytest.raises(SnapshotError, match="no file 'model.bin'"):
        snap.file("model.bin")
    with pytest.raises(ValueError, match="unknown model formats"):
        model_files(schema, fs, formats=("json", "bn"))


def test_model_summary_counts_edges():
    schema = Schema.binary(5)
    fs = FeatureSet.from_features(
        schema,
        [
            (1.0, [(0, 1, True), (1, 1, True), (2, 0, True)]),
            (1.0, [(2, 1, True), (1, 0, True)]),
            (1.0, [(4, 1, True)]),
            (1.0, []),
        ],
    )
    assert model_summary(schema, fs) == {"n_vars": 5, "n_features": 4, "n_edges": 3}


# killed writers -----------------------------------------------------------------------------
CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from streammn.stream.snapshot import SnapshotWriter

    out, mode, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
    writer = SnapshotWriter(out, keep=3)

    def stall(path):
        with open(path, "wb") as f:
            f.write(b"x" * 1000)
            f.flush()
            print("stalled", flush=True)
            time.sleep(60)

    def big(i):
        return lambda path: path.write_bytes(bytes([i % 256]) * (2_000_000 + 10_000 * (i % 7)))

    if mode == "stall":
        writer.write({"data.bin": b"done"}, {"rows_seen": start})
        writer.write({"data.bin": stall}, {"rows_seen": start + 1})
    else:
        i = start
        while True:
            writer.write({"data.bin": big(i), "small": str(i).encode()}, {"rows_seen": i})
            print(i, flush=True)
            i += 1
""")


def run_child(tmp_path, mode, start):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "out"), mode, str(start)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )


def check_invariants(out: Path):
    """After any crash: every listed snapshot and LATEST's target is complete and valid."""
    snaps = list_snapshots(out)
    for path in snaps:
        snap = read_snapshot(path)
        small = int((path / "small").read_text()) if "small" in snap.files else None
        assert small is None or small == snap.manifest["rows_seen"]
    if (out / LATEST).exists():
        assert latest_snapshot(out).path in snaps
    return snaps


def test_writer_killed_while_writing_a_file(tmp_path):
    child = run_child(tmp_path, "stall", 0)
    assert child.stdout.readline().strip() == "stalled"
    child.send_signal(signal.SIGKILL)
    child.wait()
    out = tmp_path / "out"
    assert [p.name for p in out.iterdir() if p.name.startswith(".tmp-")]  # left behind
    (first,) = check_invariants(out)
    assert latest_snapshot(out).path == first and latest_valid_snapshot(out).path == first
    nxt = SnapshotWriter(out).write({"data.bin": b"after"}, {"rows_seen": 2})
    assert nxt.name == "snap-000002"
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.slow
def test_writer_killed_at_random_moments(tmp_path):
    rng = random.Random(5)
    last_sequence = 0
    start = 0
    for _ in range(4):
        child = run_child(tmp_path, "loop", start)
        assert child.stdout.readline().strip() == str(start)  # one snapshot done
        time.sleep(rng.uniform(0.0, 0.3))
        child.send_signal(signal.SIGKILL)
        child.wait()
        snaps = check_invariants(tmp_path / "out")
        assert 1 <= len(snaps) <= 4  # keep=3, plus one completed just before removal
        resume = latest_valid_snapshot(tmp_path / "out")
        assert resume.path == snaps[-1] and resume.sequence > last_sequence
        last_sequence = resume.sequence
        start = resume.manifest["rows_seen"] + 1
    seqs = [read_snapshot(p).sequence for p in list_snapshots(tmp_path / "out")]
    assert seqs == sorted(seqs) and np.all(np.diff(seqs) == 1)


def _hold_lock(directory: Path, pid_in_file: str, seconds: float) -> subprocess.Popen:
    """A process holding the directory's lock for ``seconds`` with ``pid_in_file`` recorded,
    as the forked writer of a killed run does (it inherited the lock, the pid is its parent's)."""
    code = textwrap.dedent(f"""
        import fcntl, sys, time
        lock = open({str(directory / LOCK)!r}, "a+")
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.seek(0); lock.truncate(); lock.write({pid_in_file!r}); lock.flush()
        print("held", flush=True)
        time.sleep({seconds})
    """)
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.slow
def test_a_killed_runs_writer_is_waited_for_a_live_writer_is_not(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid names no process now
    tmp_path.mkdir(exist_ok=True)
    holder = _hold_lock(tmp_path, str(dead.pid), 1.0)
    writer = SnapshotWriter(tmp_path)
    t0 = time.monotonic()
    writer.acquire()  # waits for the orphaned writer to finish, then holds the directory
    assert time.monotonic() - t0 > 0.3
    assert holder.wait() == 0
    writer.release()
    holder = _hold_lock(tmp_path, str(os.getpid()), 1.0)  # a live process: busy at once
    with pytest.raises(SnapshotDirectoryBusy, match=f"another process \\(pid {os.getpid()}\\)"):
        SnapshotWriter(tmp_path).acquire()
    holder.wait()
