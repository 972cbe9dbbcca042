"""Edge grafting at its defaults on planted pairwise models (issue 16's suite).

Each case plants a Potts model (2 states: Ising) on a graph family (tree, grid, random sparse,
scale-free; :func:`streammn.grafting.planted_potts`) with couplings weak (0.2-0.5) or strong
(0.8-1.5), Gibbs-samples train rows and 2,000 test rows, and runs:

- EdgeGrafting at its defaults with each strategy asked for (exhaustive, first-hit,
  best-choice): recall and precision of the planted edges, test PLL (mean per row), CPU
  seconds of the process (the machine is shared, so wall time would measure the other jobs),
  and for best-choice the CPU seconds at which it first reaches 0.9 x the exhaustive run's
  recall;
- the independent baseline: L1-regularised logistic regression of every variable on the
  others' indicators (scikit-learn, liblinear), ``lambda = sqrt(log n / N)`` as in Ravikumar
  et al., combined by AND and by OR, each structure then given pseudo-likelihood weights (the
  same L2 as grafting, no L1) for its test PLL;
- two references for reading a test PLL gap: the planted (true) structure with the same PLL
  weights, and, for each grafted model, the mean and standard error of its per-row test PLL
  minus that of the better L1-LR model, paired over the test rows (the same rows score both,
  so the row-to-row spread cancels and gaps of a few thousandths of a nat can be tested).

Every case records the commit (and whether the tree was dirty) it ran at, so merged tables
say which rows are at which defaults.

Run: ``python benchmarks/grafting_planted.py`` (or parts with ``--cases`` in parallel
processes, then ``--merge``); results in
``benchmarks/results/grafting.{json,md}``. The case list is sized to what a shared, loaded
2-core machine runs in tens of minutes; larger cases are options (``--cases``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))

from streammn.grafting import EdgeGrafting, planted_potts  # noqa: E402
from streammn.grafting.mrf import PairwiseLayout, to_markov_network  # noqa: E402
from streammn.grafting.objective import GraftingObjective, minimise  # noqa: E402

# the same structure fitted by both gives the same PLL up to the optimisers' tolerances
PLL_TOLERANCE = 1e-3
COUPLINGS = {"strong": (0.8, 1.5), "weak": (0.2, 0.5)}
VARIANTS = {"z": True, "raw": False}  # strategy suffixes: EdgeGrafting's standardise
# family, n, states, coupling, train rows, methods (grafting strategies; "l1lr": the baseline)
DEFAULT_CASES = [
    ("tree", 30, 3, "strong", 20000, "exhaustive,first_hit,best_choice,l1lr"),
    ("grid", 30, 3, "strong", 20000, "exhaustive,best_choice,l1lr"),
    ("random", 30, 3, "strong", 20000, "best_choice,l1lr"),
    ("scale_free", 30, 3, "strong", 20000, "best_choice,l1lr"),
    ("tree", 50, 3, "strong", 20000, "best_choice,l1lr"),
    ("grid", 50, 3, "strong", 20000, "best_choice,l1lr"),
    ("random", 50, 3, "strong", 20000, "best_choice,l1lr"),
    ("scale_free", 50, 3, "strong", 20000, "best_choice,l1lr"),
    ("tree", 30, 2, "strong", 20000, "best_choice,l1lr"),
    ("scale_free", 50, 2, "strong", 20000, "best_choice,l1lr"),
    ("grid", 30, 5, "strong", 20000, "best_choice,l1lr"),
    ("random", 30, 3, "weak", 20000, "best_choice,l1lr"),
    ("grid", 30, 3, "strong", 2000, "best_choice,l1lr"),
    ("grid", 30, 3, "strong", 50000, "best_choice,l1lr"),
    ("random", 200, 3, "strong", 20000, "best_choice,exhaustive,l1lr"),
    ("tree", 200, 3, "strong", 20000, "best_choice"),
    ("grid", 200, 3, "strong", 20000, "best_choice"),
    ("scale_free", 200, 3, "strong", 20000, "best_choice"),
]


def parse_case(text: str):
    family, n, states, coupling, rows, strategies = text.split(":")
    return family, int(n), int(states), coupling, int(rows), strategies


def scores(edges: set, true: set) -> tuple[float, float]:
    tp = len(edges & true)
    return tp / len(true), tp / max(len(edges), 1)


def row_plls(network, test) -> np.ndarray:
    """Log pseudo-likelihood of each test row."""
    return network.pll_terms(test).sum(axis=1)


def paired_difference(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Mean of ``a - b`` over test rows and its standard error (paired: same rows)."""
    d = a - b
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))


