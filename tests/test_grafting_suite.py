"""The planted-model suite's bookkeeping (benchmarks/grafting_planted.py): the paired standard
error of a test-PLL gap and the merge of result files by case."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import grafting_planted as suite  # noqa: E402


def test_paired_difference_matches_the_paired_t_statistic():
    rng = np.random.default_rng(0)
    base = rng.normal(-20.0, 3.0, 500)  # the row-to-row spread both models share
    a, b = base + rng.normal(0.01, 0.05, 500), base + rng.normal(0.0, 0.05, 500)
    mean, se = suite.paired_difference(a, b)
    assert mean == pytest.approx(float(np.mean(a - b)))
    assert mean / se == pytest.approx(stats.ttest_rel(a, b).statistic)
    # unpaired, the shared spread would swamp the gap
    assert se < 0.1 * np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)


def case(family, n, pll, commit):
    return {
        "family": family,
        "n": n,
        "states": 3,
        "coupling": "strong",
        "rows": 20000,
        "true_edges": 1,
        "commit": commit,
        "clock": "cpu",
        "runs": [
            {
                "strategy": "best_choice",
                "edges": 1,
                "recall": 1.0,
                "precision": 1.0,
                "test_pll": pll,
                "seconds": 1.0,
            }
        ],
    }


def test_merge_replaces_a_case_in_place_and_keeps_the_rest(tmp_path):
    old = {
        "machine": "m",
        "seed": 3,
        "cases": [
            case("tree", 30, -1.0, "old"),
            case("grid", 200, -2.0, "old"),
            case("tree", 200, -3.0, "old"),
        ],
    }
    new = {"machine": "m", "seed": 3, "cases": [case("grid", 200, -1.5, "new")]}
    paths = []
    for name, results in (("old", old), ("new", new)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(results))
    out = tmp_path / "merged.json"
    suite.main(["--merge", *map(str, paths), "--out", str(out)])
    merged = json.loads(out.read_text())["cases"]
    assert [(c["family"], c["n"], c["commit"]) for c in merged] == [
        ("tree", 30, "old"),
        ("grid", 200, "new"),
        ("tree", 200, "old"),
    ]
    assert merged[1]["runs"][0]["test_pll"] == -1.5
    table = out.with_suffix(".md").read_text()
    assert "| grid | 200 | 3 | strong | 20000 | 1 | best_choice |" in table
    assert table.count("| new |") == 1 and table.count("| old |") == 2
