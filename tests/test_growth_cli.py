"""``streammn learn`` with ``--grow-values`` (new values mid-stream), and ``--resume`` and
``--refine`` with ``--missing``: a directory source learned, then a new file added and the run
resumed, equals one run over both files."""

import json

import numpy as np
import pytest

from streammn.cli import main
from streammn.demo import planted_network
from streammn.inference import sample
from streammn.stream.snapshot import list_snapshots, read_snapshot, resolve_snapshot

COMMON = ["--batch-size", 500, "--every-rows", 1000, "--keep", 20, "--quiet"]
FIRST = 3000  # rows of a.data; b.data holds the new value from its row NEW_AT on
NEW_AT = 200


@pytest.fixture(scope="module")
def rows():
    """6,000 rows of a planted binary network; in the second half, from NEW_AT on, x3 is 2
    where x0 = x1 = 1."""
    planted, _ = planted_network(8, seed=0)
    rows = sample(planted, 2 * FIRST, seed=1)
    second = rows[FIRST + NEW_AT :]
    second[(second[:, 0] == 1) & (second[:, 1] == 1), 3] = 2
    rows[FIRST + NEW_AT, [0, 1, 3]] = 1, 1, 2
    return rows


def write(path, rows, holes=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    text = rows.astype(str)
    if holes is not None:
        text[holes] = ""
    path.write_text("".join(",".join(r) + "\n" for r in text))


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def learner_bytes(out):
    return read_snapshot(resolve_snapshot(out)).file("learner.bin").read_bytes()


@pytest.mark.slow
def test_grow_values_learns_resumes_and_stops_beyond_the_maximum(rows, tmp_path, capsys):
    data = tmp_path / "data"
    schema = tmp_path / "binary.schema"
    schema.write_text(",".join(["2"] * 8) + "\n")
    write(data / "a.data", rows[:FIRST])
    write(data / "b.data", rows[FIRST:])
    whole = tmp_path / "whole"
    code, _, err = cli(
        capsys, "learn", data, "--out", whole, "--schema", schema, "--grow-values", *COMMON[:-1]
    )  # not --quiet: the progress line
    assert code == 0, err
    last = err.splitlines()[-1]
    assert last.startswith("done: rows 6,000") and "snapshots 6  " in last, err
    assert last.endswith("  schema version 1"), err
    snaps = list_snapshots(whole)
    manifests = [read_snapshot(p).manifest for p in snaps]
    assert [m["schema"]["version"] for m in manifests] == [0, 0, 0, 1, 1, 1]
    assert manifests[-1]["schema"]["cardinalities"] == [2, 2, 2, 3, 2, 2, 2, 2]
    assert (snaps[2] / "model.mn").read_text().splitlines()[0] == "2,2,2,2,2,2,2,2"
    assert (snaps[-1] / "model.mn").read_text().splitlines()[0] == "2,2,2,3,2,2,2,2"
    assert (snaps[-1] / "model.uai").read_text().split("\n")[2].split() == [
        "2",
        "2",
        "2",
        "3",
        "2",
        "2",
        "2",
        "2",
    ]
    code, out, _ = cli(capsys, "score", whole, data / "b.data", "--json")
    assert code == 0 and np.isfinite(json.loads(out)["pll"])
    code, _, err = cli(capsys, "score", snaps[2], data / "b.data")  # before the new value
    assert code == 3 and f"row {NEW_AT}, column 3: value 2 out of range" in err

    # a run over a.data alone, resumed once b.data is there, ends with the same learner
    part = tmp_path / "part"
    (data / "b.data").rename(tmp_path / "b.data")
    assert (
        cli(capsys, "learn", data, "--out", part, "--schema", schema, "--grow-values", *COMMON)[0]
        == 0
    )
    (tmp_path / "b.data").rename(data / "b.data")
    code, _, err = cli(
        capsys,
        "learn",
        data,
        "--out",
        part,
        "--schema",
        schema,
        "--grow-values",
        "--resume",
        *COMMON,
    )
    assert code == 0, err
    assert learner_bytes(part) == learner_bytes(whole)
    code, _, err = cli(
        capsys, "learn", data, "--out", part, "--schema", schema, "--resume", *COMMON
    )  # without growth: not the stream of that snapshot
    assert code == 2 and "schema" in err

    # beyond the maximum, and by default: the run stops at the row, keeping what came before
    for out, flags, message in (
        (
            tmp_path / "capped",
            ["--grow-values", "x3=2,x5=4"],
            "value 2 beyond the 2 values variable 'x3' may grow to (0..1)",
        ),
        (tmp_path / "default", [], "value 2 out of range 0..1 for variable 'x3'"),
    ):
        code, _, err = cli(capsys, "learn", data, "--out", out, "--schema", schema, *flags, *COMMON)
        assert code == 3 and f"b.data, row {NEW_AT}, column 3: {message}" in err, err
        assert read_snapshot(resolve_snapshot(out)).manifest["rows_seen"] == FIRST + NEW_AT


def test_grow_values_usage_errors(rows, tmp_path, capsys):
    write(tmp_path / "a.data", rows[:500])
    for flags, message in (
        (["--grow-values", "x9=4"], "'x9', which is not a variable"),
        (["--grow-values", "4", "--mode", "exact"], "hoeffding"),
        (["--grow-values", "4", "--algo", "grafting"], "dtsl only"),
    ):
        code, _, err = cli(
            capsys, "learn", tmp_path / "a.data", "--out", tmp_path / "o", *flags, "--quiet"
        )
        assert code == 2 and message in err, err
    code, _, err = cli(capsys, "learn", tmp_path / "a.data", "--out", "o", "--grow-values", "300")
    assert code == 2 and "MAX in 2..255" in err


@pytest.mark.slow
def test_resume_with_missing_values_equals_one_run(rows, tmp_path, capsys):
    holes = np.random.default_rng(4).random(rows.shape) < 0.1
    rows = np.minimum(rows, 1)
    data = tmp_path / "data"
    write(data / "a.data", rows[:FIRST], holes[:FIRST])
    part = tmp_path / "part"
    code, _, err = cli(capsys, "learn", data, "--out", part, "--missing", *COMMON)
    assert code == 0, err
    write(data / "b.data", rows[FIRST:], holes[FIRST:])
    code, out, err = cli(capsys, "learn", data, "--out", part, "--missing", "--resume", *COMMON)
    assert code == 0 and "6,000 rows" in out, err
    whole = tmp_path / "whole"
    code, _, err = cli(capsys, "learn", data, "--out", whole, "--missing", *COMMON[:-1])
    assert code == 0 and "done: rows 6,000" in err and "schema version" not in err, err
    assert learner_bytes(part) == learner_bytes(whole)


def test_refined_weights_with_missing_values_learn_from_complete_rows(
    rows, tmp_path, capsys, monkeypatch
):
    """Refined weights with ``--missing`` and ``--validation``: the row sample holds the
    complete rows, the weights are fitted on them and judged on the complete validation rows,
    and a run resumed after new files learns the same learner and sample as one run."""
    from streammn.network import published
    from streammn.stream import engine
    from streammn.dtsl import DTSL
    from streammn.stream.snapshot import load_snapshot

    weighed = []  # the rows of every refinement

    publish = published.publish

    def spy(model, train, held_out, *args, **kwargs):
        weighed.append((train.copy(), held_out.copy()))
        return publish(model, train, held_out, *args, **kwargs)

    monkeypatch.setattr(engine, "publish", spy)

    holes = np.random.default_rng(5).random(rows.shape) < 0.1
    rows = np.minimum(rows, 1)
    data, valid = tmp_path / "data", tmp_path / "valid.data"
    write(data / "a.data", rows[:1500], holes[:1500])
    write(valid, rows[FIRST : FIRST + 1000], holes[FIRST : FIRST + 1000])
    flags = ["--missing", "--validation", valid, *COMMON]
    part = tmp_path / "part"
    assert cli(capsys, "learn", data, "--out", part, *flags)[0] == 0
    write(data / "b.data", rows[1500:FIRST], holes[1500:FIRST])
    code, _, err = cli(capsys, "learn", data, "--out", part, "--resume", *flags)
    assert code == 0, err
    whole = tmp_path / "whole"
    code, _, err = cli(capsys, "learn", data, "--out", whole, *flags)
    assert code == 0, err

    snap = read_snapshot(resolve_snapshot(whole))
    complete = rows[:FIRST][~holes[:FIRST].any(axis=1)]
    learner = DTSL.from_bytes(snap.file("learner.bin").read_bytes())
    # the validation file is the held-out set: every row of the sample is a training row
    np.testing.assert_array_equal(learner.weight_sample.rows, complete)  # in stream order
    scored = rows[FIRST : FIRST + 1000][~holes[FIRST : FIRST + 1000].any(axis=1)]
    train, held_out = weighed[-1]  # the final snapshot's
    np.testing.assert_array_equal(train, complete)
    np.testing.assert_array_equal(held_out, scored)
    model = load_snapshot(snap.path)
    assert snap.manifest["scores"]["validation_pll"] == pytest.approx(model.pll(scored))
    unrefined = learner.learned_network()
    assert model.pll(scored) >= unrefined.pll(scored)  # refined weights kept only if better
    assert learner_bytes(part) == learner_bytes(whole)  # trees and weight sample
    part_snap = read_snapshot(resolve_snapshot(part))
    # the run that ended at row 1,500 made one refinement more, so its weights continue from
    # another start: the same features, the same optimum within L-BFGS's tolerance
    resumed = load_snapshot(part_snap.path)
    assert resumed.features.with_weights(model.weights).equals(model.features)
    assert resumed.pll(scored) == pytest.approx(model.pll(scored), abs=5e-3)


def test_marginal_counts_skip_missing_values():
    """The engine's marginal counts in missing mode (they once wrote past their array and
    failed their own check on resume)."""
    from streammn import Schema
    from streammn.stats import MarginalCounts

    m = MarginalCounts(Schema.binary(3).with_missing())
    m.update(np.array([[0, 255, 1], [1, 1, 255], [255, 0, 0]], dtype=np.uint8))
    assert [m.counts(i).tolist() for i in range(3)] == [[1, 1], [1, 1], [1, 1]]
    back = MarginalCounts.from_bytes(m.to_bytes())
    assert back.n_rows == 3 and np.array_equal(back.flat, m.flat)
