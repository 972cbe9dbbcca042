"""SIGKILL while the default background writer is at work, for a file, a glob, Kafka and Redis.

By default a periodic snapshot is written by a forked child (:mod:`streammn.stream.publishing`)
while the learner goes on. These tests run real ``streammn learn`` processes and, at kill points
drawn from a seeded RNG (one of a run's first background writes, then a delay into it), SIGKILL

- ``writer``: the forked writer child alone. The learner must fail that snapshot cleanly: exit
  code 1 (``SnapshotWriteFailed``), no traceback, and a message naming the newest durable
  snapshot, the one ``--resume`` continues from;
- ``learner``: the learning process alone; its writer must die with it (``PR_SET_PDEATHSIG``)
  rather than live on as an orphan holding the directory's lock;
- ``group``: both at once (the process group, as ``kill -9 -PGID`` or a container stop does).

A kill goes to a writer still at work: one that finishes before its delay has run out passes
the kill on to the next write. Most kills fall in the conversion, the larger part of a write;
the file-writing steps are hit at named points too, by a writer that kills itself there
(``test_a_writer_killed_at_each_point_...``, in this process, so cheap and exact).

After every kill each listed snapshot must validate (no half snapshot is ever listed) and
``LATEST`` must name one of them; the runs are chained with ``--resume`` (kills in resumed runs
too), and the last ``--resume`` must end with model files and learner checkpoint byte-identical
to an uninterrupted run's. The file test keeps the default refined weights (which continue
from snapshot to snapshot, so the cadence is kept); the glob and log tests use closed-form
weights, which depend on the learner alone, so their last resume writes one snapshot at the
end. The log sources read one partition / stream, so their rows come in one order and, the
learner not depending on how the stream is cut into batches, must end byte-identical to the
uninterrupted run over the same rows from a file: every row learned exactly once. A log must
never have committed (Kafka) or acknowledged (Redis) a message past the newest durable snapshot.

The foreground writer's kill tests are ``test_faults.py`` and ``test_resume_guards.py``;
``test_background_snapshots.py`` kills the learner at three named points of a write.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from streammn import Schema, read_snapshot
from streammn.cli import main
from streammn.planted import LogisticBN
from streammn.stream.publishing import CAN_FORK
from streammn.stream.snapshot import (
    LATEST,
    TMP_PREFIX,
    latest_valid_snapshot,
    list_snapshots,
    resolve_snapshot,
)

from helpers.killresume import ENV, learn_argv

pytestmark = pytest.mark.skipif(
    not (CAN_FORK and sys.platform.startswith("linux")),
    reason="background writers need os.fork; finding them needs /proc; PR_SET_PDEATHSIG",
)

N_ROWS = 24_000
SCHEMA = Schema.binary(16)
EVERY = 1000
# every periodic snapshot from a forked writer (no cheap one written in place): those are killed
OPTIONS = ["--every-rows", EVERY, "--batch-size", 500, "--formats", "json,mn", "--keep", 3]
OPTIONS += ["--in-place-under", 0]
# closed-form weights depend on the learner only, not on the snapshots before: a run with them
# may end with one snapshot and no cadence
CLOSED_FORM = ["--formats", "json,mn", "--weights", "closed-form"]
LOG_OPTIONS = [*OPTIONS, *CLOSED_FORM]
FIRST_WRITE_MAX = 4  # a run is killed in one of its first writes, so a chain of kills fits
MAX_DELAY = 0.1  # seconds into a write; a write here takes 0.05-0.3 s
DEADLINE = 120  # seconds a killed run may take to reach its kill point


@pytest.fixture(scope="module")
def rows():
    return LogisticBN(SCHEMA.n_vars, seed=4).sample(N_ROWS, np.random.default_rng(4))


@pytest.fixture(scope="module")
def files(rows, tmp_path_factory):
    d = tmp_path_factory.mktemp("background-kills")
    _data(d / "rows.data", rows)
    (d / "parts").mkdir()
    for k, part in enumerate(np.array_split(rows, 3)):
        _data(d / "parts" / f"part{k}.data", part)
    (d / "rows.schema").write_text(SCHEMA.libra_line() + "\n")
    return {
        "file": d / "rows.data",
        "glob": d / "parts" / "part*.data",
        "schema": d / "rows.schema",
    }


@pytest.fixture(scope="module")
def whole(files, tmp_path_factory):
    """Uninterrupted runs over the file: with the default weights, refined from snapshot to
    snapshot (the same cadence, then); with the log tests' closed-form weights, which depend
    on the learner only (one snapshot, at the end)."""
    d = tmp_path_factory.mktemp("whole")
    return {
        "refined": _learn(files["file"], d / "refined", *OPTIONS),
        "closed-form": _learn(files["file"], d / "closed-form", *CLOSED_FORM),
    }


def _data(path, rows):
    np.savetxt(path, rows, fmt="%d", delimiter=",")


def _learn(source, out, *options) -> dict:
    """``streammn learn`` in this process (the same code path, without a Python start)."""
    code = main([str(a) for a in ["learn", source, "--out", out, "--quiet", *options]])
    assert code == 0
    return _final(out)


def _final(out) -> dict:
    """The newest snapshot's rows, model files and learner checkpoint."""
    snap = read_snapshot(resolve_snapshot(out))
    names = ["learner.bin", *(n for n in snap.manifest["files"] if n.startswith("model."))]
    return {"rows_seen": snap.manifest["rows_seen"]} | {
        n: snap.file(n).read_bytes() for n in sorted(names)
    }


