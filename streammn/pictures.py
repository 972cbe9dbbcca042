"""Pictures of a learned network and of a run over time (optional extra ``viz``).

:func:`draw_network` draws a Markov network as a graph: a node per variable sized by its degree,
an edge per pair of variables sharing a feature, drawn wider and darker the stronger the pair
interacts (the summed absolute weight of the features over both,
:meth:`~streammn.model.MarkovNetwork.pair_strengths`). The layout is networkx's force-directed
one with the strengths as spring weights, so strongly coupled variables sit together; beyond
``4 n`` edges only the strongest are drawn (a learned DN2MN model has many weak ones) and beyond
60 variables only the best-connected are labelled, which keeps 16 to 200 variables readable.

:func:`draw_report` draws a run from its snapshot manifests: the prequential and validation PLL
against rows seen (from the newest manifest's history, which outlives pruned snapshots), the
rate in rows/s between consecutive kept snapshots (from their creation times), features and
edges, and when each snapshot was written.

Output by suffix: ``.png``, ``.svg``, or ``.html`` (a self-contained page: the figure as inline
SVG plus a table). matplotlib is used through its object API (no pyplot, no global backend).
"""

from __future__ import annotations

import html
import io
from datetime import datetime
from pathlib import Path

import numpy as np

from streammn.errors import PictureError, VizMissing

SUFFIXES = (".png", ".svg", ".html")
MAX_EDGES_PER_NODE = 4
MAX_LABELS = 60


def _imports():
    try:
        import networkx
        from matplotlib.figure import Figure
    except ImportError as e:
        raise VizMissing(
            f"pictures need matplotlib and networkx ({e}); install the extra: "
            f"pip install 'streammn[viz]'"
        ) from None
    return networkx, Figure


def _suffix(out) -> str:
    suffix = Path(out).suffix.lower()
    if suffix not in SUFFIXES:
        raise PictureError(f"{out}: the picture's suffix must be one of {', '.join(SUFFIXES)}")
    return suffix


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _save(fig, out, title: str, table_html: str = "") -> None:
    suffix = _suffix(out)
    if suffix == ".html":
        page = (
            f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>"
            f"{html.escape(title)}</title><style>body{{font-family:sans-serif;margin:2em}}"
            f"table{{border-collapse:collapse}}td,th{{padding:2px 10px;text-align:right;"
            f"border-bottom:1px solid #ddd}}</style></head><body><h1>{html.escape(title)}"
            f"</h1>\n{_svg(fig)}\n{table_html}\n</body></html>\n"
        )
        Path(out).write_text(page, encoding="utf-8")
    else:
        fig.savefig(out, format=suffix[1:], dpi=120, bbox_inches="tight")


def _table(header, rows) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