def pll_weights(schema, edges, train, lambda2: float):
    """Pseudo-likelihood weights of a fixed structure (no group L1): the model's test PLL."""
    cards = np.asarray(schema.cardinalities, dtype=np.int64)
    layout = PairwiseLayout(cards, np.array(sorted(edges), dtype=np.int64).reshape(-1, 2))
    obj = GraftingObjective(layout, np.zeros(layout.size), 0.0, lambda2, kind="pseudo", rows=train)
    theta, _, _ = minimise(obj, np.zeros(layout.size), 200)
    return to_markov_network(schema, layout, theta)


def l1_logistic_neighbourhoods(train, cards) -> tuple[set, set, float]:
    """AND and OR structures of per-variable L1 logistic regressions; and the seconds taken."""
    import warnings

    from sklearn.linear_model import LogisticRegression

    warnings.filterwarnings("ignore", module="sklearn")  # penalty="l1" deprecation chatter
    started = time.process_time()
    n_rows, n = train.shape
    lam = math.sqrt(math.log(n) / n_rows)
    onehot = np.concatenate(
        [(train[:, [v]] == np.arange(cards[v])).astype(np.float64) for v in range(n)], axis=1
    )
    owner = np.repeat(np.arange(n), cards)
    chosen = np.zeros((n, n), dtype=bool)
    for v in range(n):
        keep = owner != v
        weight = np.zeros(int(keep.sum()))
        for c in range(1 if cards[v] == 2 else int(cards[v])):  # one-vs-rest per state
            model = LogisticRegression(
                penalty="l1", C=1.0 / (lam * n_rows), solver="liblinear", max_iter=200
            )
            model.fit(onehot[:, keep], train[:, v] == c)
            weight += np.abs(model.coef_[0])
        for u in np.unique(owner[keep][weight > 1e-8]).tolist():
            chosen[v, u] = True
    both, either = chosen & chosen.T, chosen | chosen.T
    iu, ju = np.triu_indices(n, 1)
    as_set = lambda m: {(int(i), int(j)) for i, j in zip(iu, ju) if m[i, j]}  # noqa: E731
    return as_set(both), as_set(either), time.process_time() - started


def baseline_runs(mrf, train, test) -> tuple[list[dict], dict]:
    """The L1-LR AND and OR structures with PLL weights: recall, precision, test PLL; and the
    per-row test PLLs of each."""
    both, either, secs = l1_logistic_neighbourhoods(train, np.asarray(mrf.schema.cardinalities))
    runs, per_row = [], {}
    for name, edges in (("L1-LR AND", both), ("L1-LR OR", either)):
        recall, precision = scores(edges, mrf.edges)
        per_row[name] = row_plls(pll_weights(mrf.schema, edges, train, 0.001), test)
        pll = float(per_row[name].mean())
        runs.append(
            {
                "strategy": name,
                "seconds": secs,
                "edges": len(edges),
                "recall": recall,
                "precision": precision,
                "test_pll": pll,
            }
        )
        print(
            f"  {name}: recall {recall:.3f} precision {precision:.3f} test PLL {pll:.3f}",
            flush=True,
        )
    return runs, per_row


def run_grafting(mrf, train, test, strategy: str) -> dict:
    true = mrf.edges
    curve, clock = [], {"eval": 0.0}

    def record(learner):
        now = time.process_time()
        recall, precision = scores(set(learner.edges), true)
        curve.append(
            {
                "seconds": now - clock["start"] - clock["eval"],
                "edges": len(learner.edges),
                "recall": recall,
            }
        )
        clock["eval"] += time.process_time() - now

    base, _, variant = strategy.partition("+")  # "+z": standardised test only, "+raw": raw
    learner = EdgeGrafting(
        mrf.schema, strategy=base, **({"standardise": VARIANTS[variant]} if variant else {})
    )
    clock["start"] = time.process_time()
    learner.fit(train, callback=record)
    seconds = time.process_time() - clock["start"] - clock["eval"]
    recall, precision = scores(set(learner.edges), true)
    per_row = row_plls(learner.to_markov_network(), test)
    return {
        "strategy": strategy,
        "seconds": seconds,
        "edges": len(learner.edges),
        "recall": recall,
        "precision": precision,
        "lambda": learner.strength,
        "test_pll": float(per_row.mean()),
        "missed_edges": sorted(mrf.edges - set(learner.edges)),
        "false_edges": sorted(set(learner.edges) - mrf.edges),
        "fraction_pairs_scored": learner.fraction_pairs_counted,
        "curve": curve,
    }, per_row


def time_to_recall(run: dict, target: float) -> float | None:
    for p in run["curve"]:
        if p["recall"] >= target:
            return p["seconds"]
    return None


def commit() -> str:
    """The commit the code ran at, marked ``+dirty`` when the tree had uncommitted changes."""

    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, check=False, text=True
        ).stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "streammn", "benchmarks")
    return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")


CODE_COMMIT = commit()  # at import: the code this process runs, whatever HEAD does later


