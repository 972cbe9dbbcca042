"""Drift benchmark: does one-pass DTSL follow a stream that changes, and at what cost?

Streams come from the planted logistic Bayesian networks of the convergence benchmark
(:func:`benchmarks.convergence.bn_chunks`), 60 variables:

- ``abrupt``: network A (seed 1) for the first 1M rows, then network B (seed 2) for 1M rows.
- ``gradual``: A for 1M rows, then each row comes from B with a probability rising linearly
  from 0 to 1 over the next 500k rows, then B for 500k rows.
- ``stationary``: network A for 10M rows: false drift alarms per 10M rows at the defaults,
  and throughput with adaptation on against off (same rows, learning time only).

Arms on the changing streams: no adaptation (defaults), drift adaptation (``drift=
'page-hinkley'``), forgetting (``half_life=100_000``), both; and the reference, a model at the
defaults trained only on the post-change rows (from row 1M for ``abrupt``, from the end of the
transition for ``gradual``). Every arm is scored prequentially: each window of 10,000 rows is
scored (mean PLL per row) before it is learned. Recovery: rows after the change until an arm's
window PLL is within 2% of the reference's at the same row and stays there to the end.

    PYTHONPATH=. python -m benchmarks.drift [abrupt|gradual|stationary|--markdown]
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time

import numpy as np

from benchmarks.convergence import bn_chunks
from streammn.dtsl import DTSL
from streammn.planted import LogisticBN
from streammn.schema import Schema

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results", "drift.json")
N_VARS = 60
CHANGE = 1_000_000
TOTAL = 2_000_000
TRANSITION = 500_000  # gradual: rows over which B's share rises from 0 to 1
WINDOW = 10_000
HALF_LIFE = 100_000
STATIONARY_ROWS = 10_000_000
ARMS = {
    "none": {},
    "drift": {"drift": "page-hinkley"},
    "decay": {"half_life": HALF_LIFE},
    "drift+decay": {"drift": "page-hinkley", "half_life": HALF_LIFE},
}


def abrupt_stream(a: LogisticBN, b: LogisticBN):
    yield from bn_chunks(a, 5, CHANGE)
    yield from bn_chunks(b, 6, TOTAL - CHANGE)


def gradual_stream(a: LogisticBN, b: LogisticBN):
    """A, then a linear hand-over to B over TRANSITION rows, then B."""
    rng = np.random.default_rng(7)
    start = 0
    for block_a, block_b in zip(bn_chunks(a, 5, TOTAL), bn_chunks(b, 6, TOTAL)):
        idx = start + np.arange(block_a.shape[0])
        share = np.clip((idx - CHANGE) / TRANSITION, 0.0, 1.0)
        pick_b = rng.random(idx.size) < share
        yield np.where(pick_b[:, None], block_b, block_a)
        start += block_a.shape[0]


def windows(chunks):
    for block in chunks:
        for s in range(0, block.shape[0], WINDOW):
            yield block[s : s + WINDOW]


def prequential(chunks, skip: int = 0, **params) -> dict:
    """Score each window before learning it; the window PLLs, learning seconds, drift events.
    The first ``skip`` rows are not seen (the post-change-only reference)."""
    model = DTSL(Schema.binary(N_VARS), **params)
    seen, learn_s, pll = 0, 0.0, []
    for window in windows(chunks):
        seen += window.shape[0]
        if seen <= skip:
            continue
        pll.append(float(model.pll_terms(window).sum(axis=1).mean()))
        t = time.perf_counter()
        model.partial_fit(window)
        learn_s += time.perf_counter() - t
    summary = model.drift_summary()
    events = None if summary is None else model._drift.events.tolist()
    return {
        "pll": pll,
        "learn_seconds": learn_s,
        "rows_per_s": (seen - skip) / learn_s,
        "events": events,
    }


def recovery(arm: list[float], reference: list[float], offset: int) -> int | None:
    """Rows after the change until the arm's window PLL is within 2% of the reference's (the
    reference's windows start ``offset`` windows after the change) and stays there."""
    arm = np.asarray(arm[CHANGE // WINDOW + offset :])
    ref = np.asarray(reference)
    n = min(arm.size, ref.size)
    bad = np.flatnonzero((ref[:n] - arm[:n]) / np.abs(ref[:n]) > 0.02)
    if bad.size and bad[-1] == n - 1:
        return None
    last_bad = bad[-1] + 1 if bad.size else 0
    return int((offset + last_bad + 1) * WINDOW)


def section_changing(kind: str) -> dict:
    a, b = LogisticBN(N_VARS, seed=1), LogisticBN(N_VARS, seed=2)
    stream = abrupt_stream if kind == "abrupt" else gradual_stream
    settled = CHANGE if kind == "abrupt" else CHANGE + TRANSITION
    out = {"change_row": CHANGE, "settled_row": settled, "window": WINDOW, "arms": {}}
    print(f"{kind}: reference from row {settled:,}", file=sys.stderr, flush=True)
    out["reference"] = prequential(stream(a, b), skip=settled)
    offset = (settled - CHANGE) // WINDOW
    for name, params in ARMS.items():
        r = prequential(stream(a, b), **params)
        r["recovery_rows"] = recovery(r["pll"], out["reference"]["pll"], offset)
        tail = slice(-10, None)  # the last 100k rows
        r["final_pll"] = float(np.mean(r["pll"][tail]))
        r["final_gap_pct"] = (
            100.0
            * (np.mean(out["reference"]["pll"][tail]) - r["final_pll"])
            / abs(np.mean(out["reference"]["pll"][tail]))
        )
        if r["events"] is not None:
            ev = np.asarray(r["events"]).reshape(-1, 3)
            r["alarms_before_change"] = int(((ev[:, 2] == 0) & (ev[:, 0] <= CHANGE)).sum())
            r["alarms"] = int((ev[:, 2] == 0).sum())
            r["swaps"] = int((ev[:, 2] == 1).sum())
            r["first_alarm_row"] = int(ev[ev[:, 2] == 0, 0].min()) if r["alarms"] else None
        out["arms"][name] = r
        print(
            f"  {name}: recovery {r['recovery_rows']}, final gap {r['final_gap_pct']:.3f}%, "
            f"{r['rows_per_s']:,.0f} rows/s",
            file=sys.stderr,
            flush=True,
        )
    if kind == "abrupt":  # the generating networks' own PLL on fresh rows
        out["true_pll_after"] = b.pll(next(bn_chunks(b, 99, 20_000)))
        out["true_pll_before"] = a.pll(next(bn_chunks(a, 99, 20_000)))
    return out


def section_stationary() -> dict:
    """False alarms over STATIONARY_ROWS rows and throughput, adaptation on vs off, learning
    the same rows alternately (so machine load hits both alike)."""
    a = LogisticBN(N_VARS, seed=1)
    on = DTSL(Schema.binary(N_VARS), drift="page-hinkley")
    off = DTSL(Schema.binary(N_VARS), cpd="tree")  # what drift adaptation adapts: trees
    seconds = {"on": 0.0, "off": 0.0}
    steady = {"on": 0.0, "off": 0.0}  # after the first 1M rows (the exact rebuilds are over)
    seen = 0
    for block in bn_chunks(a, 5, STATIONARY_ROWS):
        for s in range(0, block.shape[0], 65_536):
            batch = block[s : s + 65_536]
            for name, model in (("on", on), ("off", off)):
                t = time.perf_counter()
                model.partial_fit(batch)
                dt = time.perf_counter() - t
                seconds[name] += dt
                if seen >= 1_000_000:
                    steady[name] += dt
            seen += batch.shape[0]
        print(
            f"  {seen:,} rows: {on.drift_summary()['alarms']} alarms", file=sys.stderr, flush=True
        )
    summary = on.drift_summary()
    return {
        "rows": seen,
        "alarms": summary["alarms"],
        "swaps": summary["swaps"],
        "alarms_per_10M_rows": summary["alarms"] * 1e7 / seen,
        "rows_per_s_on": seen / seconds["on"],
        "rows_per_s_off": seen / seconds["off"],
        "steady_rows_per_s_on": (seen - 1_000_000) / steady["on"],
        "steady_rows_per_s_off": (seen - 1_000_000) / steady["off"],
    }


SECTIONS = {
    "abrupt": lambda: section_changing("abrupt"),
    "gradual": lambda: section_changing("gradual"),
    "stationary": section_stationary,
}


def fmt(x, spec=",.0f"):
    return "—" if x is None else format(x, spec)


def markdown(r: dict) -> str:
    lines = [
        "# Drift: one-pass DTSL on streams that change",
        "",
        f"Machine: {r.get('machine', '?')}. Planted logistic BNs with {N_VARS} variables "
        "(`benchmarks.convergence.bn_chunks`). Prequential PLL: each window of "
        f"{WINDOW:,} rows scored before it is learned. Reference: a model at the defaults "
        "trained only on the post-change rows. Recovery: rows after the change until the "
        "window PLL is within 2% of the reference's and stays there. Arms: `none` "
        "(defaults), `drift` (`drift='page-hinkley'`), `decay` (`half_life="
        f"{HALF_LIFE:,}`), both. {r.get('load_note', '')}",
        "",
    ]
    for kind in ("abrupt", "gradual"):
        if kind not in r:
            continue
        s = r[kind]
        ref = s["reference"]
        lines += [
            f"## {kind.capitalize()} change at row {s['change_row']:,}"
            + ("" if kind == "abrupt" else f" (B's share rising to 1 by row {s['settled_row']:,})"),
            "",
            "| arm | recovery (rows after change) | PLL last 100k rows | gap to reference % "
            "| alarms (before change) | swaps | first alarm row | learn rows/s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, a in s["arms"].items():
            lines.append(
                f"| {name} | {fmt(a['recovery_rows'])} | {a['final_pll']:.4f} | "
                f"{a['final_gap_pct']:.3f} | "
                + (
                    f"{a['alarms']} ({a['alarms_before_change']})"
                    if a["events"] is not None
                    else "—"
                )
                + f" | {fmt(a.get('swaps'))} | {fmt(a.get('first_alarm_row'))} | "
                f"{a['rows_per_s']:,.0f} |"
            )
        lines.append(
            f"| reference (post-change only) | — | "
            f"{np.mean(ref['pll'][-10:]):.4f} | 0 | — | — | — | "
            f"{ref['rows_per_s']:,.0f} |"
        )
        if "true_pll_after" in s:
            lines.append(
                f"\nTrue PLL of the generating network: before {s['true_pll_before']:.4f}, "
                f"after {s['true_pll_after']:.4f} (20k fresh rows)."
            )
        lines.append("")
    if "stationary" in r:
        s = r["stationary"]
        over = 100.0 * (s["steady_rows_per_s_off"] / s["steady_rows_per_s_on"] - 1.0)
        lines += [
            "## Stationary stream",
            "",
            f"{s['rows']:,} rows of network A at the defaults with `drift='page-hinkley'`: "
            f"**{s['alarms']} alarms** ({s['alarms_per_10M_rows']:.2f} per 10M rows), "
            f"{s['swaps']} swaps.",
            "",
            "| | adaptation off | adaptation on | time overhead |",
            "|---|---|---|---|",
            f"| rows/s, whole stream | {s['rows_per_s_off']:,.0f} | "
            f"{s['rows_per_s_on']:,.0f} | "
            f"{100.0 * (s['rows_per_s_off'] / s['rows_per_s_on'] - 1.0):.1f}% |",
            f"| rows/s, after the first 1M rows | {s['steady_rows_per_s_off']:,.0f} | "
            f"{s['steady_rows_per_s_on']:,.0f} | {over:.1f}% |",
            "",
        ]
    return "\n".join(lines)


def plot(r: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in ("abrupt", "gradual") if k in r]
    if not kinds:
        return
    fig, axes = plt.subplots(1, len(kinds), figsize=(7 * len(kinds), 4), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        s = r[kind]
        for name, a in s["arms"].items():
            x = (np.arange(len(a["pll"])) + 1) * WINDOW / 1e6
            ax.plot(x, a["pll"], label=name, lw=1)
        ref = s["reference"]["pll"]
        x = s["settled_row"] / 1e6 + (np.arange(len(ref)) + 1) * WINDOW / 1e6
        ax.plot(x, ref, label="post-change only", lw=1, color="k", ls="--")
        ax.set_title(f"{kind} change at {s['change_row'] / 1e6:g}M rows")
        ax.set_xlabel("rows (millions)")
        ax.set_ylabel(f"prequential PLL per row ({WINDOW // 1000}k-row windows)")
        lo = min(min(a["pll"][5:]) for a in s["arms"].values())
        ax.set_ylim(lo - 0.5, max(max(a["pll"]) for a in s["arms"].values()) + 0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS.replace(".json", ".png"), dpi=90)


def main(argv=None) -> dict:
    names = (argv if argv is not None else sys.argv[1:]) or list(SECTIONS)
    if names != ["--markdown"]:
        for name in names:
            print(f"section {name}", file=sys.stderr, flush=True)
            section = SECTIONS[name]()
            results = {}
            if os.path.exists(RESULTS):  # read just before writing: sections may run apart
                with open(RESULTS) as f:
                    results = json.load(f)
            results[name] = section
            results["machine"] = (
                f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}"
            )
            load = os.getloadavg()[0]
            results["load_note"] = (
                f"Last section ran at load average {load:.1f} on a machine "
                "shared with other jobs: rows/s are below a quiet "
                "machine's; on/off throughput is measured in one process "
                "on the same rows, alternating, so load hits both alike."
            )
            with open(RESULTS, "w") as f:
                json.dump(results, f)
    with open(RESULTS) as f:
        results = json.load(f)
    with open(RESULTS.replace(".json", ".md"), "w") as f:
        f.write(markdown(results))
    plot(results)
    return results


if __name__ == "__main__":
    main()
