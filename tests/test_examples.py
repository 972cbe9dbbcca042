"""The scripts in examples/ run and compute what the README says they do."""

import importlib.util

import pytest

from helpers.datasets import DATA, ROOT


def load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dtsl_dn2mn_matches_libra_on_nltcs():
    result = load("dtsl_dn2mn").main(str(DATA), "nltcs", 0.1)
    assert result["dn_pll"] == pytest.approx(-4.972, abs=0.01)  # Libra DN, REFERENCE.md
    assert result["mn_pll"] == pytest.approx(-4.928, abs=0.01)  # Libra DN2MN
    assert result["published_pll"] >= result["mn_pll"] - 1e-9  # refined only where it wins


@pytest.mark.slow
def test_stream_parquet_example(tmp_path):
    snap = load("stream_parquet").main(
        str(DATA / "msnbc_stream" / "msnbc_stream.data"), str(tmp_path / "snaps")
    )
    assert snap.manifest["rows_seen"] == 97108


def test_count_pairs_example(capsys):
    load("count_pairs").main(str(DATA / "nltcs" / "nltcs.valid.data"), top=3)
    out = capsys.readouterr().out
    assert "2,157 rows" in out and out.count("mutual information") == 3


@pytest.mark.slow
def test_planted_structure_example(capsys):
    """Grafting at its defaults finds exactly the planted grid; ET nearly (it keeps 23 of 24)."""
    result = load("planted_structure").main("grid", 16, 3, 5000)
    assert result["grafting"]["recall"] == 1.0 and result["grafting"]["precision"] == 1.0
    assert result["ensemble of trees"]["recall"] >= 0.9
    assert result["ensemble of trees"]["precision"] >= 0.9
    planted = result["planted"]["test_pll"]
    assert planted - 0.05 < result["grafting"]["test_pll"] <= planted + 0.05
    assert "recall 1.000, precision 1.000" in capsys.readouterr().out