def machine() -> str:
    return (
        f"{platform.platform()}, {os.cpu_count()} cores (shared), "
        f"Python {platform.python_version()}"
    )


def case_data(case, seed: int):
    """The planted model of a case, its train rows and 2,000 test rows."""
    family, n, states, coupling, rows, _ = case
    mrf = planted_potts(family, n, states=states, coupling=COUPLINGS[coupling], seed=seed)
    data = mrf.sample(rows + 2000, seed=seed + 1, burn_in=200, thin=2, chains=8)
    perm = np.random.default_rng(seed).permutation(data.shape[0])
    return mrf, data[perm[:rows]], data[perm[rows:]]


def run_case(case, seed: int, save=lambda case: None) -> dict:
    """One case's runs; ``save(partial case)`` after each, so a long case's finished runs
    survive an interrupt."""
    family, n, states, coupling, rows, strategies = case
    mrf, train, test = case_data(case, seed)
    out = {
        "family": family,
        "n": n,
        "states": states,
        "coupling": coupling,
        "rows": rows,
        "commit": CODE_COMMIT,
        "clock": "cpu",
        "true_edges": len(mrf.edges),
        "true_model_test_pll": float(mrf.to_markov_network().pll(test)),
        "true_structure_test_pll": float(
            pll_weights(mrf.schema, mrf.edges, train, 0.001).pll(test)
        ),
        "runs": [],
    }
    methods = strategies.split(",")
    grafted = {}
    for strategy in [m for m in methods if m != "l1lr"]:
        run, grafted[strategy] = run_grafting(mrf, train, test, strategy)
        out["runs"].append(run)
        save(out)
        print(
            f"{family} n={n} k={states} {coupling} N={rows} {strategy}: recall "
            f"{run['recall']:.3f} precision {run['precision']:.3f} test PLL "
            f"{run['test_pll']:.3f} {run['seconds']:.1f} CPU s",
            flush=True,
        )
    if "l1lr" in methods:
        baselines, per_row = baseline_runs(mrf, train, test)
        out["runs"] += baselines
        best = max(baselines, key=lambda r: r["test_pll"])["strategy"]
        for run in out["runs"][: len(grafted)]:
            run["pll_diff_vs_best_l1lr"], run["pll_diff_se"] = paired_difference(
                grafted[run["strategy"]], per_row[best]
            )
    runs = {r["strategy"]: r for r in out["runs"]}
    if "exhaustive" in runs and "best_choice" in runs:
        goal = 0.9 * runs["exhaustive"]["recall"]
        out["best_choice_seconds_to_0.9_exhaustive_recall"] = time_to_recall(
            runs["best_choice"], goal
        )
        out["exhaustive_seconds"] = runs["exhaustive"]["seconds"]
    return out


def case_key(case: dict) -> tuple:
    return tuple(case[k] for k in ("family", "n", "states", "coupling", "rows"))


def gap(run: dict) -> str:
    """'diff +- SE' of a grafted run against the better L1-LR model, '' when not measured."""
    if "pll_diff_se" not in run:
        return ""
    return f"{run['pll_diff_vs_best_l1lr']:+.4f} ± {run['pll_diff_se']:.4f}"


