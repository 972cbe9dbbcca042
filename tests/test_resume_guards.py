"""Resume that cannot be fooled (issue 20, findings 1-5), end to end through the CLI.

Kills are real SIGKILLs of a ``streammn learn`` process. The one instant that cannot be hit by
a timer, between a snapshot's rename and the ``LATEST`` update, is reached by a wrapper around
``os.replace`` that kills the process just before it would replace ``LATEST`` the n-th time.
Commands after the kill run in-process through ``streammn.cli.main`` (same code path, faster).
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from streammn.connectors import CsvSource
from streammn.cli import main
from streammn.stream.snapshot import LATEST, list_snapshots, read_snapshot, resolve_snapshot

from helpers.datasets import DATA, ROOT

COMMON = ["--batch-size", 500, "--formats", "json", "--keep", 20, "--quiet"]

KILL_BEFORE_LATEST = """
import os, signal, sys
from streammn.cli import main
target, seen, replace = int(sys.argv[1]), [0], os.replace
def killing_replace(src, dst, *args, **kwargs):
    if os.path.basename(dst) == "LATEST":
        seen[0] += 1
        if seen[0] == target:
            os.kill(os.getpid(), signal.SIGKILL)
    return replace(src, dst, *args, **kwargs)
os.replace = killing_replace
sys.exit(main(sys.argv[2:]))
"""


def learn_killed(kill_at: int, *args, cwd=None):
    """``streammn learn ...`` SIGKILLed just before its ``kill_at``-th ``LATEST`` update, that
    is right after snapshot ``kill_at`` was renamed into place. Snapshots are written in the
    foreground: a forked writer would count its ``LATEST`` updates in its own copy."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            KILL_BEFORE_LATEST,
            str(kill_at),
            "learn",
            *map(str, args),
            "--foreground-snapshots",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def cli(capsys, *args, cwd=None):
    """Run ``streammn`` in-process; returns (exit code, stdout, stderr)."""
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        code = main([str(a) for a in args])
    finally:
        os.chdir(old)
    out, err = capsys.readouterr()
    return code, out, err


