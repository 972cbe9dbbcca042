"""The batch L1 logistic-regression fit (``streammn.logistic.batch.fit_with_held_out``) before and
after its rewrite, on the rows DTSL gives it, and both against the exact path.

For each dataset (``<data>/<name>/<name>.train.data``, ``STREAMMN_DATA`` or ``../shared/data``):
the training rows go through :class:`~streammn.logistic.conditionals.LogisticConditionals` as
DTSL's ``cpd='lr'`` / ``'auto'`` feeds them (its sample and held-out slots, exactly what
``finish`` passes), then ``fit_with_held_out`` runs with this checkout's module ("after") and
with the module of the ``--before`` commit ("before", loaded from git; the rest of the package is
this checkout's), alternated, each timed ``--repeats`` times (best wall time reported).

Equality. What each returns is compared with the exact path: the same path solved in float64 to
a relative objective change of 1e-13 (this checkout's ``fit_l1``, which the tests hold to
scikit-learn and to the optimality conditions), each variable's penalty chosen on its held-out
losses, then the final fit on every row likewise. Reported: the held-out losses (their sum and
the largest difference from the exact path's), how many variables chose the exact path's
penalty, the final objective (mean log-loss plus penalty, float64, every row) summed over the
variables whose penalties agree in all three, and the test PLL per example of the dependency network
of the regressions (``cpd='lr'``: every CPD a regression; what ``benchmarks/cpds.py`` reports
as the DN's).

Results: ``benchmarks/results/logistic_fit.json`` and ``.md``.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/logistic_fit.py
    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/logistic_fit.py --datasets jester \\
        --repeats 1 --before ed91b5c
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))

from streammn.logistic import batch  # noqa: E402
from streammn.logistic.conditionals import LogisticConditionals  # noqa: E402
from streammn.schema import Schema  # noqa: E402

DATASETS = ("plants", "jester", "accidents", "mushrooms")
DATA = Path(os.environ.get("STREAMMN_DATA", ROOT.parent / "shared" / "data"))
BEFORE = "ed91b5c"  # the last commit of the single-step-size FISTA fit


def load(name: str, part: str) -> np.ndarray:
    path = DATA / name / f"{name}.{part}.data"
    return np.ascontiguousarray(np.loadtxt(path, delimiter=",", dtype=np.uint8, ndmin=2))


def module_at(commit: str):
    """``streammn/logistic/batch.py`` as it was at ``commit``, imported as its own module."""
    source = subprocess.run(
        ["git", "show", f"{commit}:streammn/logistic/batch.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / f"batch_{commit}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"batch_{commit}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dtsl_rows(train: np.ndarray):
    """The coding, rows and held-out mask DTSL's logistic conditionals fit at the end of
    ``train`` (their sample, in slot order)."""
    conditionals = LogisticConditionals(Schema.binary(train.shape[1]))
    conditionals.update(train, 0)
    return conditionals.coding, conditionals.sample.rows, conditionals._held_out_slots()


def objectives(problem, lam, weights, bias) -> np.ndarray:
    """Each variable's mean log-loss on ``problem``'s rows plus its penalty."""
    l1 = np.add.reduceat(np.abs(weights).sum(axis=0), problem.coding.out_start[:-1])
    return problem.losses(weights, bias) + lam * l1


def exact_path(coding, rows, held_out):
    """The path of ``fit_with_held_out`` solved to the last digits in float64: ``(weights,
    bias, lam, held_out_loss)`` as it returns them."""
    fit = batch.Problem(coding, rows[~held_out], np.float64)
    judge = batch.Problem(coding, rows[held_out], np.float64)
    top = np.maximum(batch.largest_penalties(fit), 1e-8)
    weights = np.zeros((coding.n_inputs, coding.n_outputs))
    bias = batch.intercepts_only(fit)
    best_loss = np.full(coding.schema.n_vars, np.inf)
    best_lam, best_w, best_b = top.copy(), weights.copy(), bias.copy()
    for ratio in np.geomspace(1.0, batch.PATH_RATIO, batch.PATH_STEPS):
        lam = top * ratio
        weights, bias, _ = batch.fit_l1(fit, lam[coding.out_var], weights, bias, tol=1e-13)
        loss = judge.losses(weights, bias)
        better = loss < best_loss
        best_loss[better], best_lam[better] = loss[better], lam[better]
        columns = better[coding.out_var]
        best_w[:, columns], best_b[columns] = weights[:, columns], bias[columns]
    everything = batch.Problem(coding, rows, np.float64)
    lam = best_lam * np.sqrt(fit.n / everything.n)
    weights, bias, _ = batch.fit_l1(everything, lam[coding.out_var], best_w, best_b, tol=1e-13)
    return weights, bias, lam, best_loss


def summary(coding, rows, test, fit) -> dict:
    weights, bias, lam, held_out_loss = fit
    everything = batch.Problem(coding, rows, np.float64)
    return {
        "held_out_loss": held_out_loss.tolist(),
        "lam": lam.tolist(),
        "objectives": objectives(everything, lam, weights, bias).tolist(),
        "test_pll": float(coding.log_conditionals(test, weights, bias).sum(axis=1).mean()),
        "nonzero_weights": int((weights != 0).sum()),
    }


def run(name: str, before, repeats: int) -> dict:
    train, test = load(name, "train"), load(name, "test")
    coding, rows, held_out = dtsl_rows(train)
    modules = {"before": before, "after": batch}
    small = min(rows.shape[0], 300)
    for module in modules.values():  # compile the kernels, untimed
        module.fit_with_held_out(coding, rows[:small], held_out[:small])
    seconds = {which: [] for which in modules}
    fits = {}
    for _ in range(repeats):
        for which, module in modules.items():
            t0 = time.perf_counter()
            fits[which] = module.fit_with_held_out(coding, rows, held_out)
            seconds[which].append(time.perf_counter() - t0)
            print(f"{name} {which}: {seconds[which][-1]:.2f} s", file=sys.stderr, flush=True)
    out = {
        "dataset": name,
        "rows": int(rows.shape[0]),
        "held_out_rows": int(held_out.sum()),
        "variables": int(coding.schema.n_vars),
        "exact": summary(coding, rows, test, exact_path(coding, rows, held_out)),
    }
    for which in modules:
        out[which] = {"seconds": seconds[which], **summary(coding, rows, test, fits[which])}
    return out


def fmt(values, nd=2):
    return ", ".join(f"{v:.{nd}f}" for v in values)


def write_results(results: list[dict], meta: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "logistic_fit.json").write_text(json.dumps({"meta": meta, "runs": results}))
    lines = [
        "# The batch L1 logistic-regression fit, before and after",
        "",
        f"Machine: {meta['machine']}, load average {meta['load_average_at_start']:.2f} at start "
        f"and {meta['load_average_at_end']:.2f} at the end, OpenBLAS threads: "
        f"{meta['blas_threads']}. Before: `streammn/logistic/batch.py` at {meta['before']}; "
        "after: this checkout's.",
        "",
        "`fit_with_held_out` on the rows DTSL's `cpd='lr'` / `'auto'` fits when a file ends "
        "(its sample of the training rows, one in five held out), the best wall time of "
        f"{meta['repeats']} alternated runs.",
        "",
        "| dataset | rows | vars | before s | after s | speedup |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        tb, ta = min(r["before"]["seconds"]), min(r["after"]["seconds"])
        lines.append(
            f"| {r['dataset']} | {r['rows']:,} | {r['variables']} | {tb:.2f} | {ta:.2f} | "
            f"{tb / ta:.1f}x |"
        )
    lines += [
        "",
        "Equality, against the exact path (the same path solved in float64 to a relative "
        "objective change of 1e-13, penalties chosen and final fit likewise). Held-out loss: "
        "the sum over variables of each one's mean log-loss on the held-out rows at its chosen "
        "penalty, and the largest difference of one variable's from the exact path's. "
        "Penalties: variables that chose the exact path's. Objective: the final fit's mean "
        "log-loss plus penalty on every row (float64), summed over the variables whose "
        "penalties agree in all three (how many in brackets). Test PLL: the dependency "
        "network of the regressions on the test file, per example.",
        "",
        "| dataset | held-out loss exact | before | after | max abs diff before | after "
        "| penalties before | after | objective exact | before | after | test PLL exact "
        "| before | after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        e, b, a = r["exact"], r["before"], r["after"]
        loss = {k: np.array(v["held_out_loss"]) for k, v in (("e", e), ("b", b), ("a", a))}
        lam = {k: np.array(v["lam"]) for k, v in (("e", e), ("b", b), ("a", a))}
        same = np.isclose(lam["b"], lam["a"], rtol=1e-9) & np.isclose(lam["a"], lam["e"], rtol=1e-9)
        obj = {k: np.array(v["objectives"])[same].sum() for k, v in (("e", e), ("b", b), ("a", a))}
        agree = {k: int(np.isclose(lam[k], lam["e"], rtol=1e-9).sum()) for k in ("b", "a")}
        lines.append(
            f"| {r['dataset']} | {loss['e'].sum():.6f} | {loss['b'].sum():.6f} | "
            f"{loss['a'].sum():.6f} | {np.abs(loss['b'] - loss['e']).max():.1e} | "
            f"{np.abs(loss['a'] - loss['e']).max():.1e} | {agree['b']} / {r['variables']} | "
            f"{agree['a']} / {r['variables']} | {obj['e']:.8f} | {obj['b']:.8f} | "
            f"{obj['a']:.8f} ({same.sum()}) | {e['test_pll']:.4f} | {b['test_pll']:.4f} | "
            f"{a['test_pll']:.4f} |"
        )
    lines += [
        "",
        "Runs (wall s): "
        + "; ".join(
            f"{r['dataset']} before {fmt(r['before']['seconds'])}, "
            f"after {fmt(r['after']['seconds'])}"
            for r in results
        ),
    ]
    (RESULTS / "logistic_fit.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--before", default=BEFORE, help="the commit whose fit is 'before'")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    meta = {
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "load_average_at_start": os.getloadavg()[0],
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "before": args.before,
        "repeats": args.repeats,
    }
    before = module_at(args.before)
    results = []
    for name in filter(None, args.datasets.split(",")):
        results.append(run(name, before, args.repeats))
        meta["load_average_at_end"] = os.getloadavg()[0]
        write_results(results, meta)


if __name__ == "__main__":
    main()