# finding and killing a background writer ---------------------------------------------------
def _writers(pid: int) -> list[int]:
    """The learn process's children: its forked snapshot writer, while one is at work (the
    publisher forks from the learning thread, the process's main thread)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _running(pid: int) -> bool:
    """``pid`` exists and has not exited (a zombie is a writer that has finished)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@dataclass
class Killed:
    target: str
    returncode: int
    stderr: str
    write: int  # the write of its run the kill fell in (1: the run's first background write)
    delay: float  # seconds after that write's writer was first seen
    root: str  # what the snapshot root held just before the kill (for failure messages)


def _root(out: Path) -> str:
    """The snapshot root in a few words: its entries, and the files of a snapshot in progress."""
    try:
        entries = sorted(os.scandir(out), key=lambda e: e.name)
    except OSError:
        return "(none)"
    words = []
    for e in entries:
        if e.name.startswith(f"{TMP_PREFIX}snap-"):
            try:
                words.append(f"{e.name}[{','.join(sorted(os.listdir(e.path)))}]")
            except OSError:
                words.append(f"{e.name}[gone]")
        elif e.name != ".lock":
            words.append(e.name)
    return " ".join(words)


def kill_during_write(argv, out: Path, target: str, rng: np.random.Generator) -> Killed:
    """Run ``argv`` (a ``streammn learn``) in a session of its own; SIGKILL ``target`` a
    random delay into a random one of its first background writes. A writer that finishes
    before its delay has run out (or that had sent its result when the kill came) passes the
    kill on to the next write, with a delay drawn from half the range."""
    write = int(rng.integers(1, FIRST_WRITE_MAX + 1))
    proc = subprocess.Popen(
        argv,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: "group" kills it and its writer only
    )
    seen: list[int] = []
    writer = root = None
    misses = 0
    learner_killed = False
    give_up = time.monotonic() + DEADLINE
    try:
        while proc.poll() is None:
            assert time.monotonic() < give_up, f"no background write to kill in {DEADLINE} s"
            seen += [c for c in _writers(proc.pid) if c not in seen]
            if len(seen) < write or not _running(seen[-1]):
                time.sleep(0.0005)
                continue
            writer = seen[-1]
            delay = float(rng.uniform(0, MAX_DELAY)) / 2**misses
            time.sleep(delay)
            write, misses = len(seen) + 1, misses + 1  # unless the kill ends the run
            if not _running(writer):  # it finished first
                continue
            root = _root(out)
            if target == "writer":  # the learner stops at once, unless the kill came too late
                os.kill(writer, signal.SIGKILL)
            else:
                (os.killpg if target == "group" else os.kill)(proc.pid, signal.SIGKILL)
                learner_killed = True
                break
    finally:
        if proc.poll() is None and not learner_killed:  # a failure above: leave no run behind
            os.killpg(proc.pid, signal.SIGKILL)
    returncode = proc.wait(timeout=60)
    stderr = proc.stderr.read()
    proc.stderr.close()
    assert root is not None, f"the run ended (exit {returncode}) before any kill: {stderr}"
    deadline = time.monotonic() + 10
    while _running(writer):  # killed, finished, or taken down by its learner's death
        assert time.monotonic() < deadline, f"writer {writer} outlived its learner"
        time.sleep(0.01)
    return Killed(target, returncode, stderr, len(seen), delay, root)


