"""Files other tools read (issue 17 item 3): converted files respect the umask, models and schemas
with one-state variables are read, scored and learned (as constants), and `convert` into a
directory that does not exist names the file asked for."""

import os
import stat

import numpy as np
import pytest

from streammn import Schema
from streammn.cli import main
from streammn.dtsl import DTSL
from streammn.features import FeatureSet
from streammn.formats import ModelWriteError, read_model, write_model
from streammn.network.model import MarkovNetwork


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_written_model_files_get_the_umask_mode_like_snapshot_files(tmp_path, mask):
    schema = Schema.binary(3)
    fs = FeatureSet.from_features(schema, [(0.5, [(0, 1, True), (1, 0, True)])])
    old = os.umask(mask)
    try:
        for suffix in (".json", ".mn", ".uai"):
            write_model(tmp_path / f"m{suffix}", schema, fs)
            assert _mode(tmp_path / f"m{suffix}") == 0o666 & ~mask
        (tmp_path / "plain").write_text("x")  # what any new file gets
        assert _mode(tmp_path / "plain") == 0o666 & ~mask
    finally:
        os.umask(old)


def test_convert_into_a_missing_directory_names_the_output(tmp_path, capsys):
    schema = Schema.binary(2)
    write_model(tmp_path / "m.json", schema, FeatureSet.from_features(schema, []))
    with pytest.raises(ModelWriteError, match="nowhere/m.uai"):
        write_model(tmp_path / "nowhere" / "m.uai", schema, FeatureSet.from_features(schema, []))
    code = main(["convert", str(tmp_path / "m.json"), str(tmp_path / "nowhere" / "m.uai")])
    err = capsys.readouterr().err
    assert code == 4 and "nowhere/m.uai" in err and ".tmp-" not in err


MSWEB_LIKE = """2,1,2,3
MN {
1.25 +v0_1 +v2_1
-0.5 +v3_2
0.75 +v1_0 +v0_0
}
"""


def test_a_libra_model_with_a_one_state_variable_is_read_scored_and_converted(tmp_path, capsys):
    path = tmp_path / "msweb-like.mn"
    path.write_text(MSWEB_LIKE)
    schema, fs = read_model(path)
    assert schema.cardinalities.tolist() == [2, 1, 2, 3]
    model = MarkovNetwork(schema, fs)
    rows = np.array([[1, 0, 1, 2], [0, 0, 1, 0]], np.uint8)
    terms = model.pll_terms(rows)
    assert np.all(terms[:, 1] == 0)  # a one-state variable is certain
    np.savetxt(tmp_path / "test.data", rows, fmt="%d", delimiter=",")
    for out in ("m.uai", "m.json"):
        assert main(["convert", str(path), str(tmp_path / out)]) == 0
    assert main(["score", str(tmp_path / "m.uai"), str(tmp_path / "test.data"), "--json"]) == 0
    assert main(["inspect", str(path)]) == 0


def test_one_state_columns_are_learned_as_constants(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = np.column_stack(
        [
            rng.integers(0, 2, 2000),
            np.zeros(2000, int),
            rng.integers(0, 3, 2000),
            rng.integers(0, 2, (2000, 2)),
        ]
    ).astype(np.uint8)
    rows[:, 4] = rows[:, 0]
    schema = Schema.from_cardinalities([2, 1, 3, 2, 2])
    dtsl = DTSL(schema, grace_period=50).partial_fit(rows)
    assert np.all(dtsl.pll_terms(rows)[:, 1] == 0)
    np.savetxt(tmp_path / "train.data", rows, fmt="%d", delimiter=",")
    (tmp_path / "train.schema").write_text("2,1,3,2,2\n")
    for algo in ("dtsl", "grafting"):
        out = tmp_path / algo
        assert (
            main(
                [
                    "learn",
                    str(tmp_path / "train.data"),
                    "--out",
                    str(out),
                    "--algo",
                    algo,
                    "--schema",
                    str(tmp_path / "train.schema"),
                    "--quiet",
                ]
            )
            == 0
        )
        assert (
            main(
                [
                    "score",
                    str(out),
                    str(tmp_path / "train.data"),
                    "--cmll",
                    "--samples",
                    "20",
                    "--burn-in",
                    "5",
                ]
            )
            == 0
        )
        assert main(["sample", str(out), "-n", "20", "--out", str(tmp_path / "s.data")]) == 0
        assert set(np.loadtxt(tmp_path / "s.data", delimiter=",")[:, 1]) == {0}


def test_json_output_never_holds_a_non_json_number(tmp_path, capsys):
    """A row the model gives probability 0 scores -inf: --json writes null, which every JSON
    parser reads, where it used to print -Infinity (issue 42)."""
    import json

    model = tmp_path / "zero.uai"
    model.write_text("MARKOV\n2\n2 2\n1\n1 0\n2\n 1 0\n")  # x0 = 1 is impossible
    data = tmp_path / "rows.data"
    data.write_text("1,0\n1,1\n")
    assert main(["score", str(model), str(data), "--json"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-JSON number {c}"))
    assert result["rows"] == 2 and result["pll"] is None
