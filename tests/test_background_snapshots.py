"""Background snapshots: same contents as the blocking writer, exact row cadence, a slow or full
disk, and kill -9 of the learner while its forked writer is at work."""

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from streammn.connectors import ArraySource, write_parquet
from streammn import Schema, load_snapshot, read_snapshot
from streammn.stream import snapshot as snapshot_module
from streammn.cli import main as cli_main
from streammn.dtsl import DTSL
from streammn.stream.engine import EngineError, StreamLearner
from streammn.stream.publishing import CAN_FORK, SnapshotWriteFailed
from streammn.stream.snapshot import latest_valid_snapshot, list_snapshots

from helpers.datasets import ROOT
from test_engine import chain_rows

pytestmark = pytest.mark.skipif(not CAN_FORK, reason="background snapshots need os.fork")

TIMING_KEYS = ("created", "timings", "peak_rss_mb", "engine")


def make(out, rows, batch_size=250, cpd="tree", **kw):
    """An engine over ``rows`` whose periodic snapshots all come from a forked writer (unless
    ``in_place_under`` is given: cheap ones are written in place by default)."""
    kw.setdefault("in_place_under", 0)
    source = ArraySource(rows, schema=Schema.binary(rows.shape[1]), batch_size=batch_size)
    learner = DTSL(source.schema, kappa=0.1, grace_period=100, cpd=cpd)
    return StreamLearner(source, learner, out, progress=None, **kw)


def snapshot_contents(out):
    """Every snapshot's files (manifest without its timings) by sequence."""
    contents = []
    for path in list_snapshots(out):
        snap = read_snapshot(path)
        files = {name: p.read_bytes() for name, p in snap.files.items()}
        manifest = {
            k: v
            for k, v in snap.manifest.items()
            if k not in TIMING_KEYS and k != "manifest_sha256"
        }  # covers the timings
        manifest.pop("files")
        contents.append((path.name, files, manifest))
    return contents


def slow_writes(monkeypatch, seconds):
    """Every durable write in the snapshot writer sleeps first (a slow disk)."""
    write = snapshot_module._write_durably

    def slow(path, data):
        time.sleep(seconds)
        write(path, data)

    monkeypatch.setattr(snapshot_module, "_write_durably", slow)


@pytest.mark.parametrize(
    "validation, cpd", [(False, "tree"), (True, "tree"), (False, "auto")]
)  # auto: the writer child chooses each conditional without numba's thread pool
def test_background_snapshots_equal_the_blocking_writers(tmp_path, validation, cpd):
    rows = chain_rows(3000)
    extra = {"validation": chain_rows(300, seed=1)} if validation else {}
    background = make(tmp_path / "bg", rows, every_rows=1000, cpd=cpd, **extra)
    blocking = make(tmp_path / "fg", rows, every_rows=1000, background=False, cpd=cpd, **extra)
    assert background.publisher.background and not blocking.publisher.background
    background.run()
    blocking.run()
    a, b = snapshot_contents(tmp_path / "bg"), snapshot_contents(tmp_path / "fg")
    cuts = [1000, 2000, 3000]  # the last is the end's (the batch fit, with auto)
    assert [m["rows_seen"] for _, _, m in a] == cuts
    assert a == b
    history = read_snapshot(list_snapshots(tmp_path / "bg")[-1]).manifest["engine"]["history"]
    assert [h["rows_seen"] for h in history] == cuts
    assert all(h["pause_seconds"] >= 0 for h in history[:2])
    assert [h.get("in_place") for h in history] == [False, False, None]  # None: the end's
    assert [h.get("in_place") for h in blocking.state.history] == [True, True, None]


