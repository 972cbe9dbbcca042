"""Every documented exit code of the ``streammn`` command, driven through the CLI: 0 ok, 1 other,
2 usage (every numeric option out of range), 3 bad input, 4 unavailable, 130 SIGINT, 143 SIGTERM.

Most cases call ``streammn.cli.main`` in this process (the same code path as the command, minus
the interpreter start); the signals and the second writer run real processes.
"""

import errno
import gzip
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streammn.connectors import write_parquet
from streammn import Schema
from streammn.cli import commands
from streammn.cli import main
from streammn.stream.snapshot import SnapshotWriter, read_snapshot, resolve_snapshot

from helpers.datasets import ROOT

SCHEMA = Schema.binary(6)


def _rows(n, seed=0):
    return np.random.default_rng(seed).integers(0, 2, (n, SCHEMA.n_vars)).astype(np.uint8)


def _data(path, rows):
    np.savetxt(path, rows, fmt="%d", delimiter=",")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("exit")
    rows = _rows(3000)
    _data(d / "train.data", rows)
    (d / "binary.schema").write_text(",".join(["2"] * 6) + "\n")
    bad = rows.copy().astype(np.int64)
    bad[2500, 3] = 5
    _data(d / "badrow.data", bad)
    (d / "empty.data").write_text("")
    (d / "header.csv").write_text(",".join(SCHEMA.names) + "\n")
    (d / "latin1.data").write_bytes(b"1,0,1,0,1,0\n1,\xe9,0,0,0,0\n")
    (d / "gzip.data").write_bytes(gzip.compress(b"1,0,1,0,1,0\n" * 50))
    (d / "token.data").write_text("1,0,1,0,1,0\n1,a,0,0,0,0\n")
    (d / "garbage.mn").write_text("this is not a model\n")
    ts = pa.table({"t": pa.array([0, 1], pa.timestamp("s")), "x": pa.array([0, 1], pa.int8())})
    pq.write_table(ts, d / "timestamp.parquet")
    (d / "mixed").mkdir()
    write_parquet(d / "mixed" / "a.parquet", rows[:100], SCHEMA)
    write_parquet(d / "mixed" / "b.parquet", rows[:100, :4], Schema.binary(4))
    model = d / "snaps"
    assert main(["learn", str(d / "train.data"), "--out", str(model), "--quiet"]) == 0
    return d


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_exit_0(files, capsys):
    assert _run(capsys, "score", files / "snaps", files / "train.data")[0] == 0


@pytest.mark.parametrize(
    "option",
    [
        ["--batch-size", "0"],
        ["--keep", "0"],
        ["--grace-period", "0"],
        ["--delta", "2"],
        ["--delta", "0"],
        ["--tau", "-1"],
        ["--threshold", "5"],
        ["--lambda", "-1"],
        ["--lambda", "0"],
        ["--kappa", "0"],
        ["--kappa", "nan"],
        ["--max-edges", "-1"],
        ["--max-tree-leaves", "-1"],
        ["--max-leaves", "0"],
        ["--every-rows", "0"],
        ["--every-seconds", "0"],
        ["--every-seconds", "inf"],
        ["--formats", ""],
        ["--formats", "mn,uai"],
        ["--formats", "json,xml"],
        ["--seed", "-1"],
        ["--batch-size", "ten"],
    ],
)
def test_learn_option_out_of_range_exits_2(files, tmp_path, capsys, option):
    code, err = _run(capsys, "learn", files / "train.data", "--out", tmp_path / "o", *option)
    assert code == 2, err
    assert option[0] in err
    assert not (tmp_path / "o").exists()  # refused before anything was written


@pytest.mark.parametrize(
    "argv",
    [
        ["score", "{snaps}", "{data}", "--cmll", "--samples", "0"],
        ["score", "{snaps}", "{data}", "--burn-in", "-1"],
        ["inspect", "{snaps}", "--top", "-1"],
        ["sample", "{snaps}", "-n", "-1"],
        ["demo", "--vars", "1"],
        ["demo", "--rows", "0"],
    ],
)
def test_other_options_out_of_range_exit_2(files, capsys, argv):
    argv = [a.format(snaps=files / "snaps", data=files / "train.data") for a in argv]
    assert _run(capsys, *argv)[0] == 2