def write_data(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(path, rows, fmt="%d", delimiter=",")


@pytest.fixture(scope="module")
def nltcs():
    return CsvSource(DATA / "nltcs" / "nltcs.train.data").read_all()


@pytest.fixture(scope="module")
def two_files(nltcs, tmp_path_factory):
    """``data/b.data`` and ``data/c.data`` (3,000 rows each), and the rows of two more files."""
    d = tmp_path_factory.mktemp("files")
    write_data(d / "data" / "b.data", nltcs[:3000])
    write_data(d / "data" / "c.data", nltcs[3000:6000])
    return d, nltcs[6000:7000], nltcs[7000:8000]


def learner_bytes(out):
    return read_snapshot(resolve_snapshot(out)).file("learner.bin").read_bytes()


# 1. kill between the final snapshot's rename and the LATEST update ---------------------------
@pytest.mark.slow
def test_kill_between_rename_and_latest_is_repaired(two_files, tmp_path, capsys):
    d, _, _ = two_files
    out = tmp_path / "out"
    learn_killed(3, d / "data", "--out", out, "--every-rows", 2000, *COMMON)
    snaps = list_snapshots(out)
    assert [read_snapshot(p).manifest["rows_seen"] for p in snaps] == [2000, 4000, 6000]
    assert (out / LATEST).read_text() == "snap-000002\n"  # the final snapshot is not LATEST

    code, text, _ = cli(capsys, "inspect", out, "--json")
    assert code == 0 and json.loads(text)["snapshot"]["sequence"] == 3
    code, text, _ = cli(capsys, "score", out, d / "data" / "b.data", "--json")
    assert code == 0
    assert cli(capsys, "score", snaps[-1], d / "data" / "b.data", "--json")[1] == text

    code, text, _ = cli(
        capsys, "learn", d / "data", "--out", out, "--resume", "--every-rows", 2000, *COMMON
    )
    assert code == 0 and "snap-000003: 6,000 rows" in text
    assert (out / LATEST).read_text() == "snap-000003\n"  # repaired
    assert list_snapshots(out) == snaps  # nothing left to learn: no new snapshot


@pytest.mark.slow
@pytest.mark.parametrize("latest", [None, "garbage\x00\xff", "snap-000099\n"])
def test_missing_garbage_or_dangling_latest_is_recovered_from(two_files, tmp_path, capsys, latest):
    d, _, _ = two_files
    out = tmp_path / "out"
    learn_killed(1, d / "data", "--out", out, *COMMON)  # the only snapshot: no LATEST at all
    assert not (out / LATEST).exists() and len(list_snapshots(out)) == 1
    if latest is not None:
        (out / LATEST).write_bytes(latest.encode("utf-8", "surrogateescape"))

    for spec in (out, out / LATEST, out / "latest"):
        code, text, err = cli(capsys, "inspect", spec, "--json")
        assert code == 0, err
        assert json.loads(text)["snapshot"]["rows_seen"] == 6000
    code, _, err = cli(capsys, "score", out, d / "data" / "c.data")
    assert code == 0, err
    code, text, err = cli(capsys, "learn", d / "data", "--out", out, "--resume", *COMMON)
    assert code == 0 and "snap-000001: 6,000 rows" in text, err
    assert (out / LATEST).read_text() == "snap-000001\n"


# 2. a finished directory source and a new file --------------------------------------------
@pytest.mark.slow
def test_finished_directory_refuses_a_new_first_file_and_learns_a_new_last_one(
    two_files, tmp_path, capsys
):
    d, extra_a, extra_d = two_files
    data = tmp_path / "data"
    shutil.copytree(d / "data", data)
    out = tmp_path / "out"
    assert cli(capsys, "learn", data, "--out", out, *COMMON)[0] == 0
    before = list_snapshots(out)

    write_data(data / "a.data", extra_a)  # sorts before everything already learned
    code, _, err = cli(capsys, "learn", data, "--out", out, "--resume", *COMMON)
    assert code == 3 and "a.data" in err and "b.data" in err and "changed" in err
    assert list_snapshots(out) == before

    (data / "a.data").unlink()
    write_data(data / "d.data", extra_d)  # sorts after: new rows, learned on resume
    code, text, err = cli(capsys, "learn", data, "--out", out, "--resume", *COMMON)
    assert code == 0 and "7,000 rows" in text, err

    whole = tmp_path / "whole"
    assert cli(capsys, "learn", data, "--out", whole, *COMMON)[0] == 0
    assert learner_bytes(out) == learner_bytes(whole)

    (data / "c.data").unlink()  # files already learned are gone
    (data / "d.data").unlink()
    code, _, err = cli(capsys, "learn", data, "--out", out, "--resume", *COMMON)
    assert code == 3 and "c.data" in err and "gone" in err, err


# 3. the manifest checks itself ------------------------------------------------------------
def test_one_bit_flip_in_the_manifest_is_refused(two_files, tmp_path, capsys):
    d, _, _ = two_files
    out = tmp_path / "out"
    assert cli(capsys, "learn", d / "data", "--out", out, "--every-rows", 2000, *COMMON)[0] == 0
    manifest = list_snapshots(out)[-1] / "manifest.json"
    raw = bytearray(manifest.read_bytes())
    at = raw.index(b'"rows_seen": 6000') + len(b'"rows_seen": 6')
    raw[at] ^= 0x02  # "6000" -> "6200": still valid JSON
    manifest.write_bytes(bytes(raw))
    assert json.loads(raw)["rows_seen"] == 6200

    for args in (["inspect", out], ["score", out, d / "data" / "b.data"]):
        code, _, err = cli(capsys, *args)
        assert code == 3 and str(manifest) in err and "checksum" in err, (args, err)
    # resume passes over the damaged snapshot, saying so, and learns its rows again
    code, text, err = cli(
        capsys, "learn", d / "data", "--out", out, "--resume", "--every-rows", 2000, *COMMON
    )
    assert f"{manifest}: the manifest fails its own checksum" in err  # the CLI's warning line
    assert code == 0 and "snap-000004: 6,000 rows" in text, err
    assert learner_bytes(out) == (manifest.parent / "learner.bin").read_bytes()


def as_release_0_1(snapshot):
    """Rewrite a snapshot's manifest as streammn 0.1 wrote it: format version 1, no manifest
    checksum, a file-source position without file identities."""
    path = snapshot / "manifest.json"
    doc = json.loads(path.read_text())
    doc.pop("manifest_sha256", None)
    doc["source"]["position"].pop("files", None)
    doc["format_version"] = 1
    path.write_text(json.dumps(doc, indent=2) + "\n")


def test_snapshots_of_the_previous_format_still_read_and_resume(two_files, tmp_path, capsys):
    d, _, _ = two_files
    whole, out = tmp_path / "whole", tmp_path / "out"
    assert cli(capsys, "learn", d / "data", "--out", whole, "--every-rows", 2000, *COMMON)[0] == 0
    shutil.copytree(whole, out)
    for newer in list_snapshots(out)[2:]:
        shutil.rmtree(newer)
    as_release_0_1(list_snapshots(out)[-1])  # mid-stream, at 4,000 rows

    code, text, err = cli(capsys, "inspect", out, "--json")
    assert code == 0 and json.loads(text)["snapshot"]["rows_seen"] == 4000, err
    code, text, err = cli(
        capsys, "learn", d / "data", "--out", out, "--resume", "--every-rows", 2000, *COMMON
    )
    assert code == 0 and "6,000 rows" in text, err
    assert learner_bytes(out) == learner_bytes(whole)


# 4. source identity by content ------------------------------------------------------------
@pytest.fixture(scope="module")
def killed_midway(two_files, tmp_path_factory):
    """A run over ``data`` (relative to its working directory) killed after its second
    snapshot (4,000 of 6,000 rows), and an uninterrupted run for comparison."""
    d, _, _ = two_files
    work = tmp_path_factory.mktemp("killed")
    learn_killed(2, "data", "--out", work / "out", "--every-rows", 2000, *COMMON, cwd=d)
    assert read_snapshot(list_snapshots(work / "out")[-1]).manifest["rows_seen"] == 4000
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "streammn.cli",
            "learn",
            "data",
            "--out",
            str(work / "whole"),
            "--every-rows",
            "2000",
            *map(str, COMMON),
        ],
        cwd=d,
        env=env,
        check=True,
        timeout=600,
    )
    return d, work