def test_cheap_periodic_snapshots_are_written_in_place_and_costly_ones_forked(
    tmp_path, monkeypatch
):
    """A periodic snapshot is written in the learning thread when the one before took less
    than ``in_place_under`` seconds to convert and write, else by a forked child; the files
    are the same either way. The second snapshot's writes are slowed past the threshold, so
    the third goes back to a child."""
    write = snapshot_module._write_durably
    slowed = []

    def slow_second(path, data):
        if "snap-000002" in str(path) and not slowed:  # its first file
            slowed.append(path)
            time.sleep(2.5)
        write(path, data)

    monkeypatch.setattr(snapshot_module, "_write_durably", slow_second)
    rows = chain_rows(5000)
    mixed = make(tmp_path / "mixed", rows, every_rows=1000, in_place_under=2.0)
    forked = make(tmp_path / "forked", rows, every_rows=1000, in_place_under=0)
    mixed.run()
    forked.run()
    in_place = [h.get("in_place") for h in mixed.state.history]
    assert in_place == [False, True, False, True, None]  # the first has nothing to go by
    assert mixed.state.history[1]["write_seconds"] > 2.0
    assert [h.get("in_place") for h in forked.state.history] == [False] * 4 + [None]
    assert snapshot_contents(tmp_path / "mixed") == snapshot_contents(tmp_path / "forked")
    with pytest.raises(EngineError, match="in_place_under"):
        make(tmp_path / "x", rows, in_place_under=-1)


def test_every_rows_cuts_batches_at_exact_multiples(tmp_path):
    rows = chain_rows(80_000)
    data = tmp_path / "train.parquet"
    write_parquet(data, rows, Schema.binary(rows.shape[1]), row_group_size=10_000)
    out = tmp_path / "snaps"
    assert (
        cli_main(
            [
                "learn",
                str(data),
                "--out",
                str(out),
                "--every-rows",
                "20000",
                "--formats",
                "json",
                "--quiet",
            ]
        )
        == 0
    )
    manifests = [read_snapshot(p).manifest for p in list_snapshots(out)]
    assert [m["rows_seen"] for m in manifests] == [20_000, 40_000, 60_000, 80_000]
    assert [m["source"]["position"]["offset"] for m in manifests] == [
        20_000,
        40_000,
        60_000,
        80_000,
    ]
    # the model does not depend on the cuts: the same as one run without snapshots on the way
    whole = tmp_path / "whole"
    assert cli_main(["learn", str(data), "--out", str(whole), "--formats", "json", "--quiet"]) == 0
    learned = read_snapshot(list_snapshots(out)[-1]).file("learner.bin").read_bytes()
    assert learned == read_snapshot(list_snapshots(whole)[-1]).file("learner.bin").read_bytes()
    # resuming from a cut inside a source batch (40,000 of the batch 0..65,535) ends the same
    resumed = tmp_path / "resumed"
    assert (
        cli_main(
            [
                "learn",
                str(data),
                "--out",
                str(resumed),
                "--every-rows",
                "20000",
                "--formats",
                "json",
                "--quiet",
            ]
        )
        == 0
    )
    for path in list_snapshots(resumed)[2:]:
        snapshot_module._remove(path)
    assert (
        cli_main(
            [
                "learn",
                str(data),
                "--out",
                str(resumed),
                "--every-rows",
                "20000",
                "--formats",
                "json",
                "--quiet",
                "--resume",
            ]
        )
        == 0
    )
    assert snapshot_contents(resumed)[1:] == snapshot_contents(out)[1:]


@pytest.mark.slow
def test_a_slow_disk_does_not_stall_learning(tmp_path, monkeypatch):
    slow_writes(monkeypatch, 0.1)
    rows = chain_rows(4000)
    skipping = make(tmp_path / "skip", rows, every_rows=500, when_busy="skip")
    skipping.run()
    first = skipping.published[0]
    assert first["rows_seen"] == 500
    assert first["durable_at_rows"] > 500  # learning went on while it was being written
    cuts = [p["rows_seen"] for p in skipping.published]
    assert all(c % 500 == 0 for c in cuts) and cuts[-1] == 4000
    # never more than one snapshot in flight: each cut comes after the previous is durable
    for before, after in zip(skipping.published, skipping.published[1:]):
        assert after["rows_seen"] >= before["durable_at_rows"]
    plain = make(tmp_path / "plain", rows, background=False)  # one snapshot, at the end
    plain.run()
    assert skipping.learner.to_bytes() == plain.learner.to_bytes()

    waiting = make(tmp_path / "wait", rows[:2000], every_rows=500)  # default: wait
    waiting.run()
    assert [p["rows_seen"] for p in waiting.published] == [500, 1000, 1500, 2000]
    for before, after in zip(waiting.published, waiting.published[1:]):
        assert after["rows_seen"] >= before["durable_at_rows"]