@pytest.mark.parametrize(
    "argv,message",
    [
        (["learn", "{d}/badrow.data", "--schema", "{d}/binary.schema"], "row 2500, column 3"),
        (["score", "{d}/snaps", "{d}/empty.data"], "empty"),
        (["score", "{d}/snaps", "{d}/header.csv"], "no rows to score"),
        (["score", "{d}/garbage.mn", "{d}/train.data"], "garbage.mn"),
        (["learn", "{d}/latin1.data"], "row 1"),
        (["learn", "{d}/gzip.data"], "not UTF-8"),
        (["learn", "{d}/token.data"], "row 1, column 1: non-integer value 'a'"),
        (["learn", "{d}/timestamp.parquet"], "holds no discrete states"),
        (["learn", "{d}/mixed"], "no column 'x4', 'x5'"),
    ],
)
def test_bad_input_exits_3(files, tmp_path, capsys, argv, message):
    argv = [a.format(d=files) for a in argv]
    if argv[0] == "learn":
        argv += ["--out", str(tmp_path / "o"), "--quiet"]
    code, err = _run(capsys, *argv)
    assert code == 3, err
    assert message in err and "Traceback" not in err


def test_a_bad_row_keeps_every_row_before_it(files, tmp_path, capsys):
    out = tmp_path / "o"
    code, _ = _run(
        capsys,
        "learn",
        files / "badrow.data",
        "--schema",
        files / "binary.schema",
        "--out",
        out,
        "--quiet",
        "--batch-size",
        "1000",
    )
    assert code == 3
    manifest = read_snapshot(resolve_snapshot(out)).manifest
    assert manifest["rows_seen"] == 2500 and manifest["reason"] == "error"


@pytest.mark.parametrize(
    "argv",
    [
        ["learn", "{d}/missing.data"],
        ["learn", "{d}/train.data", "--schema", "{d}/missing.schema"],
        ["score", "{d}/snaps", "{d}/missing.parquet"],
    ],
)
def test_unavailable_input_exits_4(files, tmp_path, capsys, argv):
    argv = [a.format(d=files) for a in argv]
    if argv[0] == "learn":
        argv += ["--out", str(tmp_path / "o"), "--quiet"]
    code, err = _run(capsys, *argv)
    assert code == 4, err
    assert "missing" in err


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_unreadable_file_exits_4(files, tmp_path, capsys, monkeypatch):
    path = _data(tmp_path / "locked.data", _rows(10))
    path.chmod(0)
    if os.geteuid() == 0:  # root reads any file: refuse the opening as the kernel would
        real = pa.input_stream

        def refuse(where, *args, **kwargs):
            if str(where) == str(path):
                raise PermissionError(errno.EACCES, "Permission denied", str(where))
            return real(where, *args, **kwargs)

        monkeypatch.setattr(pa, "input_stream", refuse)
    code, err = _run(capsys, "learn", path, "--out", tmp_path / "o")
    assert code == 4 and "locked.data" in err and "Permission denied" in err


def test_second_writer_into_one_directory_exits_4_at_once(files, tmp_path, capsys):
    out = tmp_path / "o"
    holder = SnapshotWriter(out)
    holder.acquire()  # as a running `learn` holds it
    try:
        code, err = _run(capsys, "learn", files / "train.data", "--out", out, "--quiet")
    finally:
        holder.release()
    assert code == 4 and "one writer per snapshot directory" in err
    assert not list(out.glob("snap-*"))
    assert _run(capsys, "learn", files / "train.data", "--out", out, "--quiet")[0] == 0
    assert _run(capsys, "inspect", out)[0] == 0  # readers never need the lock


