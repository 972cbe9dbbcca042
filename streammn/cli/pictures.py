"""Pictures of a learned network and of a run over time (optional extra ``viz``).

:func:`draw_network` draws a Markov network as a graph: a node per variable sized by its degree,
an edge per pair of variables sharing a feature, drawn wider and darker the stronger the pair
interacts (the summed absolute weight of the features over both,
:meth:`~streammn.network.model.MarkovNetwork.pair_strengths`). The layout is networkx's
force-directed one with the strengths as spring weights, so strongly coupled variables sit
together; beyond ``4 n`` edges only the strongest are drawn (a learned DN2MN model has many weak
ones) and beyond 60 variables only the best-connected are labelled, which keeps 16 to 200 variables
readable.

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
import json
import textwrap
import warnings
from datetime import datetime
from pathlib import Path

import numpy as np

from streammn.errors import PictureError, VizMissing

SUFFIXES = (".png", ".svg", ".html")


class MixedRunsWarning(UserWarning):
    """A snapshot directory holds more than one run; the report draws the newest."""


EDGES_PER_VAR = 1.5
NOTED_EDGES = 3  # the strongest edges whose strongest feature is written under the graph
NOTE_INCHES = 0.17
TABLED_EDGES = 50  # the strongest edges an .html page's table lists


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
def default_top_edges(n_vars: int) -> int:
    """Edges drawn by default: about one and a half per variable (at least 12), enough for the
    backbone of a model and few enough to read at 16 to 1,000 variables."""
    return max(12, int(round(EDGES_PER_VAR * n_vars)))


def select_edges(strengths, n_vars: int, top_edges=None, min_strength=None) -> list:
    """The edges to draw from ``strengths`` (``(strength, i, j)``, strongest first): those of
    at least ``min_strength``, the strongest ``top_edges`` of them (default
    :func:`default_top_edges`)."""
    top = default_top_edges(n_vars) if top_edges is None else int(top_edges)
    kept = [e for e in strengths if min_strength is None or e[0] >= min_strength]
    return kept[:top]


def draw_network(
    model, out, title: str | None = None, seed: int = 0, top_edges=None, min_strength=None
) -> dict:
    """Draw ``model`` (a MarkovNetwork) into ``out`` (.png, .svg or .html); returns what was
    drawn: ``n_vars``, ``n_edges``, ``edges_drawn``, ``labelled``, ``unplaced`` (variables
    with no drawn edge, listed under the picture) and ``communities``.

    The strongest edges are drawn (:func:`select_edges`: ``top_edges``, ``min_strength``);
    the variables they join are split into communities (Louvain, on the drawn strengths), each
    laid out on its own, strongly coupled variables together, and the communities placed apart
    without overlapping; variables are coloured by community. Labels are placed next to their
    node where they overlap no other label or node, the best-connected first; a variable left
    unlabelled that way keeps its coloured node. From the command line: ``streammn
    inspect snaps --graph network.svg [--top-edges N] [--min-strength S]``.
    """
    fig, info = network_figure(model, title, seed, top_edges, min_strength)
    names = model.schema.names
    table = _table(
        ["a", "b", "strength", "strongest feature", "its weight"],
        [
            (names[i], names[j], f"{s:.4f}", model.features.text(f), _weight(model, f))
            for s, i, j, f in info["strongest"]
        ],
    )
    _save(fig, out, info["heading"], "<h2>Strongest interactions</h2>" + table)
    return {k: v for k, v in info.items() if k not in ("heading", "label_boxes", "strongest")}


def _strongest(model, strengths, top: int = TABLED_EDGES) -> list[tuple]:
    """``(strength, i, j, f)`` for the ``top`` strongest edges of ``strengths`` (strongest
    first), ``f`` their strongest feature."""
    edges = strengths[:top]
    return [(*e, f) for e, f in zip(edges, model.strongest_features([e[1:] for e in edges]))]


def _strongest_notes(model, strongest) -> list[str]:
    """A line for each edge of ``strongest`` (:func:`_strongest`): the two variables and their
    strongest feature, in the names of the variables' states."""
    names = model.schema.names
    return [
        _short_note(
            f"{names[i]} - {names[j]}: strongest feature {model.features.text(f)} "
            f"(weight {_weight(model, f)})"
        )
        for _, i, j, f in strongest
    ]


def _short_note(text: str, most: int = 110) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _weight(model, f: int) -> str:
    return f"{float(model.features.weights[f]):+.4f}"


