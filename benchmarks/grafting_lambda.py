"""Evidence for edge grafting's default lambda: where the planted edges and the noise score.

Grafting at strength ``lambda`` recovers a planted graph when (i) every true edge, while it is
still inactive and the rest of the true graph is active, scores above ``lambda`` (else it is
never added: a recall loss), and (ii) once the true graph is active, every other pair scores
below ``lambda`` (else false edges get in: a precision loss). Both are measured directly on
each planted case of ``benchmarks/grafting_planted.py``, at a reference strength ``lambda_ref``
(the weights are the penalised optimum at that strength, as in a grafting run):

- ``noise``: the largest pseudo-likelihood activation score of a non-edge with the true graph
  active;
- ``signal``: the smallest score of a true edge with the true graph minus that edge active
  (probed for the ``--signal-sample`` true edges that score lowest with their table zeroed
  in the full optimum; the weights warm-started from the full graph's optimum).

In units of ``u = sqrt(log n / N) / k^p`` (the data-scaled default with exponent ``p`` on the
number of states ``k``), a constant ``c`` works for the case when ``noise / u < c < signal /
u``; the table gives both bounds for ``p = 2`` and ``p = 3``, so one constant for all cases
exists when the largest lower bound is below the smallest upper bound.

Run: ``python benchmarks/grafting_lambda.py [--cases ...]``; results
``benchmarks/results/grafting_lambda.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))

from benchmarks.grafting_planted import case_data, machine, parse_case  # noqa: E402
from streammn.grafting.mrf import PairwiseLayout  # noqa: E402
from streammn.grafting.objective import GraftingObjective, minimise  # noqa: E402
from streammn.grafting.pseudo_score import PseudoScorer  # noqa: E402

LAMBDA2 = 0.001
MAX_ITER = 100
REFIT_ITER = 30  # warm-started from the full graph's optimum
# family, n, states, coupling, train rows (the strategies field of the planted suite is unused)
DEFAULT_CASES = [
    "tree:30:3:strong:20000:-",
    "grid:30:3:strong:20000:-",
    "random:30:3:strong:20000:-",
    "scale_free:30:3:strong:20000:-",
    "tree:50:3:strong:20000:-",
    "grid:50:3:strong:20000:-",
    "random:50:3:strong:20000:-",
    "scale_free:50:3:strong:20000:-",
    "tree:30:2:strong:20000:-",
    "grid:30:2:strong:20000:-",
    "scale_free:50:2:strong:20000:-",
    "grid:30:5:strong:20000:-",
    "random:30:5:strong:20000:-",
    "random:30:4:strong:20000:-",
    "grid:30:3:strong:2000:-",
    "scale_free:50:3:strong:2000:-",
    "grid:30:3:strong:50000:-",
    "scale_free:50:3:strong:50000:-",
    "random:30:3:weak:20000:-",
    "random:200:3:strong:20000:-",
]


def penalised_fit(cards, edges, rows, lambda_: float, theta0=None, max_iter: int = MAX_ITER):
    layout = PairwiseLayout(cards, np.array(sorted(edges), dtype=np.int64).reshape(-1, 2))
    obj = GraftingObjective(
        layout, np.zeros(layout.size), lambda_, LAMBDA2, kind="pseudo", rows=rows
    )
    start = np.zeros(layout.size) if theta0 is None else theta0
    theta, _, _ = minimise(obj, start, max_iter)
    return layout, theta


def zero_edge(layout: PairwiseLayout, theta, k: int) -> np.ndarray:
    out = theta.copy()
    out[layout.eoff[k] : layout.eoff[k + 1]] = 0.0
    return out


def without_edge(layout: PairwiseLayout, theta, k: int) -> np.ndarray:
    """``theta`` with edge ``k``'s table removed (a warm start for the graph without it)."""
    return np.concatenate([theta[: layout.eoff[k]], theta[layout.eoff[k + 1] :]])


