"""Fault injection, the fast suite (the longer one is ``benchmarks/faults.py``): SIGKILL and resume
for every file source, disk full while writing a snapshot, two writers on one directory, a
Redis server that loses its state. Bad inputs and their exit codes: ``test_exit_codes.py``."""

from __future__ import annotations

import errno
import signal
import subprocess
import time

import numpy as np
import pytest

from streammn.connectors import open_source, write_parquet
from streammn import Schema, read_snapshot
from streammn.stream import snapshot
from streammn.cli import main
from streammn.stream.snapshot import list_snapshots, resolve_snapshot

from helpers.killresume import ENV, kill_after, learn_argv, outcome

# every test kills or fails real `streammn learn` processes
pytestmark = pytest.mark.slow

SCHEMA = Schema.binary(8)
N_ROWS = 6000
OPTIONS = ["--batch-size", 250, "--every-rows", 500, "--formats", "json", "--keep", 3]


def _rows(n=N_ROWS, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, (n, SCHEMA.n_vars))
    flip = rng.random((n, 4)) < 0.1
    x[:, 4:] = x[:, :4] ^ flip  # planted pairs, so the trees grow
    return x.astype(np.uint8)


def _csv(path, rows, header):
    with open(path, "w") as f:
        if header:
            f.write(",".join(SCHEMA.names) + "\n")
        np.savetxt(f, rows, fmt="%d", delimiter=",")


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("faults")
    rows = _rows()
    parts = np.array_split(rows, 3)
    write_parquet(d / "rows.parquet", rows, SCHEMA, row_group_size=700)
    _csv(d / "rows.csv", rows, header=True)
    _csv(d / "rows.data", rows, header=False)
    for kind in ("data", "parquet", "csv"):
        (d / kind).mkdir()
        for k, part in enumerate(parts):
            if kind == "parquet":
                write_parquet(d / kind / f"part{k}.parquet", part, SCHEMA, row_group_size=300)
            else:
                _csv(d / kind / f"part{k}.{kind}", part, header=kind == "csv")
    return {
        "parquet file": d / "rows.parquet",
        "csv file": d / "rows.csv",
        "data file": d / "rows.data",
        "data directory": d / "data",
        "parquet directory": d / "parquet",
        "csv glob": d / "csv" / "part*.csv",
        "parquet glob": d / "parquet" / "*.parquet",
    }


def _learn_in_process(source, out, *extra):
    code = main([str(a) for a in ["learn", source, "--out", out, "--quiet", *OPTIONS, *extra]])
    assert code == 0
    return outcome(out)


@pytest.mark.parametrize(
    "kind",
    [
        "parquet file",
        "csv file",
        "data file",
        "data directory",
        "parquet directory",
        "csv glob",
        "parquet glob",
    ],
)
def test_sigkill_then_resume_ends_byte_identical(sources, tmp_path, kind, capsys):
    source = sources[kind]
    whole = _learn_in_process(source, tmp_path / "whole")
    assert whole["rows_seen"] == N_ROWS
    killed = kill_after(source, tmp_path / "killed", *OPTIONS, min_snapshots=2)
    assert not killed["finished"] and 0 < killed["rows_at_kill"] < N_ROWS
    resumed = _learn_in_process(source, tmp_path / "killed", "--resume")
    assert resumed == whole


def test_disk_full_keeps_the_previous_snapshot_valid_and_resumable(
    sources, tmp_path, monkeypatch, capsys
):
    source = sources["data file"]
    whole = _learn_in_process(source, tmp_path / "whole")
    real = snapshot._write_durably
    written = []

    def filling_up(path, data):  # the disk fills while the fourth snapshot is written
        written.append(path)
        if sum(p.name == "learner.bin" for p in written) == 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(snapshot, "_write_durably", filling_up)
    out = tmp_path / "full"
    # in the foreground: a forked writer would count its writes in its own copy of the list
    # (tests/test_background_snapshots.py covers a disk that fills under a background writer)
    code = main(
        [
            str(a)
            for a in ["learn", source, "--out", out, "--quiet", *OPTIONS, "--foreground-snapshots"]
        ]
    )
    err = capsys.readouterr().err
    monkeypatch.setattr(snapshot, "_write_durably", real)
    assert code == 1, err
    assert "No space left on device" in err and "snap-000003 is intact" in err
    assert [p.name for p in list_snapshots(out)] == ["snap-000001", "snap-000002", "snap-000003"]
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp-")]
    assert read_snapshot(resolve_snapshot(out)).manifest["rows_seen"] == 1500
    assert _learn_in_process(source, out, "--resume") == whole


def test_a_second_learn_into_the_same_directory_is_refused_at_once(sources, tmp_path):
    source, out = sources["data file"], tmp_path / "out"
    first = subprocess.Popen(
        learn_argv(source, out, *OPTIONS),
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not list_snapshots(out) and first.poll() is None:
        time.sleep(0.002)
    first.send_signal(signal.SIGSTOP)  # mid-run, holding the directory, for as long as we like
    try:
        second = subprocess.run(
            learn_argv(source, out, *OPTIONS), env=ENV, capture_output=True, text=True, timeout=120
        )
    finally:
        first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    assert second.returncode == 4, second.stderr
    assert f"pid {first.pid}" in second.stderr and "one writer" in second.stderr
    sequence = [read_snapshot(p).manifest["rows_seen"] for p in list_snapshots(out)]
    assert sequence == sorted(sequence) and sequence[-1] == N_ROWS  # one run's snapshots


def test_redis_server_restarted_without_its_state_is_unavailable(tmp_path):
    pytest.importorskip("redis", reason="the 'redis' extra is not installed")
    from helpers.redisserver import REDIS_SERVER, RedisServer

    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (Debian package redis-server)")
    server = RedisServer(tmp_path)
    rows = _rows(300)
    pipe = server.client.pipeline()
    for r in rows:
        pipe.xadd("s", {"data": ",".join(map(str, r))})
    pipe.execute()
    uri = f"redis://{server.address}/s?group=g&format=csv&max_wait=0.1&broker_timeout=20"
    source = open_source(uri, schema=SCHEMA, batch_size=100)
    batches = iter(source)
    first = next(batches)
    port = server.port
    server.stop()
    server = RedisServer(tmp_path, port=port)  # back on the same port, empty
    try:
        from streammn.connectors.base import SourceUnavailable

        with pytest.raises(SourceUnavailable, match="without persistence"):
            list(batches)
        assert first.n_rows == 100
    finally:
        source.close()
        server.stop()