def network_figure(model, title=None, seed=0, top_edges=None, min_strength=None):
    """The figure of :func:`draw_network` and what it drew (``label_boxes``: each placed
    label's extent in display units, for checking that none overlap; ``strongest``: the
    table's edges, :func:`_strongest`)."""
    nx, Figure = _imports()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    names = model.schema.names
    n = len(names)
    strengths = model.pair_strengths()  # strongest first
    shown = select_edges(strengths, n, top_edges, min_strength)
    graph = nx.Graph()
    top = shown[0][0] if shown else 1.0
    graph.add_weighted_edges_from((i, j, s / top) for s, i, j in shown)
    placed = sorted(graph.nodes)
    unplaced = [v for v in range(n) if v not in graph]
    pos, community = _community_layout(nx, graph, seed) if placed else ({}, {})
    n_placed = max(len(placed), 1)
    side = 7.0 if n_placed <= 30 else 9.0 if n_placed <= 80 else 12.0 if n_placed <= 250 else 16.0
    strongest = _strongest(model, strengths)  # the drawn edges are its first ones
    notes = _strongest_notes(model, strongest[: min(NOTED_EDGES, len(shown))])
    below = NOTE_INCHES * len(notes) + (0.3 if notes else 0.0)  # under the colour bar
    footer = (0.9 if unplaced else 0.5) + below
    fig = Figure(figsize=(side, side + footer))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.02, (footer + 0.1) / (side + footer), 0.96, 0.96 * side / (side + footer)))
    ax.set_axis_off()
    ax.set_xlim(-1.08, 1.08)
    ax.set_ylim(-1.08, 1.08)
    # node radius in points: a node's share of the picture, between 3 and 9 points
    spacing_pt = 72.0 * side * 0.96 / np.sqrt(n_placed)
    radius_pt = float(np.clip(0.14 * spacing_pt, 3.0, 9.0))
    font = float(np.clip(0.16 * spacing_pt, 6.0, 10.0))
    cmap = _cmap()
    low = shown[-1][0] if shown else 0.0
    norm = Normalize(vmin=min(low, top * 0.999), vmax=top)
    if shown:
        ordered = sorted(graph.edges(data="weight"), key=lambda e: e[2])  # strong ones on top
        strength = np.array([w * top for _, _, w in ordered])
        rel = (strength - norm.vmin) / max(norm.vmax - norm.vmin, 1e-12)
        nx.draw_networkx_edges(
            graph,
            pos,
            ax=ax,
            edgelist=[(a, b) for a, b, _ in ordered],
            width=0.5 + 2.5 * rel,
            edge_color=strength,
            edge_cmap=cmap,
            edge_vmin=norm.vmin,
            edge_vmax=norm.vmax,
            alpha=0.9,
            node_size=(2 * radius_pt) ** 2,
        )
        palette = _palette()
        nx.draw_networkx_nodes(
            graph,
            pos,
            ax=ax,
            nodelist=placed,
            node_size=(2 * radius_pt) ** 2,
            node_color=[palette[community[v] % len(palette)] for v in placed],
            edgecolors="#333333",
            linewidths=0.6,
        )
    degree = {v: graph.degree(v, weight="weight") for v in placed}
    order = sorted(placed, key=lambda v: (-degree[v], v))
    boxes = _place_labels(fig, ax, pos, names, order, font, radius_pt)
    n_comm = len(set(community.values()))
    cut = f"at least {min_strength:g}, " if min_strength is not None else ""
    heading = title or (
        f"{n} variables, {len(strengths):,} edges: the strongest {len(shown):,} drawn "
        f"({cut}{len(placed)} variables in {n_comm} communities)"
    )
    fig.suptitle(heading, fontsize=11, y=1.0 - 0.05 / (side + footer), va="top")
    if shown:
        bar_at = 0.35 * (footer - below) + below
        cax = fig.add_axes((0.30, bar_at / (side + footer), 0.40, 0.012 * 7 / side))
        bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), cax=cax, orientation="horizontal")
        bar.set_label("interaction strength (summed |weight| of the features over both)", size=8)
        bar.ax.tick_params(labelsize=7)
    if unplaced:
        listed = ", ".join(names[v] for v in unplaced[:40])
        more = f" and {len(unplaced) - 40} more" if len(unplaced) > 40 else ""
        weakest = f" (all their edges weaker than {low:.4g})" if shown else ""
        text = f"{len(unplaced)} variables without a drawn edge{weakest}: {listed}{more}"
        fig.text(
            0.5,
            (footer - 0.12) / (side + footer),
            "\n".join(textwrap.wrap(text, int(side * 15))),
            ha="center",
            va="top",
            fontsize=7.5,
            color="#444444",
        )
    for k, note in enumerate(notes):
        fig.text(
            0.5,
            (NOTE_INCHES * (len(notes) - k - 0.5) + 0.05) / (side + footer),
            note,
            ha="center",
            va="center",
            fontsize=7.5,
            color="#444444",
        )
    return fig, {
        "n_vars": n,
        "n_edges": len(strengths),
        "edges_drawn": len(shown),
        "labelled": len(boxes),
        "unplaced": len(unplaced),
        "communities": n_comm,
        "heading": heading,
        "strongest": strongest,
        "label_boxes": boxes,
    }