def run_case(case, seed: int, signal_sample: int, ref_c: float, ref_p: float) -> dict:
    family, n, k, coupling, n_rows, _ = case
    started = time.perf_counter()
    mrf, rows, _ = case_data(case, seed)
    cards = np.asarray(mrf.schema.cardinalities, dtype=np.int64)
    unit = {p: math.sqrt(math.log(n) / n_rows) / k**p for p in (2, 3)}
    lambda_ref = ref_c * math.sqrt(math.log(n) / n_rows) / k**ref_p
    true = sorted(mrf.edges)
    layout, theta = penalised_fit(cards, true, rows, lambda_ref)
    scorer = PseudoScorer(layout, theta, rows)
    iu, ju = np.triu_indices(n, 1)
    non_edges = np.array(
        [(i, j) for i, j in zip(iu.tolist(), ju.tolist()) if (i, j) not in mrf.edges],
        dtype=np.int64,
    )
    noise = scorer.scores(non_edges)
    zeroed = np.array(
        [
            PseudoScorer(layout, zero_edge(layout, theta, t), rows).scores(np.array([e]))[0]
            for t, e in enumerate(true)
        ]
    )
    probe = [true[t] for t in sorted(np.argsort(zeroed)[:signal_sample].tolist())]
    signal = []
    for e in probe:
        rest = [f for f in true if f != e]
        lay, th = penalised_fit(
            cards, rest, rows, lambda_ref, without_edge(layout, theta, true.index(e)), REFIT_ITER
        )
        signal.append(float(PseudoScorer(lay, th, rows).scores(np.array([e]))[0]))
    out = {
        "family": family,
        "n": n,
        "states": k,
        "coupling": coupling,
        "rows": n_rows,
        "true_edges": len(true),
        "signal_probed": len(probe),
        "lambda_ref": lambda_ref,
        "noise_max": float(noise.max()),
        "noise_q99": float(np.quantile(noise, 0.99)),
        "signal_min": float(min(signal)),
        "signal_q05": float(np.quantile(signal, 0.05)),
        "seconds": time.perf_counter() - started,
    }
    for p, u in unit.items():
        out[f"c_low_p{p}"] = out["noise_max"] / u
        out[f"c_high_p{p}"] = out["signal_min"] / u
    print(
        f"{family} n={n} k={k} {coupling} N={n_rows}: c in ({out['c_low_p3']:.2f}, "
        f"{out['c_high_p3']:.2f}) for k^3, ({out['c_low_p2']:.2f}, {out['c_high_p2']:.2f}) "
        f"for k^2 [{out['seconds']:.0f} s]",
        flush=True,
    )
    return out


def markdown(results: dict) -> str:
    cases = results["cases"]
    lines = [
        "# Default lambda for edge grafting: noise and signal on planted models",
        "",
        f"Machine: {results['machine']}. Reference strength for the weights: lambda_ref = "
        f"{results['ref_c']:g} sqrt(log n / N) / k^{results['ref_p']:g}. A constant c works"
        " for a case when c_low < c < c_high (see the module docstring of "
        "benchmarks/grafting_lambda.py).",
        "",
        *([results["notes"], ""] if results.get("notes") else []),
        "| family | n | k | couplings | rows | true edges | (probed) | noise max / lambda_ref"
        " | signal min / lambda_ref | c_low k^3 | c_high k^3 | c_low k^2 | c_high k^2 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        lam = c["lambda_ref"] or float("nan")  # lambda_ref = 0: unpenalised weights
        lines.append(
            f"| {c['family']} | {c['n']} | {c['states']} | {c['coupling']} | "
            f"{c['rows']} | {c['true_edges']} | {c['signal_probed']} | "
            f"{c['noise_max'] / lam:.2f} | {c['signal_min'] / lam:.2f} | "
            f"{c['c_low_p3']:.2f} | {c['c_high_p3']:.2f} | {c['c_low_p2']:.2f} | "
            f"{c['c_high_p2']:.2f} |"
        )
    lines.append("")
    strong = [c for c in cases if c["coupling"] == "strong"]
    groups = {
        "strong couplings": strong,
        "strong couplings, scale-free left out": [c for c in strong if c["family"] != "scale_free"],
    }
    for p in (2, 3):
        for name, group in groups.items():
            low = [c[f"c_low_p{p}"] for c in group]
            hi = min(c[f"c_high_p{p}"] for c in group)
            lines.append(
                f"- k^{p}, {name}: c_low from {min(low):.2f} to {max(low):.2f} "
                f"(spread x{max(low) / min(low):.2f}), smallest c_high {hi:.2f}: "
                f"{'one c fits every case' if max(low) < hi else 'no single c'}"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--cases", nargs="+", type=parse_case, default=[parse_case(c) for c in DEFAULT_CASES]
    )
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--signal-sample", type=int, default=15)
    p.add_argument("--ref-c", type=float, default=6.0)
    p.add_argument("--ref-p", type=float, default=3.0)
    p.add_argument("--out", default=str(RESULTS / "grafting_lambda.json"))
    p.add_argument("--merge", nargs="+", help="combine these result files into --out")
    p.add_argument("--notes", default="")
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.merge:
        parts = [json.loads(Path(f).read_text()) for f in args.merge]
        results = {**parts[0], "cases": [c for part in parts for c in part["cases"]]}
    else:
        results = {
            "machine": machine(),
            "seed": args.seed,
            "ref_c": args.ref_c,
            "ref_p": args.ref_p,
            "cases": [],
        }
        for case in args.cases:
            results["cases"].append(
                run_case(case, args.seed, args.signal_sample, args.ref_c, args.ref_p)
            )
            out.write_text(json.dumps(results, indent=1))
    if args.notes:
        results["notes"] = args.notes
    out.write_text(json.dumps(results, indent=1))
    out.with_suffix(".md").write_text(markdown(results))


if __name__ == "__main__":
    main()
