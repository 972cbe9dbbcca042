"""`streammn learn --algo grafting` end to end: snapshots of a pairwise MRF, resume, score."""

import json

import numpy as np
import pytest

from streammn import load_snapshot, read_snapshot
from streammn.grafting.mrf import PairwiseLayout
from streammn.grafting.synthetic import SyntheticMRF
from streammn.schema import Schema
from streammn.stream.snapshot import list_snapshots
from test_cli import run_cli

# both tests run `streammn learn --algo grafting` in subprocesses
pytestmark = pytest.mark.slow


def planted_rows():
    edges = np.array([(0, 1), (1, 2), (2, 3), (1, 4), (4, 5)])
    schema = Schema.from_cardinalities([3] * 6)
    layout = PairwiseLayout(schema.cardinalities, edges)
    theta = np.concatenate([np.zeros(18), np.tile(2.0 * np.eye(3).ravel(), len(edges))])
    mrf = SyntheticMRF(schema, layout, theta)
    return mrf, mrf.sample(3000, seed=2, burn_in=50, chains=4)


def test_learn_grafting_writes_pairwise_snapshots_and_resumes(tmp_path):
    mrf, rows = planted_rows()
    data = tmp_path / "train.data"
    np.savetxt(data, rows, fmt="%d", delimiter=",")
    out = tmp_path / "snaps"
    proc = run_cli(
        "learn",
        data,
        "--out",
        out,
        "--algo",
        "grafting",
        "--lambda",
        "0.02",
        "--every-rows",
        1000,
        "--update-every",
        1000,
        "--batch-size",
        500,
        "--formats",
        "json,mn",
        "--quiet",
    )
    assert "snapshot" in proc.stdout
    snaps = list_snapshots(out)
    assert len(snaps) == 3
    manifest = read_snapshot(snaps[-1]).manifest
    assert manifest["learner"]["class"] == "EdgeGrafting"
    assert manifest["learner"]["params"]["lambda_"] == 0.02
    model = load_snapshot(out)
    assert mrf.edges <= model.edges()
    assert np.isfinite(model.pll(rows[:200]))
    # resuming a finished run changes nothing and ends with the same model
    again = run_cli(
        "learn",
        data,
        "--out",
        out,
        "--algo",
        "grafting",
        "--lambda",
        "0.02",
        "--every-rows",
        1000,
        "--update-every",
        1000,
        "--batch-size",
        500,
        "--formats",
        "json,mn",
        "--resume",
        "--quiet",
    )
    assert again.returncode == 0
    np.testing.assert_allclose(load_snapshot(out).weights, model.weights)
    scored = run_cli("score", out, data, "--pll", "--json")
    assert np.isfinite(json.loads(scored.stdout)["pll"])


def test_update_every_sets_the_structure_cadence_apart_from_snapshots(tmp_path):
    """Snapshots every 1000 rows, structure updates every 2000: the first snapshot still has
    no edge, the second has the planted ones."""
    mrf, rows = planted_rows()
    data = tmp_path / "train.data"
    np.savetxt(data, rows[:2000], fmt="%d", delimiter=",")
    out = tmp_path / "snaps"
    proc = run_cli(
        "learn",
        data,
        "--out",
        out,
        "--algo",
        "grafting",
        "--every-rows",
        1000,
        "--update-every",
        2000,
        "--batch-size",
        500,
        "--formats",
        "json",
        "--quiet",
    )
    assert proc.returncode == 0
    snaps = list_snapshots(out)
    assert len(snaps) == 2
    assert read_snapshot(snaps[-1]).manifest["learner"]["params"]["update_every"] == 2000
    assert not load_snapshot(snaps[0]).edges()
    assert mrf.edges <= load_snapshot(snaps[-1]).edges()
    bad = run_cli(
        "learn",
        data,
        "--out",
        tmp_path / "x",
        "--algo",
        "grafting",
        "--update-every",
        0,
        "--quiet",
        check=False,
    )
    assert bad.returncode == 2 and "--update-every" in bad.stderr