def _community_layout(nx, graph, seed: int) -> tuple[dict, dict]:
    """Positions in [-1, 1]^2 and the community of each node: each community laid out by
    itself (force-directed on the drawn strengths) in a disc of area proportional to its size,
    the discs placed by a force-directed layout of the communities then pushed apart until
    none overlap, and nodes kept apart so their labels fit."""
    comms = nx.community.louvain_communities(graph, weight="weight", seed=seed)
    comms = sorted((sorted(c) for c in comms), key=lambda c: (-len(c), c[0]))
    community = {v: k for k, c in enumerate(comms) for v in c}
    radius = np.sqrt([len(c) for c in comms])
    local = []
    for c in comms:
        if len(c) == 1:
            local.append({c[0]: np.zeros(2)})
            continue
        sub = graph.subgraph(c)
        p = nx.spring_layout(sub, weight="weight", seed=seed, iterations=100)
        xy = np.array([p[v] for v in c])
        xy -= xy.mean(axis=0)
        xy /= max(np.abs(xy).max(), 1e-9)
        local.append(dict(zip(c, xy)))
    # the communities: linked by their summed strengths, then separated
    between = nx.Graph()  # a faint link between every two keeps unlinked groups near
    between.add_weighted_edges_from(
        (a, b, 0.02) for a in range(len(comms)) for b in range(a + 1, len(comms))
    )
    for a, b, w in graph.edges(data="weight"):
        ca, cb = community[a], community[b]
        if ca != cb:
            between[ca][cb]["weight"] += w
    if len(comms) > 1:
        p = nx.spring_layout(between, weight="weight", seed=seed, iterations=100)
        centre = np.array([p[k] for k in range(len(comms))]) * radius.sum()
    else:
        centre = np.zeros((1, 2))
    centre = _separate_discs(centre, radius * 1.15 + 0.6)
    pos = {}
    for k, c in enumerate(comms):
        for v in c:
            pos[v] = centre[k] + radius[k] * local[k][v]
    nodes = list(pos)
    xy = _fill(np.array([pos[v] for v in nodes]))
    xy = _fill(_separate_points(xy, 1.0 / np.sqrt(len(nodes))))
    return {v: xy[k] for k, v in enumerate(nodes)}, community


def _fill(xy: np.ndarray) -> np.ndarray:
    """Centred and stretched to fill [-1, 1] on both axes (each at most twice the other's
    scale, so a long community is not flattened)."""
    xy = xy - (xy.max(axis=0) + xy.min(axis=0)) / 2
    half = np.maximum(np.abs(xy).max(axis=0), 1e-9)
    return xy / np.maximum(half, half.max() / 2)


def _separate_discs(centre: np.ndarray, radius: np.ndarray, rounds: int = 300) -> np.ndarray:
    """Move discs apart (each pair along the line joining them) until none overlap."""
    c = centre.astype(float).copy()
    rng = np.random.default_rng(0)
    for _ in range(rounds):
        d = c[:, None, :] - c[None, :, :]
        dist = np.sqrt((d**2).sum(axis=2))
        need = radius[:, None] + radius[None, :]
        np.fill_diagonal(need, 0.0)
        over = np.clip(need - dist, 0.0, None)
        if over.max() <= 1e-6:
            break
        dist = np.where(dist > 1e-9, dist, 1.0)
        d = np.where((dist > 1e-9)[:, :, None], d, rng.normal(size=d.shape) * 1e-3)
        c += (
            0.5
            * (d / dist[:, :, None] * over[:, :, None]).sum(axis=1)
            / np.maximum(1, (over > 0).sum(axis=1))[:, None]
        )
    return c


