"""`streammn learn --algo csgs` end to end (in process): snapshots with .json/.mn/.uai, resume,
score, inspect, and the refusal of exact mode."""

import json

import numpy as np

from streammn import load_snapshot, read_snapshot
from streammn.cli import main
from streammn.csgs.synthetic import context_specific_network, sample_rows
from streammn.stream.snapshot import list_snapshots


def run(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_learn_csgs_snapshots_resume_score_inspect(tmp_path, capsys):
    true = context_specific_network(5, seed=3)
    rows = sample_rows(true, 3000, seed=4)
    data = tmp_path / "train.data"
    np.savetxt(data, rows, fmt="%d", delimiter=",")
    out = tmp_path / "snaps"
    args = (
        "learn",
        data,
        "--out",
        out,
        "--algo",
        "csgs",
        "--every-rows",
        1000,
        "--quiet",
        "--batch-size",
        500,
    )
    assert run(capsys, *args)[0] == 0
    snaps = list_snapshots(out)
    assert len(snaps) == 3
    snap = read_snapshot(snaps[-1])
    assert snap.manifest["learner"]["class"] == "CSGS"
    assert snap.manifest["learner"]["params"]["significance"] == 0.05
    assert {"model.json", "model.mn", "model.uai"} <= set(snap.files)
    model = load_snapshot(out)
    # the context variable joins every other one
    assert {(0, v) for v in range(1, 5)} <= model.edges()
    # resuming a finished run changes nothing
    assert run(capsys, *args, "--resume")[0] == 0
    np.testing.assert_array_equal(load_snapshot(out).weights, model.weights)
    code, printed, _ = run(capsys, "score", out, data, "--pll", "--json")
    assert code == 0 and abs(json.loads(printed)["pll"] - model.pll(rows)) < 1e-9
    code, printed, _ = run(capsys, "inspect", out, "--json")
    assert code == 0 and json.loads(printed)["n_features"] == model.n_features


def test_csgs_refuses_exact_mode_and_bad_settings(tmp_path, capsys):
    data = tmp_path / "train.data"
    np.savetxt(data, np.zeros((20, 3), dtype=int), fmt="%d", delimiter=",")
    for extra in (("--mode", "exact"), ("--significance", "1.5")):
        code, _, err = run(capsys, "learn", data, "--out", tmp_path / "s", "--algo", "csgs", *extra)
        assert code == 2 and ("csgs" in err or "significance" in err), err
