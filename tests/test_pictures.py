"""Pictures of a network and of a run (viz extra, in the test extra so CI runs them; skipped
where matplotlib or networkx is missing)."""

import html
import json
import shutil
import sys
import warnings

import pytest

from streammn.cli import main
from streammn.planted import planted_communities

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


def test_named_states_reach_inspect_and_the_pictures(tmp_path, capsys):
    """A model of ordinary events speaks its value names: inspect's strongest interactions,
    the notes under the graph and the page's table name states, not state numbers."""
    from helpers.datasets import ROOT

    snaps = tmp_path / "snaps"
    events = str(ROOT / "examples" / "events.csv")
    assert main(["learn", events, "--out", str(snaps), "--missing", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(snaps), "--graph", str(tmp_path / "g.html"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    strongest = info["strongest_interactions"][0]
    states = {name: [str(s).lower() for s in v] for name, v in info["states"].items()}
    for condition in strongest["strongest_feature"].split(" & "):
        name, value = condition.replace("!=", "=").split("=", 1)
        assert value in states[name], condition  # a state's name, not its number
    page = (tmp_path / "g.html").read_text()
    assert html.escape(strongest["strongest_feature"]) in page
    from streammn.cli.commands import load_model
    from streammn.cli.pictures import network_figure

    fig, _ = network_figure(load_model(str(snaps))[0])
    notes = [t.get_text() for t in fig.texts if "strongest feature" in t.get_text()]
    assert notes and strongest["strongest_feature"] in notes[0]


def test_report_draws_the_run(demo_snapshots, tmp_path, capsys):
    from streammn.cli.pictures import run_table

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


@pytest.mark.parametrize("n_vars", [16, 69, 200])
def test_network_pictures_stay_readable(n_vars):
    import numpy as np

    from streammn.cli.pictures import default_top_edges, network_figure

    model = planted_communities(n_vars)
    fig, info = network_figure(model)
    assert info["edges_drawn"] == min(default_top_edges(n_vars), info["n_edges"])
    assert info["unplaced"] >= 3  # the independent variables are listed below, not scattered
    listed = [t.get_text() for t in fig.texts if "without a drawn edge" in t.get_text()]
    listed = " ".join(listed).replace("\n", " ")
    assert all(name in listed for name in model.schema.names[-3:])
    boxes = np.array(info["label_boxes"])
    assert len(boxes) >= 0.5 * (n_vars - info["unplaced"])  # most drawn variables named
    a, b = np.triu_indices(len(boxes), 1)
    overlap = (
        (boxes[a, 0] < boxes[b, 2])
        & (boxes[b, 0] < boxes[a, 2])
        & (boxes[a, 1] < boxes[b, 3])
        & (boxes[b, 1] < boxes[a, 3])
    )
    assert not overlap.any()
    assert info["communities"] >= 2 if n_vars > 16 else info["communities"] >= 1


def test_graph_keeps_the_strong_edges_asked_for(tmp_path, capsys):
    from streammn.formats import write_model

    model = planted_communities(40)
    write_model(tmp_path / "m.json", model.schema, model.features)
    strengths = model.pair_strengths()
    out = str(tmp_path / "g.png")
    assert main(["inspect", str(tmp_path / "m.json"), "--graph", out, "--top-edges", "7"]) == 0
    assert "drew 7 edges" in capsys.readouterr().out and is_png(tmp_path / "g.png")
    cut = strengths[20][0]
    args = ["--graph", out, "--min-strength", f"{cut}", "--top-edges", "1000", "--json"]
    assert main(["inspect", str(tmp_path / "m.json"), *args]) == 0
    drawn = json.loads(capsys.readouterr().out)["graph"]["edges_drawn"]
    assert drawn == sum(s >= cut for s, _, _ in strengths)


def test_report_panels_read_right(demo_snapshots):
    from streammn.cli.pictures import report_figure

    fig, snaps, _ = report_figure(demo_snapshots)
    fig.canvas.draw()
    pll, rate, size, when = fig.axes[:4]
    edges = fig.axes[4]
    for ax in fig.axes:  # no tick label twice on one axis
        for axis in (ax.xaxis, ax.yaxis):
            labels = [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
            assert len(labels) == len(set(labels)), labels
    assert size.get_ylim()[0] == 0 and edges.get_ylim()[0] == 0 and rate.get_ylim()[0] == 0
    renderer = fig.canvas.get_renderer()
    legend = pll.get_legend().get_window_extent(renderer)
    assert legend.y0 >= pll.get_window_extent(renderer).y1 - 1  # above the curves, not on them


def test_report_of_a_mixed_directory_draws_the_newest_run(demo_snapshots, tmp_path, capsys):
    from streammn.cli.pictures import MixedRunsWarning, run_table

    other = tmp_path / "other"
    assert main(["demo", "--out", str(other), "--rows", "3000", "--vars", "8", "--quiet"]) == 0
    mixed = tmp_path / "mixed"
    shutil.copytree(demo_snapshots, mixed)
    newest = sorted(p for p in other.iterdir() if p.name.startswith("snap-"))[-1]
    shutil.copytree(newest, mixed / "snap-000099")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        snaps, history = run_table(mixed)
    assert [w.category for w in caught] == [MixedRunsWarning]
    assert len(snaps) == 1 and snaps[0]["rows_seen"] == 3000 and len(history) >= 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no matplotlib warning leaks
        warnings.simplefilter("ignore", MixedRunsWarning)
        assert main(["report", str(mixed), "--out", str(tmp_path / "r.png")]) == 0
    assert is_png(tmp_path / "r.png")
    assert main(["report", str(mixed), "--out", str(tmp_path / "r.svg")]) == 0
    err = capsys.readouterr().err
    assert "more than one run" in err and "matplotlib" not in err.lower()