def _separate_points(xy: np.ndarray, gap: float, rounds: int = 60) -> np.ndarray:
    """Push points closer than ``gap`` apart (a node and its label need room)."""
    from scipy.spatial import cKDTree

    xy = xy.copy()
    for _ in range(rounds):
        pairs = cKDTree(xy).query_pairs(gap, output_type="ndarray")
        if pairs.size == 0:
            break
        a, b = pairs[:, 0], pairs[:, 1]
        d = xy[a] - xy[b]
        dist = np.sqrt((d**2).sum(axis=1))
        d[dist < 1e-9] = [1e-3, 0.0]
        dist = np.maximum(dist, 1e-9)
        push = (0.5 * (gap - dist) / dist)[:, None] * d
        np.add.at(xy, a, push)
        np.add.at(xy, b, -push)
    return xy


def _place_labels(fig, ax, pos, names, order, font: float, radius_pt: float) -> list:
    """Put each node's label beside it (right, left, above, below, then the diagonals) where
    it overlaps no placed label, no node and stays in the picture; nodes in ``order`` (the
    best-connected first). Returns the placed labels' boxes (display units)."""
    renderer = fig.canvas.get_renderer()
    to_px = ax.transData.transform
    frame = ax.get_window_extent(renderer)
    r_px = radius_pt * fig.dpi / 72.0
    nodes = {v: to_px(pos[v]) for v in pos}
    node_boxes = np.array([[x - r_px, y - r_px, x + r_px, y + r_px] for x, y in nodes.values()])
    pad = 1.5 * fig.dpi / 72.0
    placed: list = []
    offsets = [
        (1, 0, "left", "center"),
        (-1, 0, "right", "center"),
        (0, 1, "center", "bottom"),
        (0, -1, "center", "top"),
        (0.75, 0.75, "left", "bottom"),
        (-0.75, 0.75, "right", "bottom"),
        (0.75, -0.75, "left", "top"),
        (-0.75, -0.75, "right", "top"),
    ]
    for v in order:
        x, y = nodes[v]
        text = ax.text(0, 0, _short(names[v]), fontsize=font, zorder=5)
        ext = text.get_window_extent(renderer)
        w, h = ext.width + 2 * pad, ext.height + 2 * pad
        text.remove()
        for dx, dy, ha, va in offsets:
            ox, oy = x + dx * (r_px + pad), y + dy * (r_px + pad)
            x0 = ox if ha == "left" else ox - w if ha == "right" else ox - w / 2
            y0 = oy if va == "bottom" else oy - h if va == "top" else oy - h / 2
            box = np.array([x0, y0, x0 + w, y0 + h])
            if box[0] < frame.x0 or box[2] > frame.x1 or box[1] < frame.y0 or box[3] > frame.y1:
                continue
            if _overlaps(box, node_boxes) or (placed and _overlaps(box, np.array(placed))):
                continue
            placed.append(box)
            cx, cy = ax.transData.inverted().transform(
                ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
            )
            ax.text(
                cx,
                cy,
                _short(names[v]),
                fontsize=font,
                ha="center",
                va="center",
                zorder=5,
                bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.75},
            )
            break
    return placed


def _overlaps(box: np.ndarray, boxes: np.ndarray) -> bool:
    return bool(
        (
            (boxes[:, 0] < box[2])
            & (box[0] < boxes[:, 2])
            & (boxes[:, 1] < box[3])
            & (box[1] < boxes[:, 3])
        ).any()
    )


def _short(name: str, most: int = 14) -> str:
    """``name``, or its start and end around an ellipsis (names often differ at the end)."""
    return name if len(name) <= most else name[:6] + "…" + name[7 - most :]


def _palette() -> list:
    from matplotlib import colormaps

    return [colormaps["tab20"](k) for k in range(0, 20, 2)] + [
        colormaps["tab20"](k) for k in range(1, 20, 2)
    ]


def _cmap():
    from matplotlib import colormaps

    from matplotlib.colors import LinearSegmentedColormap

    blues = colormaps["Blues"]  # from light blue: the weakest drawn edge still shows
    return LinearSegmentedColormap.from_list("edges", blues(np.linspace(0.3, 1.0, 256)))


