"""`streammn learn --algo et` end to end on a Parquet file (in process): snapshots with
.json/.mn/.uai and model.et, resume, score (PLL and exact LL), inspect."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streammn import load_snapshot, read_snapshot
from streammn.cli import main
from streammn.et import EnsembleOfTrees, ETDensity
from streammn.stream.snapshot import list_snapshots


def run(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def chain_rows(n, m, seed):
    rng = np.random.default_rng(seed)
    rows = np.empty((n, m), dtype=np.uint8)
    rows[:, 0] = rng.integers(0, 2, n)
    for v in range(1, m):
        rows[:, v] = rows[:, v - 1] ^ (rng.random(n) > 0.85)
    return rows


def test_learn_et_parquet_snapshots_resume_score_inspect(tmp_path, capsys):
    rows = chain_rows(3000, 6, seed=1)
    data = tmp_path / "train.parquet"
    pq.write_table(pa.table({f"x{i}": rows[:, i] for i in range(6)}), data)
    out = tmp_path / "snaps"
    args = (
        "learn",
        data,
        "--out",
        out,
        "--algo",
        "et",
        "--every-rows",
        1000,
        "--update-every",
        1000,
        "--quiet",
        "--batch-size",
        700,
        "--et-sample-rows",
        500,
    )
    assert run(capsys, *args)[0] == 0
    snaps = list_snapshots(out)
    assert len(snaps) == 3
    snap = read_snapshot(snaps[-1])
    assert snap.manifest["learner"]["class"] == "EnsembleOfTrees"
    assert {"model.json", "model.mn", "model.uai", "model.et", "learner.bin"} <= set(snap.files)
    model = load_snapshot(out)
    assert model.edges() == {(i, i + 1) for i in range(5)}
    # the snapshot's learner is the one partial_fit gives on the same rows
    saved = EnsembleOfTrees.from_bytes(snap.file("learner.bin").read_bytes())
    direct = EnsembleOfTrees(saved.schema, update_every=1000, sample_rows=500).partial_fit(rows)
    assert direct.to_bytes() == saved.to_bytes()
    # resuming a finished run changes nothing
    assert run(capsys, *args, "--resume")[0] == 0
    np.testing.assert_array_equal(load_snapshot(out).weights, model.weights)
    density = ETDensity.from_bytes(snap.file("model.et").read_bytes())
    exact_ll = density.log_likelihood(rows).mean()
    code, printed, _ = run(capsys, "score", out, data, "--json")
    result = json.loads(printed)
    assert code == 0 and abs(result["pll"] - model.pll(rows)) < 1e-9
    assert abs(result["ll"] - exact_ll) < 1e-9
    code, printed, _ = run(capsys, "score", snap.file("model.et"), data, "--json")
    assert code == 0 and abs(json.loads(printed)["ll"] - exact_ll) < 1e-9
    code, printed, _ = run(capsys, "inspect", out, "--json")
    assert code == 0 and json.loads(printed)["n_edges"] == 5


def test_et_refuses_exact_mode_and_bad_model_file(tmp_path, capsys):
    data = tmp_path / "train.data"
    np.savetxt(data, np.zeros((20, 3), dtype=int), fmt="%d", delimiter=",")
    code, _, err = run(
        capsys, "learn", data, "--out", tmp_path / "s", "--algo", "et", "--mode", "exact"
    )
    assert code == 2 and "et" in err
    bad = tmp_path / "m.et"
    bad.write_bytes(b"junk")
    code, _, err = run(capsys, "score", bad, data)
    assert code == 3 and "m.et" in err


def test_learn_et_with_learned_edge_tables(tmp_path, capsys):
    rows = chain_rows(1200, 5, seed=2)
    data = tmp_path / "train.parquet"
    pq.write_table(pa.table({f"x{i}": rows[:, i] for i in range(5)}), data)
    out = tmp_path / "snaps"
    assert (
        run(
            capsys,
            "learn",
            data,
            "--out",
            out,
            "--algo",
            "et",
            "--update-every",
            1200,
            "--quiet",
            "--et-sample-rows",
            400,
            "--et-learn-theta",
        )[0]
        == 0
    )
    snap = read_snapshot(list_snapshots(out)[-1])
    saved = EnsembleOfTrees.from_bytes(snap.file("learner.bin").read_bytes())
    assert saved.learn_theta and saved.learned_pair_probs is not None
    density = ETDensity.from_bytes(snap.file("model.et").read_bytes())
    np.testing.assert_array_equal(density.pair_probs, saved.learned_pair_probs)
    assert load_snapshot(out).edges() == {(i, i + 1) for i in range(4)}