def test_anything_else_exits_1(files, capsys, monkeypatch):
    def broken(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(commands, "inspect", broken)
    code, err = _run(capsys, "inspect", files / "snaps")
    assert code == 1 and "a bug" in err


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signals_end_with_a_snapshot_and_128_plus_the_signal(tmp_path, sig, code):
    data = _data(tmp_path / "long.data", _rows(200_000, seed=1))
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streammn.cli",
            "learn",
            str(data),
            "--out",
            str(out),
            "--batch-size",
            "500",
            "--every-rows",
            "1000",
            "--quiet",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not (out / "LATEST").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == code, stderr
    manifest = read_snapshot(resolve_snapshot(out)).manifest
    # a last snapshot of every row learned ("periodic" when the signal came right after one)
    assert manifest["reason"] in ("signal", "periodic") and manifest["rows_seen"] < 200_000
    assert manifest["rows_seen"] == manifest["source"]["position"]["offset"]


def test_a_skipped_invalid_snapshot_is_one_plain_warning_line(files, tmp_path, capsys):
    out = tmp_path / "o"
    assert (
        _run(
            capsys,
            "learn",
            files / "train.data",
            "--out",
            out,
            "--quiet",
            "--every-rows",
            1000,
            "--batch-size",
            500,
        )[0]
        == 0
    )
    newest = resolve_snapshot(out)
    (newest / "model.json").write_text("{}")
    code, err = _run(
        capsys,
        "learn",
        files / "train.data",
        "--out",
        out,
        "--resume",
        "--every-rows",
        1000,
        "--batch-size",
        500,
    )
    assert code == 0
    assert f"streammn learn: warning: skipping invalid snapshot: {newest}" in err
    assert "UserWarning" not in err and "warnings.warn" not in err


@pytest.mark.parametrize(
    "uri",
    [
        "redis://127.0.0.1:1/s?group=g",
        "redis://127.0.0.1:1/s?colour=red",
        "kafka://127.0.0.1:1/t?group=g",
    ],
)
def test_log_uri_without_schema_or_with_unknown_option_exits_2(tmp_path, capsys, uri):
    pytest.importorskip("redis" if uri.startswith("redis") else "confluent_kafka")
    code, err = _run(capsys, "learn", uri, "--out", tmp_path / "o")
    assert code == 2, err


def test_learning_from_no_rows_exits_3_and_writes_no_snapshot(tmp_path, capsys):
    """A 0-row Parquet file used to learn a 0-row snapshot and exit 0, while a header-only CSV
    exited 3 (issue 42): every empty finite source is an error now, in both modes."""
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"a": pa.array([], pa.int8()), "b": pa.array([], pa.int8())}), path)
    (tmp_path / "header.csv").write_text("a,b\n")
    (tmp_path / "two.schema").write_text("2,2\n")
    for source, extra in [
        (path, []),
        (path, ["--mode", "exact"]),
        (tmp_path / "header.csv", ["--schema", str(tmp_path / "two.schema")]),
    ]:
        out = tmp_path / f"out-{len(extra)}-{source.suffix}"
        assert main(["learn", str(source), "--out", str(out), "--quiet", *extra]) == 3
        assert "no rows to learn from" in capsys.readouterr().err
        assert not list(out.glob("snap-*"))


def test_a_new_run_into_a_directory_of_another_runs_snapshots_is_refused(files, tmp_path, capsys):
    """``learn --out`` into a directory that already holds snapshots (or anything else) without
    ``--resume`` would interleave two runs: exit 2, naming both ways on (issue 38)."""
    out = tmp_path / "o"
    assert _run(capsys, "learn", files / "train.data", "--out", out, "--quiet")[0] == 0
    before = sorted(p.name for p in out.iterdir())
    code, err = _run(capsys, "learn", files / "train.data", "--out", out, "--quiet")
    assert code == 2 and "already holds the snapshots of a run (snap-000001" in err
    assert "--resume" in err and "a new directory" in err
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written
    assert _run(capsys, "learn", files / "train.data", "--out", out, "--resume", "--quiet")[0] == 0
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    code, err = _run(capsys, "learn", files / "train.data", "--out", tmp_path / "other")
    assert code == 2 and "already holds files" in err