# the network ----------------------------------------------------------------------------------
def draw_network(model, out, title: str | None = None, seed: int = 0) -> dict:
    """Draw ``model`` (a MarkovNetwork) into ``out`` (.png, .svg or .html); returns what was
    drawn: ``n_vars``, ``n_edges``, ``edges_drawn``, ``labelled``.

    From the command line: ``streammn inspect snaps --graph network.svg``.
    """
    nx, Figure = _imports()
    _suffix(out)
    names = model.schema.names
    n = len(names)
    strengths = model.pair_strengths()  # strongest first
    shown = strengths[: MAX_EDGES_PER_NODE * n]
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    top = shown[0][0] if shown else 1.0
    graph.add_weighted_edges_from((i, j, s / top) for s, i, j in shown)
    pos = nx.spring_layout(graph, weight="weight", seed=seed, k=1.6 / np.sqrt(n), iterations=200)
    degree = np.array([graph.degree(v) for v in range(n)], dtype=float)
    size_scale = 2400.0 / np.sqrt(n)
    node_size = 0.3 * size_scale + size_scale * degree / max(degree.max(), 1.0)
    thickness = min(1.0, np.sqrt(40.0 / n))  # thinner edges in a crowded picture
    labelled = (
        range(n)
        if n <= MAX_LABELS
        else np.argsort(-degree, kind="stable")[: MAX_LABELS // 2].tolist()
    )
    side = 7.0 if n <= 40 else 10.0 if n <= 100 else 13.0
    fig = Figure(figsize=(side, side))
    ax = fig.add_subplot()
    ax.set_axis_off()
    ordered = sorted(graph.edges(data="weight"), key=lambda e: e[2])  # strong ones on top
    if ordered:
        rel = np.array([w for _, _, w in ordered])
        nx.draw_networkx_edges(
            graph,
            pos,
            ax=ax,
            edgelist=[(a, b) for a, b, _ in ordered],
            width=thickness * (0.4 + 4.0 * rel),
            edge_color=rel,
            edge_cmap=_cmap(),
            edge_vmin=0.0,
            edge_vmax=1.0,
            alpha=0.85,
            node_size=node_size,
        )
    nx.draw_networkx_nodes(
        graph,
        pos,
        ax=ax,
        node_size=node_size,
        node_color="#f4a259",
        edgecolors="#5b3a1a",
        linewidths=0.8,
    )
    font = 10 if n <= 30 else 8 if n <= 80 else 6
    nx.draw_networkx_labels(
        graph, pos, ax=ax, labels={v: names[v] for v in labelled}, font_size=font
    )
    extra = "" if len(shown) == len(strengths) else f", the strongest {len(shown):,} drawn"
    heading = title or f"{n} variables, {len(strengths):,} edges{extra}"
    ax.set_title(
        heading + "\nnode size: degree; edge width and colour: interaction strength", fontsize=11
    )
    table = _table(
        ["a", "b", "strength"], [(names[i], names[j], f"{s:.4f}") for s, i, j in strengths[:50]]
    )
    _save(fig, out, heading, "<h2>Strongest interactions</h2>" + table)
    return {
        "n_vars": n,
        "n_edges": len(strengths),
        "edges_drawn": len(shown),
        "labelled": len(labelled),
    }


def _cmap():
    from matplotlib import colormaps

    return colormaps["Blues"].resampled(256)


# the run ---------------------------------------------------------------------------------------
def run_table(snapshot_dir) -> tuple[list[dict], list[dict]]:
    """``(snapshots, history)`` of a run: one dict per kept snapshot (sequence, created,
    rows_seen, reason, scores, n_features, n_edges, rows_per_second since the previous kept
    one) and the newest manifest's score history (one entry per snapshot ever written)."""
    from streammn.snapshot import SnapshotError, list_snapshots, read_snapshot

    snaps = []
    for path in list_snapshots(snapshot_dir):
        m = read_snapshot(path).manifest
        snaps.append(
            {
                "sequence": m.get("sequence"),
                "created": m.get("created"),
                "rows_seen": m.get("rows_seen"),
                "reason": m.get("reason"),
                "prequential_pll": m.get("scores", {}).get("prequential_pll"),
                "validation_pll": m.get("scores", {}).get("validation_pll"),
                "n_features": m.get("model", {}).get("n_features"),
                "n_edges": m.get("model", {}).get("n_edges"),
                "history": m.get("engine", {}).get("history", []),
            }
        )
    if not snaps:
        raise SnapshotError("no snapshots to report on", path=snapshot_dir)
    for prev, cur in zip(snaps[:-1], snaps[1:]):
        seconds = (_time(cur["created"]) - _time(prev["created"])).total_seconds()
        rows = cur["rows_seen"] - prev["rows_seen"]
        cur["rows_per_second"] = rows / seconds if seconds > 0 and rows > 0 else None
    snaps[0]["rows_per_second"] = None
    history = snaps[-1].pop("history") or [
        {k: s[k] for k in ("rows_seen", "prequential_pll", "validation_pll")} for s in snaps
    ]
    for s in snaps:
        s.pop("history", None)
    return snaps, history


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def draw_report(snapshot_dir, out) -> dict:
    """Draw the run in ``snapshot_dir`` into ``out`` (.png, .svg or .html, the page adding a
    table of the snapshots); returns ``{"snapshots": n, "history": m}``.

    From the command line: ``streammn report snaps --out report.html``.
    """
    _, Figure = _imports()
    _suffix(out)
    snaps, history = run_table(snapshot_dir)
    fig = Figure(figsize=(12, 8.5))
    (pll, rate), (size, when) = fig.subplots(2, 2)
    rows_h = [h["rows_seen"] for h in history]
    for key, label, style in (
        ("prequential_pll", "prequential (test, then train)", "o-"),
        ("validation_pll", "validation rows", "s-"),
    ):
        xs = [r for r, h in zip(rows_h, history) if h.get(key) is not None]
        ys = [h[key] for h in history if h.get(key) is not None]
        if ys:
            pll.plot(xs, ys, style, label=label, markersize=4)
    pll.set_title("pseudo-log-likelihood per row (higher is better)")
    pll.legend(loc="lower right")
    rated = [s for s in snaps if s["rows_per_second"] is not None]
    if rated:
        rate.plot(
            [s["rows_seen"] for s in rated],
            [s["rows_per_second"] for s in rated],
            "o-",
            color="#2a9d8f",
            markersize=4,
        )
    else:
        rate.text(0.5, 0.5, "needs two kept snapshots", ha="center", transform=rate.transAxes)
    rate.set_title("throughput between kept snapshots (rows/s)")
    rate.set_ylim(bottom=0)
    rows_s = [s["rows_seen"] for s in snaps]
    size.plot(
        rows_s,
        [s["n_features"] for s in snaps],
        "o-",
        color="#264653",
        label="features",
        markersize=4,
    )
    size.set_ylabel("features")
    edges = size.twinx()
    edges.plot(
        rows_s, [s["n_edges"] for s in snaps], "s--", color="#e76f51", label="edges", markersize=4
    )
    edges.set_ylabel("edges")
    size.set_title("model size")
    size.legend(handles=size.get_lines() + edges.get_lines(), loc="lower right")
    start = _time(snaps[0]["created"])
    elapsed = [(_time(s["created"]) - start).total_seconds() for s in snaps]
    when.plot(elapsed, rows_s, "o-", color="#6d597a", markersize=5)
    for e, s in zip(elapsed, snaps):
        when.annotate(
            str(s["sequence"]),
            (e, s["rows_seen"]),
            textcoords="offset points",
            xytext=(4, -10),
            fontsize=8,
        )
    when.set_title(f"snapshots written (seconds after {start:%Y-%m-%d %H:%M:%S} UTC)")
    when.set_ylabel("rows seen")
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter

    for ax in (pll, rate, size, when):
        ax.grid(alpha=0.3)
        if ax is not when:
            ax.set_xlabel("rows seen")
            ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
            ax.xaxis.set_major_locator(MaxNLocator(5))
    for axis in (rate.yaxis, size.yaxis, edges.yaxis, when.yaxis):
        axis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    when.set_xlabel("seconds")
    fig.tight_layout()
    title = f"streammn run: {Path(snapshot_dir).resolve().name}"
    table = _table(
        [
            "snapshot",
            "created",
            "rows seen",
            "reason",
            "prequential PLL",
            "validation PLL",
            "features",
            "edges",
            "rows/s",
        ],
        [
            (
                s["sequence"],
                s["created"],
                f"{s['rows_seen']:,}",
                s["reason"],
                _fmt(s["prequential_pll"]),
                _fmt(s["validation_pll"]),
                f"{s['n_features']:,}",
                f"{s['n_edges']:,}",
                "" if s["rows_per_second"] is None else f"{s['rows_per_second']:,.0f}",
            )
            for s in snaps
        ],
    )
    _save(fig, out, title, "<h2>Snapshots</h2>" + table)
    return {"snapshots": len(snaps), "history": len(history)}


def _fmt(x) -> str:
    return "" if x is None else f"{x:.4f}"
