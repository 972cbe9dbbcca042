"""Best-choice edge grafting on the paper's synthetic study (grafting paper, Section 4.2).

For each problem size n: a scale-free pairwise MRF (preferential attachment, 5 states, Appendix C
parameters), ``--rows`` training and ``--test-rows`` test rows by Gibbs sampling, then edge
grafting with the strategies exhaustive, first-hit and best-choice (alpha 0, 0.5, 1), each in a
fresh subprocess (so peak RSS is its own), with max 3n edges. Per strategy: a curve sampled at
activation steps (seconds of learning, edges, recall and precision of the true edges, objective,
test negative log pseudo-likelihood at every ``--eval-every``-th step, fraction of pairs counted)
and the final figures. Test-set evaluation is excluded from the clock; numba compilation is done
on a tiny warm-up fit before the clock starts.

Results: ``benchmarks/results/grafting_paper.json``, ``grafting_paper.md`` (tables + targets)
and ``grafting_paper.png`` (recall vs time). Run: ``python benchmarks/grafting.py [--sizes 50
200]``. The planted-model suite of issue 16 (graph families, Ising/Potts, the L1 logistic
baseline) is ``benchmarks/grafting_planted.py``, results ``benchmarks/results/grafting.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))

from streammn.grafting import EdgeGrafting, scale_free_mrf  # noqa: E402

CONFIGS = [
    ("exhaustive", 0.0),
    ("first_hit", 0.0),
    ("best_choice", 0.0),
    ("best_choice", 0.5),
    ("best_choice", 1.0),
]
REFERENCE_N50 = {"exhaustive": (29.0, 43.0, 0.74), "best_choice": (10.0, 14.0, 0.47)}


def label(strategy: str, alpha: float) -> str:
    return f"best_choice(alpha={alpha:g})" if strategy == "best_choice" else strategy


def worker(args) -> None:
    """One strategy on saved data; prints its result as JSON."""
    data = np.load(args.data)
    train, test, true = data["train"], data["test"], {tuple(e) for e in data["edges"].tolist()}
    n = train.shape[1]
    from streammn.schema import Schema

    schema = Schema.from_cardinalities([int(args.states)] * n)
    params = dict(
        lambda_=args.lambda_,
        lambda2=args.lambda2,
        strategy=args.strategy,
        threshold=args.alpha,
        seed=args.seed,
    )
    EdgeGrafting(schema, **{**params, "max_edges": 2}).fit(train[:50])  # compile, untimed
    curve, clock = [], {"eval": 0.0}

    def record(learner):
        now = time.perf_counter()
        edges = set(learner.edges)
        tp = len(edges & true)
        point = {
            "seconds": now - clock["start"] - clock["eval"],
            "edges": len(edges),
            "recall": tp / len(true),
            "precision": tp / max(len(edges), 1),
            "objective": learner.objective_value,
            "fraction_pairs_counted": learner.fraction_pairs_counted,
        }
        if learner.steps % args.eval_every == 0:
            point["test_nlpl"] = -learner.to_markov_network().pll(test)
        curve.append(point)
        clock["eval"] += time.perf_counter() - now

    learner = EdgeGrafting(schema, **params)
    clock["start"] = time.perf_counter()
    learner.fit(train, callback=record)
    seconds = time.perf_counter() - clock["start"] - clock["eval"]
    edges = set(learner.edges)
    tp = len(edges & true)
    result = {
        "strategy": args.strategy,
        "alpha": args.alpha,
        "seconds": seconds,
        "steps": learner.steps,
        "edges": len(edges),
        "recall": tp / len(true),
        "precision": tp / max(len(edges), 1),
        "test_nlpl": -learner.to_markov_network().pll(test),
        "objective": learner.objective_value,
        "fraction_pairs_counted": learner.fraction_pairs_counted,
        "stopped": "max_edges" if len(edges) >= learner.edge_limit else "no edge passes",
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "curve": curve,
    }
    print(json.dumps(result))


def run_size(n: int, args, tmp: Path, configs) -> dict:
    started = time.perf_counter()
    mrf = scale_free_mrf(n, states=args.states, seed=args.seed)
    rows = mrf.sample(
        args.rows + args.test_rows,
        seed=args.seed + 1,
        burn_in=args.burn_in,
        thin=args.thin,
        chains=args.chains,
    )
    perm = np.random.default_rng(args.seed).permutation(rows.shape[0])
    train, test = rows[perm[: args.rows]], rows[perm[args.rows :]]
    gen_seconds = time.perf_counter() - started
    path = tmp / f"n{n}.npz"
    np.savez(path, train=train, test=test, edges=mrf.layout.edges)
    true_nlpl = -mrf.to_markov_network().pll(test)
    runs = []
    for strategy, alpha in configs:
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            "--data",
            str(path),
            "--states",
            str(args.states),
            "--strategy",
            strategy,
            "--threshold",
            str(alpha),
            "--lambda",
            str(args.lambda_),
            "--lambda2",
            str(args.lambda2),
            "--seed",
            str(args.seed),
            "--eval-every",
            str(args.eval_every),
        ]
        out = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        res = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"n={n} {label(strategy, alpha)}: {res['seconds']:.2f} s, recall "
            f"{res['recall']:.3f}, precision {res['precision']:.3f}, test NLPL "
            f"{res['test_nlpl']:.3f}, pairs counted {res['fraction_pairs_counted']:.3f}",
            flush=True,
        )
        runs.append(res)
    return {
        "n": n,
        "states": args.states,
        "train_rows": args.rows,
        "test_rows": args.test_rows,
        "true_edges": int(mrf.layout.n_edges),
        "true_model_test_nlpl": true_nlpl,
        "generation_seconds": gen_seconds,
        "runs": runs,
    }


def chosen_configs(spec, k: int) -> list[tuple[str, float]]:
    """The configurations for the ``k``-th size: ``spec`` split at '/' (the last group repeats),
    each ``strategy[:alpha]``; None: all of CONFIGS."""
    if not spec:
        return CONFIGS
    groups = " ".join(spec).split("/")
    out = []
    for item in groups[min(k, len(groups) - 1)].split():
        strategy, _, alpha = item.partition(":")
        out.append((strategy, float(alpha or 0.5)))
    return out


def time_to_recall(run: dict, target: float) -> float | None:
    for p in run["curve"]:
        if p["recall"] >= target:
            return p["seconds"]
    return None


def targets(study: dict) -> list[str]:
    lines = []
    runs = {label(r["strategy"], r["alpha"]): r for r in study["runs"]}
    ex = runs["exhaustive"]
    goal = 0.9 * ex["recall"]
    for name, r in runs.items():
        if not name.startswith("best_choice"):
            continue
        t = time_to_recall(r, goal)
        ok = t is not None and t <= ex["seconds"] / 5
        lines.append(
            f"- n={study['n']} {name}: reaches 0.9 x exhaustive recall "
            f"({goal:.3f}) at {'never' if t is None else f'{t:.2f} s'}; "
            f"exhaustive total {ex['seconds']:.2f} s (1/5 = {ex['seconds'] / 5:.2f} s)"
            f": {'met' if ok else 'NOT met'}"
        )
    if study["n"] == 50:
        for name, r in runs.items():
            ref = REFERENCE_N50["exhaustive" if name == "exhaustive" else "best_choice"]
            ok = r["seconds"] * 10 <= ref[0]
            lines.append(
                f"- n=50 {name}: {r['seconds']:.2f} s vs reference {ref[0]:g}-"
                f"{ref[1]:g} s (10x target <= {ref[0] / 10:.1f} s): "
                f"{'met' if ok else 'NOT met'}; recall {r['recall']:.3f} vs "
                f"reference {ref[2]}"
            )
    return lines


def markdown(results: dict) -> str:
    out = [
        "# Edge grafting on scale-free synthetic MRFs (5 states, max 3n edges)",
        "",
        f"Machine: {results['machine']}. Settings: {results['settings']}.",
        "",
    ]
    for study in results["studies"]:
        out += [
            f"## n = {study['n']} ({study['true_edges']} true edges, "
            f"{study['train_rows']} train / {study['test_rows']} test rows; true model "
            f"test NLPL {study['true_model_test_nlpl']:.3f})",
            "",
            "| strategy | seconds | steps | edges | recall | precision | test NLPL | "
            "pairs counted | peak RSS MB | stopped |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in study["runs"]:
            out.append(
                f"| {label(r['strategy'], r['alpha'])} | {r['seconds']:.2f} | "
                f"{r['steps']} | {r['edges']} | {r['recall']:.3f} | "
                f"{r['precision']:.3f} | {r['test_nlpl']:.3f} | "
                f"{r['fraction_pairs_counted']:.3f} | {r['peak_rss_mb']:.0f} | "
                f"{r['stopped']} |"
            )
        out += ["", "Targets:", ""] + targets(study) + [""]
    return "\n".join(out)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    studies = results["studies"]
    fig, axes = plt.subplots(1, len(studies), figsize=(6 * len(studies), 4.5), squeeze=False)
    for ax, study in zip(axes[0], studies):
        for r in study["runs"]:
            xs = [0.0] + [p["seconds"] for p in r["curve"]]
            ys = [0.0] + [p["recall"] for p in r["curve"]]
            ax.plot(xs, ys, label=label(r["strategy"], r["alpha"]))
        ax.set_title(f"n = {study['n']}, {study['true_edges']} true edges")
        ax.set_xlabel("seconds")
        ax.set_ylabel("recall of true edges")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[50, 200])
    p.add_argument(
        "--rows",
        type=int,
        nargs="+",
        default=[3000, 19000],
        help="training rows, one per size (last one repeats)",
    )
    p.add_argument("--test-rows", type=int, default=1000)
    p.add_argument("--states", type=int, default=5)
    p.add_argument("--lambda", dest="lambda_", type=float, default=4e-3)
    p.add_argument("--lambda2", type=float, default=1e-3)
    p.add_argument("--burn-in", type=int, default=200)
    p.add_argument("--thin", type=int, default=2)
    p.add_argument("--chains", type=int, default=8)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--configs",
        nargs="+",
        default=None,
        help="strategy[:alpha] to run, per size in --sizes order separated by "
        "'/' (default: all five at every size; first-hit at n = 200 takes "
        "hours at 19k rows)",
    )
    p.add_argument("--out", default=str(RESULTS / "grafting_paper.json"))
    # worker mode (one strategy, internal)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--strategy", help=argparse.SUPPRESS)
    p.add_argument("--alpha", type=float, default=0.5, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args)
        return
    studies = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, n in enumerate(args.sizes):
            a = argparse.Namespace(**vars(args))
            a.rows = args.rows[min(k, len(args.rows) - 1)]
            studies.append(run_size(n, a, Path(tmp), chosen_configs(args.configs, k)))
    results = {
        "machine": f"{platform.platform()}, {os.cpu_count()} cores (shared), "
        f"Python {platform.python_version()}",
        "settings": {
            "lambda": args.lambda_,
            "lambda2": args.lambda2,
            "burn_in": args.burn_in,
            "thin": args.thin,
            "chains": args.chains,
            "seed": args.seed,
            "max_edges": "3n",
        },
        "studies": studies,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    out.with_suffix(".md").write_text(markdown(results))
    plot(results, out.with_suffix(".png"))
    print(markdown(results))


if __name__ == "__main__":
    main()