def check_after_kill(killed: Killed, out: Path) -> None:
    """What any kill must leave: the right exit, and only valid snapshots listed."""
    if killed.target == "writer":  # the learner saw its writer die: a failed snapshot
        assert killed.returncode == 1, killed
        assert "killed by signal 9" in killed.stderr, killed
        assert "Traceback" not in killed.stderr, killed
    else:
        assert killed.returncode == -signal.SIGKILL, killed
    listed = list_snapshots(out)
    for path in listed:
        try:  # the manifest and every file's checksum
            read_snapshot(path)
        except Exception as error:
            raise AssertionError(f"{path.name} is listed but invalid after {killed}") from error
    if (out / LATEST).exists():
        assert (out / (out / LATEST).read_text().strip()) in listed, killed
    if killed.target == "writer":  # the message names the snapshot --resume continues from
        assert (
            f"the last durable snapshot is {listed[-1]}; --resume continues from it"
            if listed
            else "no snapshot was completed"
        ) in killed.stderr, killed


def kill_chain(
    source, out, options, targets, seed, last_options=None, committed=None
) -> list[Killed]:
    """Kill a run of ``source`` with each of ``targets`` in turn (the first run fresh, the
    next ones resumed), checking what each kill left; then resume it to the end here (with
    ``last_options``, if given: the cadence may change on resume). ``committed(position)``,
    given the newest durable snapshot's source position (None without one), checks that a log
    committed nothing beyond it."""
    rng = np.random.default_rng(seed)
    kills = []
    for k, target in enumerate(targets):
        resume = ["--resume"] if k else []
        killed = kill_during_write(learn_argv(source, out, *options, *resume), out, target, rng)
        check_after_kill(killed, out)
        if committed is not None:
            durable = latest_valid_snapshot(out)
            committed(durable.manifest["source"]["position"] if durable else None)
        kills.append(killed)
    _learn(source, out, *(options if last_options is None else last_options), "--resume")
    assert not [p.name for p in out.iterdir() if p.name.startswith(TMP_PREFIX)]
    return kills


# the tests ----------------------------------------------------------------------------------
@pytest.mark.slow  # kills real `streammn learn` processes
@pytest.mark.parametrize(
    "kind,targets,seed",
    [("file", ["writer", "learner", "group"], 11), ("glob", ["group", "writer"], 21)],
)
def test_kills_during_background_writes_resume_byte_identical(
    files, whole, tmp_path, kind, targets, seed
):
    out = tmp_path / "killed"
    if kind == "file":  # the default weights: refined, snapshot after snapshot
        kill_chain(files[kind], out, OPTIONS, targets, seed)
        assert _final(out) == whole["refined"]
    else:
        kill_chain(files[kind], out, LOG_OPTIONS, targets, seed, CLOSED_FORM)
        assert _final(out) == whole["closed-form"]
    cuts = [read_snapshot(p).manifest["rows_seen"] for p in list_snapshots(out)]
    assert cuts == sorted(cuts) and all(c % EVERY == 0 for c in cuts)


def _lines(rows) -> list[bytes]:
    return [",".join(map(str, r)).encode() for r in rows.tolist()]


