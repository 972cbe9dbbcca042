"""Pictures of a network and of a run (viz extra; skipped where matplotlib or networkx is
missing, as on CI)."""

import sys

import pytest

from streammn.cli import main

pytest.importorskip("matplotlib")
pytest.importorskip("networkx")


@pytest.fixture(scope="module")
def demo_snapshots(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--out", str(out), "--rows", "20000", "--quiet"]) == 0
    return out


def is_png(path):
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_inspect_draws_the_network(demo_snapshots, tmp_path, capsys):
    for name in ("net.png", "net.svg", "net.html"):
        out = tmp_path / name
        assert main(["inspect", str(demo_snapshots), "--graph", str(out)]) == 0
        assert "edges into" in capsys.readouterr().out
    assert is_png(tmp_path / "net.png")
    svg = (tmp_path / "net.svg").read_text()
    assert svg.count("<path") > 16  # nodes and edges
    page = (tmp_path / "net.html").read_text()
    assert "<svg" in page and "Strongest interactions" in page and "x0" in page


def test_report_draws_the_run(demo_snapshots, tmp_path, capsys):
    from streammn.pictures import run_table

    snaps, history = run_table(demo_snapshots)
    assert len(snaps) == 5 and len(history) == 5
    assert all(s["rows_per_second"] > 0 for s in snaps[1:])
    assert [s["rows_seen"] for s in snaps] == [h["rows_seen"] for h in history]
    assert main(["report", str(demo_snapshots), "--out", str(tmp_path / "r.png")]) == 0
    assert is_png(tmp_path / "r.png")
    assert main(["report", str(demo_snapshots), "--out", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "<svg" in page and page.count("<tr>") == 6  # header + 5 snapshots


def test_bad_requests_exit_with_their_codes(demo_snapshots, tmp_path, monkeypatch, capsys):
    assert main(["inspect", str(demo_snapshots), "--graph", str(tmp_path / "g.txt")]) == 2
    assert "suffix must be one of" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r.png")]) == 3
    assert "no snapshots to report on" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "networkx", None)  # as if not installed
    assert main(["inspect", str(demo_snapshots), "--graph", str(tmp_path / "g.png")]) == 4
    assert "pip install 'streammn[viz]'" in capsys.readouterr().err
