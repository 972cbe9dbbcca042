"""CSGS benchmark: the CSGS paper's Section 4 on planted context-specific networks, and nltcs.

Synthetic part (paper Section 4.1-4.3). For n = 6..9 binary variables and several random weight
draws of the planted structure (:mod:`streammn.csgs.synthetic`: ``I(X_a, X_b | x_w = 1)`` for
all pairs, complete graph when ``x_w = 0``), datasets of increasing size are the first rows of
one exact sample per draw, split 70/30 into train and validation as in the paper. Compared, by
KL divergence to the true distribution (exact enumeration):

* ``csgs``: CSGS structure + pseudo-likelihood weights, on the whole dataset (the paper: the
  independence-based learners have no tuning parameter and use train + validation);
* ``gs``: the single-graph ablation, the same code with conditional tests and one shared graph
  (GSMN-like), same data and weights;
* ``dtsl``: streammn's exact DTSL + DN2MN, kappa chosen by validation PLL (learned on train);
* ``true``: the true features with pseudo-likelihood weights learned the same way as CSGS's.

Also CSGS's number of tests against the paper's bound ``m (n^2 + n k)`` (``m`` canonical
assignments, ``k`` the largest blanket). nltcs part: CSGS learned on the training set, test PLL,
structure and weight time (after a warm-up run loads the compiled kernels).

Writes ``benchmarks/results/csgs.json`` after every (n, draw) so an interrupted run keeps what it
finished (``--resume`` skips finished ones), then ``csgs.md``.

    NUMBA_NUM_THREADS=1 PYTHONPATH=. python benchmarks/csgs.py    # the full grid
    PYTHONPATH=. python benchmarks/csgs.py --draws 3 --sizes 100,1000,10000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numba
import numpy as np

from streammn.csgs import CSGS
from streammn.csgs.pll import fit_pattern_weights
from streammn.csgs.synthetic import context_specific_network, kl_divergence, sample_rows
from streammn.dn.conversion import dn2mn
from streammn.dtsl import DTSL
from streammn.network.model import MarkovNetwork
from streammn.schema import Schema
from streammn.stats import MarginalCounts

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (20, 50, 100, 500, 1000, 5000, 10000, 50000, 100000)
KAPPAS = (0.001, 0.01, 0.1, 1.0)
METHODS = ("csgs", "gs", "dtsl", "true")


def distinct(rows):
    patterns, counts = np.unique(rows, axis=0, return_counts=True)
    return np.ascontiguousarray(patterns), counts.astype(np.int64)


def run_dtsl(schema, train, valid):
    best = None
    for kappa in KAPPAS:
        dn = DTSL(schema, kappa=kappa, mode="exact", cpd="tree").fit(train).to_dependency_network()
        mn = dn2mn(dn, marginals=MarginalCounts(schema).update(train))
        score = mn.pll(valid) if valid.shape[0] else 0.0
        if best is None or score > best[0]:
            best = (score, kappa, mn)
    return best[2], {"kappa": best[1]}


def run_cell(true: MarkovNetwork, rows: np.ndarray) -> dict:
    schema = true.schema
    n_train = int(round(0.7 * rows.shape[0]))
    train, valid = rows[:n_train], rows[n_train:]
    out = {}
    for name, specific in (("csgs", True), ("gs", False)):
        t0 = time.process_time()
        learner = CSGS(schema, context_specific=specific).fit(rows)
        cm = learner.canonical_
        m, n, k = cm.contexts.shape[0], schema.n_vars, cm.max_degree
        out[name] = {
            "kl": kl_divergence(true, learner.model_),
            "features": learner.model_.n_features,
            "tests": cm.n_tests,
            "tests_computed": cm.n_tests_computed,
            "unreliable": cm.n_unreliable,
            "contexts": m,
            "max_degree": k,
            "bound": m * (n * n + n * k),
            "cpu_seconds": time.process_time() - t0,
        }
    t0 = time.process_time()
    patterns, counts = distinct(rows)
    fitted = fit_pattern_weights(true.with_weights(np.zeros(true.n_features)), patterns, counts)
    out["true"] = {
        "kl": kl_divergence(true, fitted),
        "features": true.n_features,
        "cpu_seconds": time.process_time() - t0,
    }
    t0 = time.process_time()
    mn, info = run_dtsl(schema, train, valid)
    out["dtsl"] = {
        "kl": kl_divergence(true, mn),
        "features": mn.n_features,
        "cpu_seconds": time.process_time() - t0,
        **info,
    }
    return out


def synthetic(ns, draws, sizes, results, save):
    for n in ns:
        for d in range(draws):
            key = f"{n}/{d}"
            if key in results["synthetic"]:
                continue
            true = context_specific_network(n, seed=1000 * n + d)
            sample = sample_rows(true, max(sizes), seed=1000 * n + d + 1)
            cells = {}
            for size in sizes:
                t0 = time.perf_counter()
                cells[str(size)] = run_cell(true, sample[:size])
                print(
                    f"n={n} draw={d} rows={size}: "
                    + "  ".join(f"{m} {cells[str(size)][m]['kl']:.4f}" for m in METHODS)
                    + f"  tests {cells[str(size)]['csgs']['tests']}"
                    + f"  ({time.perf_counter() - t0:.1f} s)",
                    flush=True,
                )
            results["synthetic"][key] = cells
            save()


def load(path):
    return np.ascontiguousarray(np.loadtxt(path, delimiter=",", dtype=np.uint8, ndmin=2))


def nltcs(data_dir):
    train = load(os.path.join(data_dir, "nltcs", "nltcs.train.data"))
    test = load(os.path.join(data_dir, "nltcs", "nltcs.test.data"))
    schema = Schema.binary(train.shape[1])
    CSGS(schema).fit(train[:500])  # warm-up: load the compiled kernels
    t0, c0 = time.perf_counter(), time.process_time()
    learner = CSGS(schema).fit(train)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    cm = learner.canonical_
    m, n, k = cm.contexts.shape[0], schema.n_vars, cm.max_degree
    return {
        "train_rows": int(train.shape[0]),
        "test_rows": int(test.shape[0]),
        "test_pll": learner.model_.pll(test),
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        **learner.timings_,
        "features": learner.model_.n_features,
        "tests": cm.n_tests,
        "tests_computed": cm.n_tests_computed,
        "unreliable": cm.n_unreliable,
        "contexts": m,
        "max_degree": k,
        "bound": m * (n * n + n * k),
        "weight_fit": learner.model_.fit_info,
    }


def summarise(results) -> dict:
    """Mean and standard deviation over draws of every figure, per (n, size, method)."""
    table = {}
    for key, cells in results["synthetic"].items():
        n = key.split("/")[0]
        for size, methods in cells.items():
            for method, figures in methods.items():
                for fig, value in figures.items():
                    if isinstance(value, (int, float)):
                        table.setdefault((n, size, method, fig), []).append(value)
    return {k: (float(np.mean(v)), float(np.std(v)), len(v)) for k, v in table.items()}


def markdown(results) -> str:
    s = summarise(results)
    meta = results["meta"]
    lines = [
        "# CSGS on planted context-specific networks (paper Section 4) and nltcs",
        "",
        f"Machine: {meta['machine']}, {meta['cpus']} cores shared with other jobs (a "
        f"loaded machine: times are indicative), {meta['numba_threads']} numba thread(s). "
        f"Grid: {meta['grid']}.",
        "",
        "KL divergence (nats) to the true distribution by exact enumeration, mean +- sd "
        "over weight draws. csgs: CSGS; gs: the single-graph Grow-Shrink ablation (same "
        "code, conditional tests, one graph); dtsl: exact DTSL + DN2MN, kappa on "
        "validation; true: the true features with PLL weights learned like CSGS's. "
        "tests: CSGS's independence tests; bound: m (n^2 + n k) with m canonical "
        "assignments and k the largest blanket; computed: the distinct tests evaluated on the "
        "counts (contexts that ask the same test share its verdict).",
        "",
    ]
    ns = sorted({k[0] for k in s}, key=int)
    sizes = sorted({k[1] for k in s}, key=int)
    for n in ns:
        lines += [
            f"## n = {n}",
            "",
            "| rows | csgs KL | gs KL | dtsl KL | true KL | csgs tests | computed | bound | "
            "unreliable | contexts | csgs features | draws |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for size in sizes:
            if (n, size, "csgs", "kl") not in s:
                continue
            kl = [s[(n, size, m, "kl")] for m in ("csgs", "gs", "dtsl", "true")]
            g = lambda fig: s[(n, size, "csgs", fig)][0]  # noqa: E731
            lines.append(
                f"| {int(size):,} | "
                + " | ".join(f"{a:.4f} +- {b:.4f}" for a, b, _ in kl)
                + f" | {g('tests'):,.0f} | {g('tests_computed'):,.0f}"
                f" | {g('bound'):,.0f} | {g('unreliable'):,.0f}"
                f" | {g('contexts'):,.0f} | {g('features'):,.0f} | {kl[0][2]} |"
            )
        lines.append("")
    lines += ["## Targets", ""]

    def kl(n, size, method):
        return s[(n, size, method, "kl")][0]

    for n in ns:
        big = [z for z in sizes if int(z) >= 1000 and (n, z, "csgs", "kl") in s]
        below = [z for z in big if s[(n, z, "csgs", "kl")][0] < s[(n, z, "gs", "kl")][0]]
        lines.append(
            f"- n={n}: CSGS KL below the single-graph ablation at >= 1,000 rows: "
            f"{len(below)}/{len(big)} sizes "
            f"({'met' if big and len(below) == len(big) else 'NOT met'}); "
            "gap to true-structure KL (csgs - true) by size: "
            + ", ".join(f"{int(z):,}: {kl(n, z, 'csgs') - kl(n, z, 'true'):.4f}" for z in big)
        )
        best = [
            z
            for z in big
            if s[(n, z, "csgs", "kl")][0]
            < min(s[(n, z, "gs", "kl")][0], s[(n, z, "dtsl", "kl")][0])
        ]
        lines.append(
            f"  - CSGS the closest learned model to the truth (below gs and dtsl) at "
            f"{len(best)}/{len(big)} sizes >= 1,000; KL ratio csgs / true: "
            + ", ".join(f"{int(z):,}: {kl(n, z, 'csgs') / kl(n, z, 'true'):.1f}" for z in big)
        )
        ratios = [
            s[(n, z, "csgs", "tests")][0] / s[(n, z, "csgs", "bound")][0]
            for z in sizes
            if (n, z, "csgs", "tests") in s
        ]
        lines.append(
            f"  - tests / m (n^2 + n k): {min(ratios):.2f} .. {max(ratios):.2f} "
            f"({'within' if max(ratios) <= 1 else 'ABOVE'} the bound at every size)"
        )
    lines += [
        "",
        "Notes: at n = 6 with many rows the ablation's complete graph turns every joint "
        "state into a feature, a saturated model with 63 free weights that is almost "
        "unbiased, while CSGS drops the weakest context-specific dependences; and in one "
        "draw (n = 6, draw 7) Algorithm 2's single grow pass tests a pair that is "
        "marginally independent but conditionally dependent before the blanket that "
        "reveals it, so both CSGS and the ablation miss that edge at every size (KL "
        "0.0129 at 100,000 rows); `CSGS(repeat_grow=True)`, which repeats the grow pass "
        "until it adds nothing, reaches 0.0005 there, with 17% more tests.",
    ]
    nl = results.get("nltcs")
    if nl:
        lines += [
            "",
            "## nltcs",
            "",
            f"CSGS on {nl['train_rows']:,} training rows: test PLL {nl['test_pll']:.4f} "
            f"({nl['test_rows']:,} rows); learn + weights {nl['wall_seconds']:.1f} s wall, "
            f"{nl['cpu_seconds']:.1f} s CPU (structure {nl['structure_seconds']:.1f} s, "
            f"features {nl['features_seconds']:.1f} s, weights "
            f"{nl['weights_seconds']:.1f} s); {nl['contexts']:,} canonical assignments, "
            f"{nl['tests']:,} tests ({nl['tests_computed']:,} computed, the rest shared "
            f"between contexts; {nl['unreliable']:,} unreliable; bound "
            f"{nl['bound']:,}), largest blanket {nl['max_degree']}, "
            f"{nl['features']:,} features.",
            "",
            f"- learn + weights <= 60 s: {'met' if nl['cpu_seconds'] <= 60 else 'NOT met'}"
            f" by CPU time on {meta['numba_threads']} thread(s) ({nl['cpu_seconds']:.1f} s; "
            f"{nl['wall_seconds']:.1f} s wall on the shared machine, which includes waiting "
            f"for a core)",
            "- for reference (REFERENCE.md): Libra DTSL+DN2MN test PLL -4.928; Libra PLL "
            "weights on DN features -5.04",
        ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ns", default="6,7,8,9")
    p.add_argument("--draws", type=int, default=10)
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    p.add_argument("--data", default="/work/shared/data")
    p.add_argument("--no-nltcs", action="store_true")
    p.add_argument("--resume", action="store_true", help="keep finished (n, draw) results")
    p.add_argument("--out", default=str(RESULTS / "csgs.json"))
    args = p.parse_args(argv)
    ns = [int(x) for x in args.ns.split(",")]
    sizes = [int(x) for x in args.sizes.split(",")]
    out = Path(args.out)
    results = {"synthetic": {}}
    if args.resume and out.exists():
        results = json.loads(out.read_text())
    results["meta"] = {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "numba_threads": numba.get_num_threads(),
        "grid": f"n in {ns}, {args.draws} weight draws, sizes {sizes}",
    }

    def save():
        out.write_text(json.dumps(results, indent=1))
        out.with_suffix(".md").write_text(markdown(results))

    if not args.no_nltcs and "nltcs" not in results:
        results["nltcs"] = nltcs(args.data)
        print("nltcs", json.dumps(results["nltcs"]), flush=True)
        save()
    synthetic(ns, args.draws, sizes, results, save)
    save()


if __name__ == "__main__":
    main()