@pytest.mark.parametrize("how", ["symlinked directory", "copied directory"])
def test_the_same_files_by_another_path_are_accepted(killed_midway, tmp_path, capsys, how):
    d, work = killed_midway
    out = tmp_path / "out"
    shutil.copytree(work / "out", out)
    other = tmp_path / "elsewhere"
    if how == "symlinked directory":
        other.symlink_to(d / "data", target_is_directory=True)
    else:
        shutil.copytree(d / "data", other)
    code, text, err = cli(
        capsys, "learn", other, "--out", out, "--resume", "--every-rows", 2000, *COMMON
    )
    assert code == 0 and "6,000 rows" in text, err
    assert learner_bytes(out) == learner_bytes(work / "whole")


def test_another_file_with_the_same_relative_name_is_refused(
    killed_midway, nltcs, tmp_path, capsys
):
    d, work = killed_midway
    out = tmp_path / "out"
    shutil.copytree(work / "out", out)
    write_data(tmp_path / "data" / "b.data", nltcs[3000:6000])  # c's rows under b's name
    write_data(tmp_path / "data" / "c.data", nltcs[:3000])
    code, _, err = cli(
        capsys,
        "learn",
        "data",
        "--out",
        out,
        "--resume",
        "--every-rows",
        2000,
        *COMMON,
        cwd=tmp_path,
    )
    assert code == 3 and "b.data" in err and "changed" in err, err
    assert read_snapshot(resolve_snapshot(out)).manifest["rows_seen"] == 4000


# 5. learner options on resume -------------------------------------------------------------
@pytest.mark.parametrize(
    "option, value, shown",
    [
        ("--kappa", 0.001, ["kappa='auto'", "kappa=0.001"]),
        ("--grace-period", 100, ["grace_period=200", "grace_period=100"]),
        ("--max-tree-leaves", 8, ["max_tree_leaves=None", "max_tree_leaves=8"]),
        ("--weights", "closed-form", ["weights='refined'", "weights='closed-form'"]),
    ],
)
def test_changed_learner_options_are_refused(killed_midway, tmp_path, capsys, option, value, shown):
    d, work = killed_midway
    out = tmp_path / "out"
    shutil.copytree(work / "out", out)
    extra = [option] if value is None else [option, value]
    code, _, err = cli(
        capsys,
        "learn",
        "data",
        "--out",
        out,
        "--resume",
        *extra,
        "--every-rows",
        2000,
        *COMMON,
        cwd=d,
    )
    assert code == 2 and option in err and all(s in err for s in shown), err
    assert read_snapshot(resolve_snapshot(out)).manifest["rows_seen"] == 4000


def test_resume_with_another_algorithm_is_a_usage_error(killed_midway, tmp_path, capsys):
    d, work = killed_midway
    out = tmp_path / "out"
    shutil.copytree(work / "out", out)
    code, _, err = cli(
        capsys, "learn", "data", "--out", out, "--resume", "--algo", "grafting", *COMMON, cwd=d
    )
    assert code == 2 and "DTSL" in err and "EdgeGrafting" in err, err


def test_settings_that_do_not_change_the_model_may_differ(killed_midway, tmp_path, monkeypatch):
    from streammn.connectors import open_source
    from streammn.dtsl import DTSL
    from streammn.stream.engine import StreamLearner

    d, work = killed_midway
    out = tmp_path / "out"
    shutil.copytree(work / "out", out)
    monkeypatch.chdir(d)
    source = open_source("data", batch_size=500)
    engine = StreamLearner(
        source,
        DTSL(source.schema, n_threads=2, seed=7),
        out,
        every_rows=2000,
        formats=("json",),
        keep=20,
        progress=None,
    )
    assert engine.resume() and engine.state.rows_seen == 4000
    engine.run()
    assert learner_bytes(out) == learner_bytes(work / "whole")