def test_disk_full_stops_with_exit_1_and_the_last_snapshot_resumable(tmp_path, monkeypatch, capsys):
    rows = chain_rows(6000)
    data = tmp_path / "train.parquet"
    write_parquet(data, rows, Schema.binary(rows.shape[1]), row_group_size=1000)
    write = snapshot_module._write_durably

    def full_from_the_second(path, data):
        if ".tmp-snap-000002" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        write(path, data)

    monkeypatch.setattr(snapshot_module, "_write_durably", full_from_the_second)
    out = tmp_path / "snaps"
    common = [
        "learn",
        str(data),
        "--out",
        str(out),
        "--every-rows",
        "2000",
        "--batch-size",
        "500",
        "--formats",
        "json,mn",
        "--quiet",
    ]
    assert cli_main(common) == 1
    message = capsys.readouterr().err
    assert "No space left on device" in message and "snap-000001" in message
    assert [p.name for p in list_snapshots(out)] == ["snap-000001"]
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp-snap")]
    assert latest_valid_snapshot(out).manifest["rows_seen"] == 2000

    monkeypatch.setattr(snapshot_module, "_write_durably", write)
    assert cli_main(common + ["--resume"]) == 0
    whole = tmp_path / "whole"
    assert (
        cli_main(
            [
                "learn",
                str(data),
                "--out",
                str(whole),
                "--every-rows",
                "2000",
                "--batch-size",
                "500",
                "--formats",
                "json,mn",
                "--quiet",
            ]
        )
        == 0
    )
    assert snapshot_contents(out) == snapshot_contents(whole)


def test_a_failed_foreground_write_is_a_clear_error_too(tmp_path, monkeypatch):
    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(snapshot_module, "_write_durably", full)
    eng = make(tmp_path / "out", chain_rows(1000), background=False)
    with pytest.raises(SnapshotWriteFailed, match="No space left.*no snapshot was completed"):
        eng.run()


KILLED_RUN = """
import sys, time
import numpy as np
sys.path[:0] = [{root!r}, {tests!r}]
from streammn.stream import snapshot
from test_background_snapshots import chain_rows, make

def slow(step):
    def slowly(*args):
        time.sleep(0.1)
        return step(*args)
    return slowly

for name in ("_write_durably", "_fsync_file", "_fsync_dir"):  # a slow disk
    setattr(snapshot, name, slow(getattr(snapshot, name)))
make({out!r}, chain_rows(3000), every_rows=1000, formats=("json",)).run()
"""


def _children(pid):
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def _killed_at(out: Path):
    """Conditions on the snapshot root, each a point in the writing of snapshot 2."""

    def tmp_files():
        tmp = [p for p in out.glob(".tmp-snap-000002-*")] if out.is_dir() else []
        return {f.name for f in tmp[0].iterdir()} if tmp else set()

    return {
        "first file written": lambda: len(tmp_files()) >= 1,
        "manifest written, not renamed": lambda: "manifest.json" in tmp_files(),
        "renamed, LATEST not updated": lambda: (out / "snap-000002").is_dir(),
    }


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and PDEATHSIG")
@pytest.mark.parametrize("point", list(_killed_at(Path("."))))
def test_kill_9_while_a_background_snapshot_is_written(tmp_path, point):
    rows = chain_rows(3000)
    whole = make(tmp_path / "whole", rows, every_rows=1000, formats=("json",))
    whole.run()

    out = tmp_path / "killed"
    script = KILLED_RUN.format(root=str(ROOT), tests=str(Path(__file__).parent), out=str(out))
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE)
    reached = _killed_at(out)[point]
    writers = []
    deadline = time.monotonic() + 300
    while not reached():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        writers = _children(proc.pid) or writers
        time.sleep(0.002)
    writers = _children(proc.pid) or writers
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for pid in writers:  # the forked writer dies with the learner
        deadline = time.monotonic() + 60
        while Path(f"/proc/{pid}").exists() and _state(pid) != "Z":
            assert time.monotonic() < deadline, f"writer {pid} outlived the learner"
            time.sleep(0.01)

    survivor = latest_valid_snapshot(out)
    assert survivor.manifest["rows_seen"] in (1000, 2000)
    assert survivor.manifest["rows_seen"] == 2000 or point != "renamed, LATEST not updated"
    load_snapshot(survivor.path)  # readable

    resumed = make(out, rows, every_rows=1000, formats=("json",))
    assert resumed.resume()
    resumed.run()
    assert resumed.learner.to_bytes() == whole.learner.to_bytes()
    assert snapshot_contents(out)[-1][1] == snapshot_contents(tmp_path / "whole")[-1][1]