@pytest.mark.slow  # kills real `streammn learn` processes
@pytest.mark.parametrize("partitions", [1, 3])
def test_kafka_kills_resume_to_every_row_exactly_once(rows, files, whole, tmp_path, partitions):
    """One partition: the rows in one order, the learner byte-identical to the file's. Three:
    the order interleaves partitions as the fetches come, so every row learned exactly once is
    checked on the learned counts (its trees' leaves partition the rows they counted)."""
    pytest.importorskip("confluent_kafka", reason="the 'kafka' extra is not installed")
    from confluent_kafka import Consumer, Producer, TopicPartition

    from streammn.connectors.kafka_mock import MockKafkaCluster
    from helpers.killresume import learned_value_counts, same_counts, value_counts

    parts = np.array_split(rows, partitions)

    def produce(bootstrap, topic):
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for p, part in enumerate(parts):
            for line in _lines(part):
                producer.produce(topic, line, partition=p)
        assert producer.flush(30) == 0

    def committed(bootstrap, topic) -> list[int]:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g"})
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            return [tp.offset for tp in consumer.committed(tps, timeout=30)]
        finally:
            consumer.close()

    with MockKafkaCluster() as cluster:
        topic = f"t-{uuid.uuid4().hex[:10]}"
        cluster.create_topic(topic, partitions)
        produce(cluster.bootstrap, topic)
        uri = (
            f"kafka://{cluster.bootstrap}/{topic}?group=g&format=csv"
            f"&partitions={','.join(map(str, range(partitions)))}"
            f"&stop_at_end=true&max_wait=0.2&broker_timeout=30"
        )

        def committed_at_most(position):  # no offset committed past the durable snapshot
            for p, offset in enumerate(committed(cluster.bootstrap, topic)):
                assert offset <= (position or {}).get(str(p), 0)

        options = [*LOG_OPTIONS, "--schema", files["schema"]]
        last = [*CLOSED_FORM, "--schema", files["schema"]]
        targets = ["writer", "learner"] if partitions == 1 else ["group", "writer"]
        out = tmp_path / "killed"
        kill_chain(uri, out, options, targets, 30 + partitions, last, committed_at_most)
        assert committed(cluster.bootstrap, topic) == [len(part) for part in parts]
    if partitions == 1:
        assert _final(out) == whole["closed-form"]
    else:
        final = read_snapshot(resolve_snapshot(out))
        assert final.manifest["rows_seen"] == N_ROWS
        assert same_counts(learned_value_counts(final), value_counts(SCHEMA, rows))


@pytest.mark.slow  # kills real `streammn learn` processes
def test_redis_kills_resume_to_every_row_exactly_once(rows, files, whole, tmp_path):
    pytest.importorskip("redis", reason="the 'redis' extra is not installed")
    from streammn.connectors.redis import parse_id
    from helpers.redisserver import REDIS_SERVER, RedisServer

    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (Debian package redis-server)")
    server = RedisServer(tmp_path)
    client = server.client

    def acknowledged() -> list[bytes]:
        """The entries the group was delivered and has acknowledged, oldest first."""
        group = next(g for g in client.xinfo_groups("rows") if g["name"] == b"g")
        delivered = [e for e, _ in client.xrange("rows", max=group["last-delivered-id"])]
        pending = client.xpending_range("rows", "g", min="-", max="+", count=N_ROWS)
        return [e for e in delivered if e not in {p["message_id"] for p in pending}]

    def acknowledged_at_most(position):  # no entry acknowledged past the durable snapshot
        last = acknowledged()[-1:]
        assert not last or (position and parse_id(last[0]) <= parse_id(position["rows"]))

    try:
        pipe = client.pipeline()
        for line in _lines(rows):
            pipe.xadd("rows", {"data": line})
        pipe.execute()
        uri = (
            f"redis://{server.address}/rows?group=g&format=csv"
            f"&stop_at_end=true&max_wait=0.2&poll_timeout=0.2&broker_timeout=30"
        )
        options = [*LOG_OPTIONS, "--schema", files["schema"]]
        last = [*CLOSED_FORM, "--schema", files["schema"]]
        targets = ["writer", "group"]
        kill_chain(uri, tmp_path / "killed", options, targets, 41, last, acknowledged_at_most)
        assert len(acknowledged()) == N_ROWS
    finally:
        server.stop()
    assert _final(tmp_path / "killed") == whole["closed-form"]


