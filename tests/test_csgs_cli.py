"""`streammn learn --algo csgs` end to end: snapshots with .json/.mn/.uai, resume, score,
inspect."""

import json

import numpy as np

from streammn import load_snapshot, read_snapshot
from streammn.csgs.synthetic import context_specific_network, sample_rows
from streammn.snapshot import list_snapshots
from test_cli import run_cli


def test_learn_csgs_snapshots_resume_score_inspect(tmp_path):
    true = context_specific_network(5, seed=3)
    rows = sample_rows(true, 3000, seed=4)
    data = tmp_path / "train.data"
    np.savetxt(data, rows, fmt="%d", delimiter=",")
    out = tmp_path / "snaps"
    args = ("learn", data, "--out", out, "--algo", "csgs", "--every-rows", 1000, "--quiet")
    run_cli(*args, "--batch-size", 500)
    snaps = list_snapshots(out)
    assert len(snaps) == 3
    snap = read_snapshot(snaps[-1])
    assert snap.manifest["learner"]["class"] == "CSGS"
    assert snap.manifest["learner"]["params"]["alpha"] == 0.05
    assert {"model.json", "model.mn", "model.uai"} <= set(snap.files)
    model = load_snapshot(out)
    # the context variable joins every other one
    assert {(0, v) for v in range(1, 5)} <= model.edges()
    # resuming a finished run changes nothing
    assert run_cli(*args, "--batch-size", 500, "--resume").returncode == 0
    np.testing.assert_array_equal(load_snapshot(out).weights, model.weights)
    scored = json.loads(run_cli("score", out, data, "--pll", "--json").stdout)
    assert abs(scored["pll"] - model.pll(rows)) < 1e-9
    info = json.loads(run_cli("inspect", out, "--json").stdout)
    assert info["n_features"] == model.n_features


def test_csgs_refuses_exact_mode(tmp_path):
    data = tmp_path / "train.data"
    np.savetxt(data, np.zeros((20, 3), dtype=int), fmt="%d", delimiter=",")
    proc = run_cli("learn", data, "--out", tmp_path / "s", "--algo", "csgs", "--mode", "exact",
                   check=False)
    assert proc.returncode == 2 and "csgs" in proc.stderr