# the run ---------------------------------------------------------------------------------------
def run_table(snapshot_dir) -> tuple[list[dict], list[dict]]:
    """``(snapshots, history)`` of a run: one dict per kept snapshot (sequence, created,
    rows_seen, reason, scores, n_features, n_edges, rows_per_second since the previous kept
    one) and the newest manifest's score history (one entry per snapshot ever written)."""
    from streammn.stream.snapshot import SnapshotError, list_snapshots, read_snapshot

    snaps = []
    for path in list_snapshots(snapshot_dir):
        m = read_snapshot(path).manifest
        snaps.append(
            {
                "run": (
                    m.get("learner", {}).get("class"),
                    json.dumps(m.get("learner", {}).get("params"), sort_keys=True),
                    m.get("source", {}).get("description"),
                ),
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
    first = len(snaps) - 1  # the newest run: back to a change of learner or source, or a restart
    while first > 0 and (
        snaps[first - 1]["run"] == snaps[first]["run"]
        and snaps[first - 1]["rows_seen"] <= snaps[first]["rows_seen"]
    ):
        first -= 1
    if first:
        older = f"{snaps[0]['sequence']}-{snaps[first - 1]['sequence']}"
        warnings.warn(
            f"{snapshot_dir} holds the snapshots of more than one run: reporting the newest "
            f"(snapshots {snaps[first]['sequence']}-{snaps[-1]['sequence']}), not {older}",
            MixedRunsWarning,
            stacklevel=2,
        )
        snaps = snaps[first:]
    for s in snaps:
        s.pop("run")
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
    _suffix(out)
    fig, snaps, history = report_figure(snapshot_dir)
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


def report_figure(snapshot_dir):
    """``(figure, snapshots, history)`` of :func:`draw_report` (the newest run of
    ``snapshot_dir``, :func:`run_table`)."""
    _, Figure = _imports()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter

    snaps, history = run_table(snapshot_dir)
    fig = Figure(figsize=(12, 8.5))
    FigureCanvasAgg(fig)
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
    pll.set_title("pseudo-log-likelihood per row (higher is better)", pad=22)
    if pll.get_lines():  # above the plot, where it covers no point
        pll.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, frameon=False, fontsize=9)
    else:
        _empty(
            pll,
            "no PLL scores in these snapshots: a streaming run scores each batch before "
            "learning it (prequential); --validation FILE scores held-out rows",
        )
    rated = [s for s in snaps if s["rows_per_second"] is not None]
    rate.set_title("throughput between kept snapshots (rows/s)")
    if rated:
        rate.plot(
            [s["rows_seen"] for s in rated],
            [s["rows_per_second"] for s in rated],
            "o-",
            color="#2a9d8f",
            markersize=4,
        )
        rate.set_ylim(bottom=0)
    else:
        _empty(rate, "needs two kept snapshots of the run")
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
    size.set_title("model size", pad=22)
    size.set_ylim(bottom=0, top=1.08 * max(max(s["n_features"] for s in snaps), 1))
    edges.set_ylim(bottom=0, top=1.08 * max(max(s["n_edges"] for s in snaps), 1))
    size.legend(
        handles=size.get_lines() + edges.get_lines(),
        loc="lower left",
        bbox_to_anchor=(0.0, 1.0),
        ncol=2,
        frameon=False,
        fontsize=9,
    )
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
    when.set_ylim(bottom=0, top=1.08 * max(max(rows_s), 1))
    if max(elapsed) == 0:
        when.set_xlim(-1, 1)
    whole = StrMethodFormatter("{x:,.0f}")
    for ax in (pll, rate, size):
        if ax.get_lines():
            ax.set_xlabel("rows seen")
            ax.xaxis.set_major_locator(MaxNLocator(5, integer=True))
            ax.xaxis.set_major_formatter(whole)
    for ax in (rate, size, edges, when):  # counts: whole ticks, each once
        if ax.get_lines():
            ax.yaxis.set_major_locator(MaxNLocator(6, integer=True))
            ax.yaxis.set_major_formatter(whole)
    for ax in (pll, rate, size, when):
        ax.grid(alpha=0.3)
    when.set_xlabel("seconds")
    fig.tight_layout()
    return fig, snaps, history


def _empty(ax, text: str) -> None:
    """A panel with nothing to plot: the reason, and no axes to misread."""
    ax.set_xticks([])
    ax.set_yticks([])
    ax.text(
        0.5,
        0.5,
        "\n".join(textwrap.wrap(text, 48)),
        ha="center",
        va="center",
        transform=ax.transAxes,
        color="#555555",
    )


def _fmt(x) -> str:
    return "" if x is None else f"{x:.4f}"