def markdown(results: dict) -> str:
    lines = [
        "# Edge grafting at its defaults on planted Potts models",
        "",
        f"Machine: {results['machine']} -- a shared machine under load from other jobs: "
        "wall seconds are inflated and only comparable within one case, CPU seconds "
        "less so (caches are shared too).",
        "",
        *([results["notes"], ""] if results.get("notes") else []),
        "Defaults: pseudo-likelihood objective, scores at the active set's unpenalised "
        "weights, lambda = 2 sqrt(log n / N) / mean(card)^2, best-choice with local "
        "climbing; since s9 (commit after 48ba731) C2 passes a pair when its raw score "
        "exceeds lambda or its standardised z exceeds 1.5 sqrt(2 log M) (standardise="
        "'either'), before it was the raw test only. Test PLL: mean log "
        "pseudo-likelihood per test row (higher is better; 'met' allows "
        f"{PLL_TOLERANCE:g} for optimiser tolerance). L1-LR: per-variable "
        "L1 logistic regression at lambda = sqrt(log n / N), AND / OR, then PLL weights.",
        "'vs L1-LR': the grafted model's test PLL minus the better L1-LR model's, "
        "mean ± standard error over test rows (paired). 'true structure': the planted "
        "edges with the same PLL weights. 'seconds': CPU seconds of the process where "
        "the clock is 'cpu', wall seconds otherwise (older rows). 'commit': the code "
        "a row ran (a run's own when it differs from its case's).",
        "",
        "| family | n | states | couplings | rows | true edges | method | edges | "
        "recall | precision | test PLL | vs L1-LR | true structure | seconds | clock | "
        "commit |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in results["cases"]:
        truth = c.get("true_structure_test_pll")
        for r in c["runs"]:
            lines.append(
                f"| {c['family']} | {c['n']} | {c['states']} | {c['coupling']} | "
                f"{c['rows']} | {c['true_edges']} | {r['strategy']} | {r['edges']} | "
                f"{r['recall']:.3f} | {r['precision']:.3f} | {r['test_pll']:.3f} | "
                f"{gap(r)} | {'' if truth is None else f'{truth:.3f}'} | "
                f"{r['seconds']:.1f} | {r.get('clock', c.get('clock', 'wall'))} | "
                f"{r.get('commit', c.get('commit', '?'))} |"
            )
    lines += ["", "## Targets", ""]
    for c in results["cases"]:
        runs = {r["strategy"]: r for r in c["runs"]}
        for label in ("best_choice", "best_choice+z"):
            if label in runs:
                lines += target_lines(c, runs, label)
    return "\n".join(lines) + "\n"


def target_lines(c: dict, runs: dict, label: str) -> list[str]:
    """The issue's targets for one grafted run of a case ('+z': the standardised test only)."""
    lines, bc = [], runs[label]
    name = f"{c['family']} n={c['n']} k={c['states']} {c['coupling']} N={c['rows']}" + (
        " standardised test only (opt-in)" if label.endswith("+z") else ""
    )
    if c["coupling"] == "strong" and c["rows"] == 20000:
        need = (0.95, 0.9) if c["n"] <= 50 else (0.9, 0.0)
        ok = bc["recall"] >= need[0] and bc["precision"] >= need[1]
        lines.append(
            f"- {name}: best-choice recall {bc['recall']:.3f} (>= {need[0]}), "
            f"precision {bc['precision']:.3f} (>= {need[1]}): "
            f"{'met' if ok else 'NOT met'}"
        )
    if "L1-LR AND" in runs:
        best_lr = max(runs["L1-LR AND"]["test_pll"], runs["L1-LR OR"]["test_pll"])
        verdict = "met" if bc["test_pll"] >= best_lr - PLL_TOLERANCE else "NOT met"
        if "pll_diff_se" in bc and verdict != "met":
            z = bc["pll_diff_vs_best_l1lr"] / max(bc["pll_diff_se"], 1e-12)
            verdict += f" (gap {z:+.1f} SE: {'significant' if abs(z) >= 2 else 'not significant'})"
        lines.append(
            f"- {name}: test PLL {bc['test_pll']:.3f} vs best L1-LR {best_lr:.3f}: {verdict}"
        )
    t = c.get("best_choice_seconds_to_0.9_exhaustive_recall")
    if "exhaustive_seconds" in c and label == "best_choice":
        ex = c["exhaustive_seconds"]
        lines.append(
            f"- {name}: best-choice reaches 0.9 x exhaustive recall at "
            f"{'never' if t is None else f'{t:.1f} s'}, exhaustive takes "
            f"{ex:.1f} s ({c.get('clock', 'wall')}; ratio "
            f"{'-' if t is None else f'1/{ex / max(t, 1e-9):.1f}'})"
        )
    return lines


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--cases",
        nargs="+",
        type=parse_case,
        default=None,
        help="family:n:states:strong|weak:rows:strategy[,strategy] (default: the "
        "list in DEFAULT_CASES); a strategy 'X+z' runs X with the standardised "
        "test only (EdgeGrafting standardise=True), 'X+raw' with the raw test "
        "only (standardise=False), 'l1lr' the baseline",
    )
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--out", default=str(RESULTS / "grafting.json"))
    p.add_argument(
        "--merge",
        nargs="+",
        help="combine the cases of these result files (runs "
        "split over several processes) into --out; a "
        "case in a later file replaces the same case "
        "(family, n, states, couplings, rows) in an "
        "earlier one, in place",
    )
    p.add_argument("--notes", default="", help="a line for the table's header (what was run)")
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.merge:
        parts = [json.loads(Path(f).read_text()) for f in args.merge]
        merged = {}
        for case in (c for part in parts for c in part["cases"]):
            merged[case_key(case)] = case  # dicts keep first-insertion order
        results = {**parts[0], "cases": list(merged.values())}
        if args.notes:
            results["notes"] = args.notes
        out.write_text(json.dumps(results, indent=1))
        out.with_suffix(".md").write_text(markdown(results))
        return
    cases = args.cases or DEFAULT_CASES
    results = {"machine": machine(), "seed": args.seed, "cases": []}
    done = []

    def save(partial=None):
        results["cases"] = done + ([partial] if partial else [])
        out.write_text(json.dumps(results, indent=1))  # partial results survive an interrupt
        out.with_suffix(".md").write_text(markdown(results))

    for case in cases:
        done.append(run_case(case, args.seed, save))
        save()
    print(markdown(results))


if __name__ == "__main__":
    main()
