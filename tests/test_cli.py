"""End-to-end tests of the ``streammn`` command on real data files converted to Parquet."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from streammn.connectors import CsvSource, write_parquet
from streammn import Schema, load_snapshot, read_model, read_snapshot
from streammn.stream.snapshot import list_snapshots, resolve_snapshot

from helpers.datasets import DATA, ROOT

# every test runs `python -m streammn.cli` in subprocesses
pytestmark = pytest.mark.slow


def run_cli(*args, cwd=None, check=True):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "streammn.cli", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def to_parquet(name, split, path, rows=None, row_group_size=1000):
    data = CsvSource(DATA / name / f"{name}.{split}.data").read_all()
    if rows is not None:
        data = data[:rows]
    write_parquet(path, data, Schema.binary(data.shape[1]), row_group_size=row_group_size)
    return data


@pytest.fixture(scope="module")
def nltcs(tmp_path_factory):
    d = tmp_path_factory.mktemp("nltcs")
    train = to_parquet("nltcs", "train", d / "train.parquet", rows=6000)
    test = to_parquet("nltcs", "test", d / "test.parquet")
    return d, train, test


def test_learn_writes_ordered_snapshots_every_n_rows(nltcs, tmp_path):
    d, train, test = nltcs
    out = tmp_path / "snaps"
    proc = run_cli(
        "learn",
        d / "train.parquet",
        "--out",
        out,
        "--every-rows",
        2000,
        "--batch-size",
        500,
        "--keep",
        10,
        "--validation",
        d / "test.parquet",
    )
    assert "rows/s" in proc.stderr and "snapshot" in proc.stdout
    snaps = list_snapshots(out)
    assert [p.name for p in snaps] == [f"snap-{k:06d}" for k in (1, 2, 3)]
    manifests = [read_snapshot(p).manifest for p in snaps]
    assert [m["rows_seen"] for m in manifests] == [2000, 4000, 6000]
    assert manifests[-1]["source"]["position"]["offset"] == 6000
    assert manifests[0]["learner"]["class"] == "DTSL"
    assert manifests[-1]["learner"]["params"]["kappa"] == "auto"
    assert {"model.json", "model.mn", "model.uai", "learner.bin"} <= set(manifests[-1]["files"])
    assert all(m["scores"]["validation_pll"] < 0 for m in manifests)
    assert manifests[-1]["scores"]["prequential_pll"] < 0
    assert (out / "LATEST").read_text().strip() == "snap-000003"
    # the snapshot's model is what the learner's features say, and scores like the CLI says
    model = load_snapshot(out)
    assert model.n_features == manifests[-1]["model"]["n_features"]
    scored = json.loads(run_cli("score", out, d / "test.parquet", "--pll", "--json").stdout)
    assert scored["rows"] == len(test)
    assert scored["pll"] == pytest.approx(model.pll(test), rel=1e-9)
    assert scored["pll"] == pytest.approx(manifests[-1]["scores"]["validation_pll"], rel=1e-9)


def test_exact_mode_and_cmll(nltcs, tmp_path):
    d, train, test = nltcs
    out = tmp_path / "exact"
    run_cli("learn", d / "train.parquet", "--out", out, "--mode", "exact", "--quiet")
    manifest = read_snapshot(out / "snap-000001").manifest
    assert manifest["rows_seen"] == len(train) and manifest["reason"] == "end"
    write_parquet(tmp_path / "few.parquet", test[:40], Schema.binary(16))
    scored = json.loads(
        run_cli(
            "score",
            out / "latest",
            tmp_path / "few.parquet",
            "--pll",
            "--cmll",
            "--samples",
            200,
            "--burn-in",
            20,
            "--json",
        ).stdout
    )
    model = load_snapshot(out)
    assert scored["rows"] == 40 and scored["pll"] == pytest.approx(model.pll(test[:40]))
    assert scored["pll"] < scored["cmll"] < 0 or -8 < scored["cmll"] < 0


def test_convert_to_each_format_and_back(nltcs, tmp_path):
    d, train, test = nltcs
    out = tmp_path / "snaps"
    run_cli("learn", d / "train.parquet", "--out", out, "--quiet")
    model = load_snapshot(out)
    for suffix in ("json", "mn", "uai"):
        target = tmp_path / f"model.{suffix}"
        run_cli("convert", out, target)
        schema, features = read_model(target)
        assert schema.cardinalities.tolist() == model.schema.cardinalities.tolist()
        if suffix != "uai":  # UAI holds tables, not our features: compare scores instead
            assert features.equals(model.features)
        scored = json.loads(run_cli("score", target, d / "test.parquet", "--json").stdout)
        assert scored["pll"] == pytest.approx(model.pll(test), rel=1e-7, abs=1e-9)
    back = tmp_path / "back.json"
    run_cli("convert", tmp_path / "model.mn", back)
    assert read_model(back)[1].equals(model.features)


def test_sample_and_inspect(nltcs, tmp_path):
    d, _, _ = nltcs
    out = tmp_path / "snaps"
    run_cli("learn", d / "train.parquet", "--out", out, "--quiet")
    rows = run_cli("sample", out, "-n", 50, "--seed", 3).stdout.strip().splitlines()
    assert len(rows) == 50 and all(len(r.split(",")) == 16 for r in rows)
    assert run_cli("sample", out, "-n", 50, "--seed", 3).stdout.strip().splitlines() == rows
    info = json.loads(run_cli("inspect", out, "--json", "--top", 3).stdout)
    assert info["n_vars"] == 16 and info["n_features"] > 0
    assert len(info["strongest_interactions"]) == 3
    assert info["snapshot"]["rows_seen"] == 6000


def test_kill_and_resume_gives_the_same_model(tmp_path):
    rows = CsvSource(DATA / "msnbc_stream" / "msnbc_stream.data").read_all()[:60000]
    write_parquet(
        tmp_path / "stream.parquet", rows, Schema.binary(rows.shape[1]), row_group_size=4000
    )
    common = [
        "--every-rows",
        5000,
        "--batch-size",
        1000,
        "--formats",
        "json",
        "--keep",
        20,
        "--quiet",
    ]
    run_cli("learn", tmp_path / "stream.parquet", "--out", tmp_path / "whole", *common)

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streammn.cli",
            "learn",
            str(tmp_path / "stream.parquet"),
            "--out",
            str(killed),
            *map(str, common),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while not (killed / "snap-000003").exists() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    interrupted_at = max(read_snapshot(p).manifest["rows_seen"] for p in list_snapshots(killed))
    assert interrupted_at < len(rows), "the run ended before it could be killed"

    run_cli("learn", tmp_path / "stream.parquet", "--out", killed, "--resume", *common)
    a = read_snapshot(resolve_snapshot(tmp_path / "whole"))
    b = read_snapshot(resolve_snapshot(killed))
    assert a.manifest["rows_seen"] == b.manifest["rows_seen"] == len(rows)
    assert a.file("learner.bin").read_bytes() == b.file("learner.bin").read_bytes()
    assert load_snapshot(killed).features.equals(load_snapshot(tmp_path / "whole").features)
    # the published weights too: refined on the way, and where refining left off is the same
    # (the row sample they are fitted on is part of learner.bin)
    assert a.file("weight_state.bin").read_bytes() == b.file("weight_state.bin").read_bytes()
    assert any(
        read_snapshot(p).manifest["weights"]["published"] == "refined"
        for p in list_snapshots(killed)
    )


def test_corrupt_and_half_written_snapshots_are_rejected(nltcs, tmp_path):
    d, _, _ = nltcs
    out = tmp_path / "snaps"
    run_cli(
        "learn",
        d / "train.parquet",
        "--out",
        out,
        "--every-rows",
        3000,
        "--quiet",
        "--keep",
        10,
        "--batch-size",
        1000,
    )
    good, newest = list_snapshots(out)[-2:]
    model_file = newest / "model.json"
    model_file.write_bytes(model_file.read_bytes()[:-20])  # truncated: checksum fails
    bad = run_cli("score", newest, d / "test.parquet", check=False)
    assert bad.returncode == 3 and "model.json" in bad.stderr
    assert load_snapshot(good).n_features > 0
    # a half-written snapshot (a writer killed before the rename) is invisible to readers
    (out / ".tmp-snap-000099-dead").mkdir()
    ((out / ".tmp-snap-000099-dead") / "model.json").write_text("{")
    (out / "LATEST").write_text(good.name + "\n")
    ok = run_cli("score", out, d / "test.parquet", "--json")
    assert json.loads(ok.stdout)["rows"] > 0
    missing = run_cli("score", tmp_path / "nothing", d / "test.parquet", check=False)
    assert missing.returncode == 4  # a missing model is unavailable, as README's table says


def test_out_of_range_value_stops_with_exit_3_and_keeps_a_snapshot_before_it(tmp_path):
    rows = CsvSource(DATA / "nltcs" / "nltcs.valid.data").read_all()
    lines = [",".join(map(str, r)) for r in rows[:1700]]
    bad_row = 1234
    lines[bad_row] = lines[bad_row][:-1] + "2"
    (tmp_path / "bad.data").write_text("\n".join(lines) + "\n")
    out = tmp_path / "snaps"
    proc = run_cli(
        "learn",
        tmp_path / "bad.data",
        "--out",
        out,
        "--every-rows",
        500,
        "--batch-size",
        100,
        "--schema",
        _schema_file(tmp_path),
        "--quiet",
        check=False,
    )
    assert proc.returncode == 3
    assert f"row {bad_row}" in proc.stderr and "out of range" in proc.stderr
    last = read_snapshot(resolve_snapshot(out)).manifest
    assert last["rows_seen"] == bad_row  # every good row before the bad one was learned
    assert last["source"]["position"]["offset"] == last["rows_seen"]
    assert load_snapshot(out).n_features > 0
    # resuming from there stops at the same row again, nothing learned twice
    again = run_cli(
        "learn",
        tmp_path / "bad.data",
        "--out",
        out,
        "--every-rows",
        500,
        "--batch-size",
        100,
        "--schema",
        _schema_file(tmp_path),
        "--resume",
        "--quiet",
        check=False,
    )
    assert again.returncode == 3 and f"row {bad_row}" in again.stderr


def _schema_file(tmp_path):
    path = tmp_path / "nltcs.schema"
    path.write_text(",".join(["2"] * 16) + "\n")
    return path


def test_usage_and_unavailable_exit_codes(tmp_path):
    assert run_cli("learn", "--out", tmp_path, check=False).returncode == 2
    assert run_cli("frobnicate", check=False).returncode == 2
    gone = run_cli("learn", tmp_path / "missing.parquet", "--out", tmp_path / "o", check=False)
    assert gone.returncode == 4 and "missing.parquet" in gone.stderr
    helped = run_cli("learn", "--help")
    assert "examples:" in helped.stdout and "--every-rows" in helped.stdout


def test_demo_recovers_the_planted_structure(tmp_path):
    proc = run_cli("demo", "--out", tmp_path / "demo", "--rows", 40000, "--quiet")
    assert "recall" in proc.stdout
    recall = int(proc.stdout.split("recall ")[1].split("%")[0])
    assert recall >= 80
    assert len(list_snapshots(tmp_path / "demo")) == 5


def test_learner_settings_errors_exit_2(tmp_path):
    """A learner option out of range is a usage error (exit 2), refused while parsing."""
    proc = run_cli(
        "learn",
        DATA / "nltcs" / "nltcs.train.data",
        "--out",
        tmp_path / "s",
        "--kappa",
        "2",
        "--quiet",
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--kappa: '2' is not 'auto' or a number in (0, 1]" in proc.stderr