def _state(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return "gone"


def test_a_writer_that_starts_numba_threads_fails_loudly(tmp_path, monkeypatch):
    """numba's OpenMP pool cannot run in a forked child; a writer that tries is killed and the
    run stops with a clear error instead of writing whatever the kernel left behind."""
    import numba

    from streammn.dn import conversion as dn_to_mn

    eng = make(tmp_path / "out", chain_rows(3000), every_rows=1000)
    eng.learner.fit(chain_rows(500)).pll_terms(chain_rows(100))  # numba's thread pool starts
    if numba.threading_layer() != "omp":
        pytest.skip(f"numba's {numba.threading_layer()} layer does not guard against fork")
    eng = make(tmp_path / "out", chain_rows(3000), every_rows=1000)
    monkeypatch.setattr(dn_to_mn, "_convert_serial", dn_to_mn._convert)
    with pytest.raises(SnapshotWriteFailed, match="killed by signal"):
        eng.run()
    assert not list_snapshots(tmp_path / "out")


SIGNALLED_RUN = KILLED_RUN.replace("make(", "print('started', flush=True)\nmake(")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_sigterm_to_the_process_group_ends_with_a_final_snapshot(tmp_path):
    rows = chain_rows(3000)
    whole = make(tmp_path / "whole", rows, every_rows=1000, formats=("json",))
    whole.run()
    out = tmp_path / "stopped"
    script = SIGNALLED_RUN.format(root=str(ROOT), tests=str(Path(__file__).parent), out=str(out))
    proc = subprocess.Popen(
        [sys.executable, "-c", script], start_new_session=True, stderr=subprocess.PIPE
    )
    writing = _killed_at(out)["first file written"]
    deadline = time.monotonic() + 300
    while not writing():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.002)
    os.killpg(proc.pid, signal.SIGTERM)  # the learner and its writer alike
    assert proc.wait() == 0, proc.stderr.read().decode()
    last = latest_valid_snapshot(out)
    assert last.manifest["reason"] == "signal" and last.manifest["rows_seen"] >= 2000
    history = last.manifest["engine"]["history"]
    assert [h["rows_seen"] for h in history] == [1000, last.manifest["rows_seen"]]
    resumed = make(out, rows, every_rows=1000, formats=("json",))
    assert resumed.resume()
    resumed.run()
    assert resumed.learner.to_bytes() == whole.learner.to_bytes()


@pytest.mark.parametrize("max_skipped", [0, 1, 3])
def test_skipping_is_bounded_and_each_snapshot_says_how_stale_it_was(
    tmp_path, monkeypatch, max_skipped
):
    """A starved writer (every write slow) under ``when_busy="skip"``: at most ``max_skipped``
    due snapshots in a row are dropped, then one waits, so the durable snapshot is never more
    than ``max_skipped + 1`` cadences behind (issue 40); each durable snapshot's history entry
    says how long after its cut it became durable and how many rows learning had gone on."""
    slow_writes(monkeypatch, 0.05)
    rows = chain_rows(6000)
    engine = make(
        tmp_path / "skip", rows, batch_size=100, every_rows=200, when_busy="skip",
        max_skipped=max_skipped,
    )  # fmt: skip
    engine.run()
    cuts = [p["rows_seen"] for p in engine.published]
    assert cuts[0] == 200 and cuts[-1] == 6000
    gaps = np.diff(cuts)
    assert gaps.max() <= 200 * (max_skipped + 1)
    state = engine.state
    # due at 200, 400, ... 6000, written or skipped, and the end's own when 6000 was skipped
    assert state.snapshots_skipped + len(cuts) in (30, 31)
    assert (state.snapshots_skipped > 0) == (max_skipped > 0)  # at 0, every one waits
    durable = [h for h in state.history if "latency_rows" in h]
    assert len(durable) == len(cuts)
    assert all(h["latency_seconds"] > 0 and h["latency_rows"] >= 0 for h in durable)
    assert any(h["latency_rows"] > 0 for h in durable)  # learning went on during a write
    with pytest.raises(EngineError, match="max_skipped"):
        make(tmp_path / "x", rows, max_skipped=-1)