# the writer killed at named points of its write, in this process (fast, and exact) ------------
SHORT = 8000  # rows of the named-point runs: the writer of snapshot KILLED_SNAPSHOT dies
KILLED_SNAPSHOT = 4  # the first with a snapshot to retire (--keep 3)
WRITER_KILL_POINTS = {  # where, and whether that snapshot is durable once the writer is dead
    "tmp dir made, no file written": False,
    "files written, not the manifest": False,
    "manifest written, not renamed": False,
    "renamed, LATEST not moved": True,
    "LATEST moved, retiring snap-000001": True,
}


@pytest.fixture(scope="module")
def short(rows, tmp_path_factory):
    d = tmp_path_factory.mktemp("short")
    _data(d / "rows.data", rows[:SHORT])
    return d / "rows.data", _learn(d / "rows.data", d / "whole", *OPTIONS)


def writer_dies_at(monkeypatch, point: str, root: Path) -> None:
    """Make the forked writer of snapshot ``KILLED_SNAPSHOT`` SIGKILL itself at ``point`` (the
    patches are inherited by the fork; this process itself is left alone)."""
    from streammn.stream import snapshot

    learner_pid = os.getpid()
    writing = {"sequence": None, "root fsyncs": 0}
    fill, write_durably, fsync_dir = (
        snapshot.SnapshotWriter._fill,
        snapshot._write_durably,
        snapshot._fsync_dir,
    )

    def die_if(condition: bool) -> None:
        if condition and os.getpid() != learner_pid and writing["sequence"] == KILLED_SNAPSHOT:
            os.kill(os.getpid(), signal.SIGKILL)

    def dying_fill(self, tmp, files, sequence, manifest):
        writing["sequence"] = sequence
        die_if(point == "tmp dir made, no file written")
        fill(self, tmp, files, sequence, manifest)

    def dying_write_durably(path, data):
        die_if(point == "files written, not the manifest" and Path(path).name == "manifest.json")
        write_durably(path, data)

    def dying_fsync_dir(path):
        path = Path(path)
        die_if(point == "manifest written, not renamed" and path.name.startswith(TMP_PREFIX))
        if path == root:  # after the rename, after LATEST's, after each retired snapshot's
            writing["root fsyncs"] += 1
            die_if(point == "renamed, LATEST not moved" and writing["root fsyncs"] == 1)
            die_if(point == "LATEST moved, retiring snap-000001" and writing["root fsyncs"] == 3)
        fsync_dir(path)

    monkeypatch.setattr(snapshot.SnapshotWriter, "_fill", dying_fill)
    monkeypatch.setattr(snapshot, "_write_durably", dying_write_durably)
    monkeypatch.setattr(snapshot, "_fsync_dir", dying_fsync_dir)


@pytest.mark.parametrize("point", list(WRITER_KILL_POINTS))
def test_a_writer_killed_at_each_point_fails_the_run_naming_the_newest_durable_snapshot(
    short, tmp_path, monkeypatch, capsys, point
):
    source, whole_short = short
    out = tmp_path / "killed"
    writer_dies_at(monkeypatch, point, out)
    code = main([str(a) for a in ["learn", source, "--out", out, "--quiet", *OPTIONS]])
    err = capsys.readouterr().err
    monkeypatch.undo()
    assert code == 1 and "killed by signal 9" in err, err
    listed = list_snapshots(out)
    for path in listed:
        read_snapshot(path)  # every listed snapshot is whole
    durable = KILLED_SNAPSHOT if WRITER_KILL_POINTS[point] else KILLED_SNAPSHOT - 1
    assert listed[-1].name == f"snap-{durable:06d}"
    assert read_snapshot(listed[-1]).manifest["rows_seen"] == durable * EVERY
    # the message names the snapshot --resume continues from, also one the dead writer
    # completed before the learner heard of it
    assert f"the last durable snapshot is {listed[-1]}; --resume continues from it" in err, err
    assert _learn(source, out, *OPTIONS, "--resume") == whole_short
    assert not [p.name for p in out.iterdir() if p.name.startswith(TMP_PREFIX)]
