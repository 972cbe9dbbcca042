"""DTSL benchmark: exact (multi-pass) vs one-pass Hoeffding trees as dependency networks.

For every dataset directory ``<data>/<name>/<name>.{train,valid,test}.data``: learn on train with
every kappa of the grid, pick kappa by validation DN PLL, and report for the chosen kappa the
training CPU and wall time, rows/s, passes, tree sizes, peak RSS and test DN PLL, for both modes.
Then: Hoeffding throughput on a synthetic 1M x 100 binary stream sampled from a random sparse
Bayesian network, and msnbc_stream (first 80,000 rows learn, the rest test; kappa chosen on the
last 8,000 learning rows), exact vs Hoeffding.

Throughput (``--throughput``, issue 13): one pass at the defaults (every core), on one and on two threads,
and at the previous defaults over planted streams (:class:`streammn.planted.LogisticBN`) of 16, 100 and 300 binary variables
and 100 four-valued variables (pairs of planted binary variables), next to the floor measured in
the same process: float32 ``X.T @ X`` over the rows' indicator columns (every row times every
candidate test, the co-occurrence count one-pass DTSL amounts to), on one BLAS thread and on
as many as the learner's. Results go to
``dtsl_throughput.json`` and ``.md`` with the machine's load average.

Each (dataset, mode) runs in its own subprocess so that peak RSS is its own. Results go to
``benchmarks/results/dtsl.json`` and ``dtsl.md``.

    PYTHONPATH=. python benchmarks/dtsl.py                      # everything
    PYTHONPATH=. python benchmarks/dtsl.py --datasets nltcs --no-synthetic --no-msnbc
    PYTHONPATH=. python benchmarks/dtsl.py --throughput [--throughput-rows 1000000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import time

import numpy as np

KAPPAS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
LIBRA = {  # Libra 1.1.2 DN, kappa chosen for the DN (REFERENCE.md): test PLL, learn CPU s
    "nltcs": (-4.972, 0.12),
    "plants": (-9.063, 2.56),
    "jester": (-52.328, 3.32),
    "accidents": (-12.178, 2.71),
    "mushrooms": (-0.616, 0.16),
}
HERE = os.path.dirname(os.path.abspath(__file__))
# Learner configurations compared, each with Libra's fixed kappa swept over KAPPAS: exact trees;
# Hoeffding trees with river's split test, at most 64 leaves per tree and no replay (the
# defaults before kappa='auto'); and Hoeffding trees that split on the penalised gain alone (tau
# above any Hoeffding bound after 100 rows) with a 20,000-row replay buffer seeding new leaves
# and no cap on tree size. The defaults (kappa='auto') are measured by benchmarks/convergence.py.
CONFIGS = {
    "exact": {"mode": "exact", "cpd": "tree"},
    "hoeffding": {"mode": "hoeffding", "max_tree_leaves": 64, "replay_rows": 0, "cpd": "tree"},
    "hoeffding-replay": {
        "mode": "hoeffding",
        "cpd": "tree",
        "grace_period": 100,
        "tau": 1.0,
        "replay_rows": 20_000,
        "max_tree_leaves": None,
    },
}


def load(path: str) -> np.ndarray:
    return np.ascontiguousarray(np.loadtxt(path, delimiter=",", dtype=np.uint8, ndmin=2))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def warm_up(schema_n: int, config: str) -> None:
    """Load the compiled kernels so that timings exclude JIT/cache loading."""
    from streammn.dtsl import DTSL
    from streammn.schema import Schema

    rng = np.random.default_rng(0)
    rows = (rng.random((500, schema_n)) < 0.5).astype(np.uint8)
    model = DTSL(Schema.binary(schema_n), kappa=1.0, **CONFIGS[config]).fit(rows)
    model.to_dependency_network().pll(rows)


def train(rows, kappa, config, batch_size=65536):
    from streammn.connectors.array import ArraySource
    from streammn.dtsl import DTSL
    from streammn.schema import Schema

    schema = (
        Schema.from_cardinalities(np.maximum(rows.max(axis=0) + 1, 2).tolist())
        if rows.max() > 1
        else Schema.binary(rows.shape[1])
    )
    source = ArraySource(rows, schema, batch_size=batch_size)
    model = DTSL(schema, kappa=kappa, **CONFIGS[config])
    c0, w0 = time.process_time(), time.perf_counter()
    model.fit(source)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    w1 = time.perf_counter()
    dn = model.to_dependency_network()
    dn_s = time.perf_counter() - w1
    return model, dn, cpu, wall, dn_s


def run_config(train_rows, valid_rows, test_rows, config) -> dict:
    """Kappa by validation PLL, then the chosen model's figures."""
    warm_up(train_rows.shape[1], config)
    per_kappa = []
    best = None
    for kappa in KAPPAS:
        model, dn, cpu, wall, dn_s = train(train_rows, kappa, config)
        valid = dn.pll(valid_rows)
        stats = model.tree_stats()
        entry = {
            "kappa": kappa,
            "valid_pll": valid,
            "test_pll": dn.pll(test_rows),
            "cpu_s": cpu,
            "wall_s": wall,
            "rows_per_s": len(train_rows) / wall,
            "passes": model.n_passes,
            "leaves": int(stats["n_leaves"].sum()),
            "max_depth": int(stats["depth"].max()),
            "dn_features": dn.n_features,
            "to_dn_s": dn_s,
        }
        per_kappa.append(entry)
        if best is None or valid > best["valid_pll"]:
            best = entry
    return {
        "mode": config,
        "settings": CONFIGS[config],
        "chosen": best,
        "per_kappa": per_kappa,
        "peak_rss_mb": peak_rss_mb(),
    }


def worker_dataset(data_dir: str, name: str, mode: str) -> dict:
    """One dataset under one CONFIGS entry (``mode``)."""
    base = os.path.join(data_dir, name, name)
    tr, va, te = (load(f"{base}.{s}.data") for s in ("train", "valid", "test"))
    out = run_config(tr, va, te, mode)
    out.update({"dataset": name, "n_vars": tr.shape[1], "n_train": len(tr)})
    return out


def worker_msnbc(data_dir: str, mode: str) -> dict:
    rows = load(os.path.join(data_dir, "msnbc_stream", "msnbc_stream.data"))
    learn, test = rows[:80_000], rows[80_000:]
    out = run_config(learn[:72_000], learn[72_000:], test, mode)
    kappa = out["chosen"]["kappa"]
    model, dn, cpu, wall, dn_s = train(learn, kappa, mode)
    stats = model.tree_stats()
    out["final"] = {
        "kappa": kappa,
        "n_learn": len(learn),
        "n_test": len(test),
        "test_pll": dn.pll(test),
        "cpu_s": cpu,
        "wall_s": wall,
        "rows_per_s": len(learn) / wall,
        "passes": model.n_passes,
        "leaves": int(stats["n_leaves"].sum()),
        "max_depth": int(stats["depth"].max()),
    }
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def sample_sparse_bn(rng, n_rows: int, n_vars: int, max_parents: int = 3) -> np.ndarray:
    """Rows from a random Bayesian network: each variable has up to ``max_parents`` earlier
    parents and a logistic CPD with weights of either sign in [1, 3]."""
    X = np.empty((n_rows, n_vars), dtype=np.uint8)
    for j in range(n_vars):
        k = min(j, int(rng.integers(0, max_parents + 1)))
        parents = rng.choice(j, size=k, replace=False) if k else np.empty(0, dtype=np.int64)
        w = rng.uniform(1, 3, size=k) * rng.choice([-1, 1], size=k)
        logit = rng.normal(-0.5, 0.5) + X[:, parents].astype(np.float64) @ w
        X[:, j] = rng.random(n_rows) < 1.0 / (1.0 + np.exp(-logit))
    return X


def worker_synthetic(n_rows: int, n_vars: int, kappa: float, batch_size: int) -> dict:
    from streammn.dtsl import DTSL
    from streammn.schema import Schema

    rng = np.random.default_rng(2024)
    X = sample_sparse_bn(rng, n_rows + 10_000, n_vars)
    stream, test = X[:n_rows], X[n_rows:]
    warm_up(n_vars, "hoeffding")  # river's defaults, no replay
    model = DTSL(Schema.binary(n_vars), kappa=kappa, **CONFIGS["hoeffding"])
    progress = []
    c0, w0 = time.process_time(), time.perf_counter()
    for start in range(0, n_rows, batch_size):
        model.partial_fit(stream[start : start + batch_size])
        if (start // batch_size) % 4 == 3 or start + batch_size >= n_rows:
            progress.append({"rows": model.rows_seen, "wall_s": time.perf_counter() - w0})
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    stats = model.tree_stats()
    return {
        "n_rows": n_rows,
        "n_vars": n_vars,
        "kappa": kappa,
        "batch_size": batch_size,
        "cpu_s": cpu,
        "wall_s": wall,
        "rows_per_s_wall": n_rows / wall,
        "rows_per_s_cpu": n_rows / cpu,
        "leaves": int(stats["n_leaves"].sum()),
        "max_depth": int(stats["depth"].max()),
        "test_pll": model.to_dependency_network().pll(test),
        "progress": progress,
        "peak_rss_mb": peak_rss_mb(),
    }


# the defaults (every core), one thread, two threads, and the defaults before issue 11
THROUGHPUT_SETTINGS = (
    ("defaults", {"cpd": "tree"}),
    ("one_thread", {"n_threads": 1, "cpd": "tree"}),
    ("two_threads", {"n_threads": 2, "cpd": "tree"}),
    ("previous_defaults", None),
)
THROUGHPUT_SHAPES = (
    ("16 binary", 16, 2),
    ("100 binary", 100, 2),
    ("300 binary", 300, 2),
    ("100 x 4 values", 100, 4),
)


def planted_rows(n_rows: int, n_vars: int, card: int) -> np.ndarray:
    """Planted stream rows: binary from a logistic BN; 4-valued as pairs of its variables."""
    from streammn.planted import LogisticBN

    bits = 1 if card == 2 else 2
    bn = LogisticBN(n_vars * bits, seed=7, weight_low=1.0, weight_high=3.0)
    X = bn.sample(n_rows, np.random.default_rng(0))
    return X if bits == 1 else (2 * X[:, 0::2] + X[:, 1::2]).astype(np.uint8)


def gram_rows_per_s(indicators: np.ndarray, threads: int = 1) -> float:
    """Rows/s of float32 ``X.T @ X`` over the indicator columns (best of three), on as many
    BLAS threads as the learner it is set against (a multi-threaded BLAS on a busy machine
    spins and runs 100x slower)."""
    from threadpoolctl import threadpool_limits

    X = indicators.astype(np.float32)
    best = np.inf
    with threadpool_limits(threads):
        for _ in range(3):
            t = time.perf_counter()
            X.T @ X
            best = min(best, time.perf_counter() - t)
    return X.shape[0] / best


@contextlib.contextmanager
def every_step_parallel():
    """Within it, the learner runs every step of a multi-threaded DTSL in parallel, however
    small: a warm-up then compiles (or loads) the parallel kernels before the timed run, which
    would otherwise pay their first compile when its steps first grow big enough."""
    from streammn.trees import leaf_stats as stats

    saved = stats.PARALLEL_NS
    stats.PARALLEL_NS = 0
    try:
        yield
    finally:
        stats.PARALLEL_NS = saved


def one_pass(model, rows: np.ndarray) -> None:
    """Feed ``rows`` to ``model`` in batches, as a stream would."""
    from benchmarks.convergence import BATCH

    for start in range(0, rows.shape[0], BATCH):
        model.partial_fit(rows[start : start + BATCH])


def worker_throughput(n_rows: int, n_vars: int, card: int) -> dict:
    from benchmarks.convergence import BATCH, PREVIOUS_DEFAULTS
    from streammn.dtsl import DTSL
    from streammn.schema import Schema
    from streammn.trees.leaf_stats import LeafStats

    schema = Schema.from_cardinalities([card] * n_vars)
    rows = planted_rows(n_rows, n_vars, card)
    out = {"n_rows": n_rows, "n_vars": n_vars, "card": card, "batch_size": BATCH}
    # one untimed pass at the defaults first: the first pass in a process also pays the first
    # touch of the memory its arrays grow into (measured: the setting timed first ran 7-25%
    # slower than the same threads timed later), which would fall on whichever setting is first
    one_pass(DTSL(schema, cpd="tree"), rows)
    for label, params in THROUGHPUT_SETTINGS:
        params = {**PREVIOUS_DEFAULTS, "cpd": "tree"} if params is None else params
        with every_step_parallel():  # load the compiled kernels, the parallel ones too
            DTSL(schema, **params).fit(rows[:2000])
        model = DTSL(schema, **params)
        c0, w0 = time.process_time(), time.perf_counter()
        one_pass(model, rows)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        out[label] = {
            "params": params,
            "wall_s": wall,
            "cpu_s": cpu,
            "rows_per_s": n_rows / wall,
            "rows_per_s_cpu": n_rows / cpu,
            "leaves": int(model.tree_stats()["n_leaves"].sum()),
            "threads": model.threads,
        }
    indicators = LeafStats(model.forest, 1).indicators(rows)
    out["gram_rows_per_s"] = gram_rows_per_s(indicators)
    out["gram_rows_per_s_threads"] = {}
    for label, _ in THROUGHPUT_SETTINGS:
        threads = out[label]["threads"]
        if threads not in out["gram_rows_per_s_threads"]:
            out["gram_rows_per_s_threads"][threads] = gram_rows_per_s(indicators, threads)
        floor = out["gram_rows_per_s_threads"][threads]
        out[label]["gram_ratio"] = out["gram_rows_per_s"] / out[label]["rows_per_s"]
        out[label]["gram_ratio_same_threads"] = floor / out[label]["rows_per_s"]
    return out


def throughput_markdown(results: dict) -> str:
    lines = [
        "# One-pass DTSL throughput (issue 13)\n",
        f"Machine: {results['machine']}; load average before / after: "
        f"{results['load_before']} / {results['load_after']} (on a shared machine other "
        "jobs run alongside, so wall rates are below what the code does on quiet cores; "
        "CPU rates are per CPU second of this process, all its threads). Planted streams "
        f"of {results['n_rows']:,} rows, batches of {results['batch_size']:,}. Floor: "
        "float32 `X.T @ X` over the same rows' indicator columns, in the same process, on "
        "one BLAS thread and on as many as the learner's threads. Targets: >= 1M rows/s "
        "(within 5.5x of `X.T @ X`) at 100 binary variables, >= 3M rows/s at 16, at the "
        "defaults.\n",
        "| variables | settings | threads | rows/s wall | rows/s per CPU s | "
        "`X.T @ X` rows/s, 1 thread | ratio to it | `X.T @ X`, same threads | "
        "ratio to it | leaves |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["shapes"]:
        for label, _ in THROUGHPUT_SETTINGS:
            t = r[label]
            same = r["gram_rows_per_s_threads"][str(t["threads"])]
            lines.append(
                f"| {r['label']} | {label} {t['params'] or ''} | {t['threads']} | "
                f"{t['rows_per_s']:,.0f} | {t['rows_per_s_cpu']:,.0f} | "
                f"{r['gram_rows_per_s']:,.0f} | {t['gram_ratio']:,.1f}x | "
                f"{same:,.0f} | {t['gram_ratio_same_threads']:,.1f}x | "
                f"{t['leaves']:,} |"
            )
    return "\n".join(lines) + "\n"


def run_throughput(n_rows: int, out_dir: str) -> dict:
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "n_rows": n_rows,
        "shapes": [],
    }
    for label, n_vars, card in THROUGHPUT_SHAPES:
        r = run_worker(["throughput", str(n_rows), str(n_vars), str(card)])
        r["label"] = label
        results["batch_size"] = r["batch_size"]
        print(
            f"throughput {label}: defaults {r['defaults']['rows_per_s']:,.0f} rows/s, "
            f"one thread {r['one_thread']['rows_per_s']:,.0f}, "
            f"two threads {r['two_threads']['rows_per_s']:,.0f}, "
            f"previous {r['previous_defaults']['rows_per_s']:,.0f}, X.T@X "
            f"{r['gram_rows_per_s']:,.0f}",
            flush=True,
        )
        results["shapes"].append(r)
    results["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    write_results(out_dir, "dtsl_throughput", results, throughput_markdown(results))
    return results


def write_results(out_dir: str, name: str, results: dict, table: str) -> None:
    """``results`` to ``out_dir/name.json`` and their markdown ``table`` to ``name.md``."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(out_dir, f"{name}.md"), "w") as f:
        f.write(table)


def run_worker(args_list: list[str]) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", *args_list]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(HERE) + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"worker {args_list} failed:\n{res.stderr}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def fmt(x, nd=3):
    return "" if x is None else f"{x:,.{nd}f}"


def markdown(results: dict) -> str:
    lines = [
        f"# DTSL benchmark\n\nMachine: {results['machine']}. Kappa chosen on validation "
        f"from {list(KAPPAS)}. Times are for learning the trees on the training set with "
        f"the chosen kappa (CPU = all threads); compiled kernels loaded beforehand. "
        f"Peak RSS is the worker process (data, all five kappas, interpreter).\n",
        "Configurations: " + "; ".join(f"`{k}`: {v}" for k, v in CONFIGS.items()) + "\n",
        "## Datasets\n",
        "| dataset | mode | kappa | test DN PLL | Libra DN PLL | diff | CPU s | wall s | "
        "rows/s | passes | leaves | depth | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["datasets"]:
        c = r["chosen"]
        libra = LIBRA.get(r["dataset"], (None, None))[0]
        diff = None if libra is None else c["test_pll"] - libra
        lines.append(
            f"| {r['dataset']} | {r['mode']} | {c['kappa']:g} | {fmt(c['test_pll'])} | "
            f"{fmt(libra)} | {fmt(diff)} | {fmt(c['cpu_s'], 2)} | "
            f"{fmt(c['wall_s'], 2)} | {c['rows_per_s']:,.0f} | {c['passes']} | "
            f"{c['leaves']:,} | {c['max_depth']} | {r['peak_rss_mb']:,.0f} |"
        )
    if results.get("libra_cpu"):
        lines.append(
            "\nLibra learn-DN CPU s (REFERENCE.md): "
            + ", ".join(f"{k} {v}" for k, v in results["libra_cpu"].items())
        )
    if results.get("synthetic"):
        s = results["synthetic"]
        lines += [
            "\n## Hoeffding throughput, synthetic stream\n",
            f"{s['n_rows']:,} rows x {s['n_vars']} binary variables from a random sparse "
            f"Bayesian network (up to 3 parents, logistic CPDs), kappa {s['kappa']:g}, "
            f"batches of {s['batch_size']:,}: **{s['rows_per_s_wall']:,.0f} rows/s wall**, "
            f"{s['rows_per_s_cpu']:,.0f} rows/s per CPU second ({s['wall_s']:.1f} s wall, "
            f"{s['cpu_s']:.1f} s CPU), {s['leaves']:,} leaves, max depth "
            f"{s['max_depth']}, held-out PLL {s['test_pll']:.3f}, peak RSS "
            f"{s['peak_rss_mb']:,.0f} MB.",
        ]
    if results.get("msnbc"):
        lines += [
            "\n## msnbc_stream (first 80,000 rows learn, remaining 17,108 test)\n",
            "| mode | kappa | test DN PLL | CPU s | wall s | rows/s | passes | leaves | depth |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in results["msnbc"]:
            f = r["final"]
            lines.append(
                f"| {r['mode']} | {f['kappa']:g} | {fmt(f['test_pll'])} | "
                f"{fmt(f['cpu_s'], 2)} | {fmt(f['wall_s'], 2)} | {f['rows_per_s']:,.0f} | "
                f"{f['passes']} | {f['leaves']:,} | {f['max_depth']} |"
            )
        by_mode = {r["mode"]: r["final"]["test_pll"] for r in results["msnbc"]}
        for mode in by_mode:
            if mode != "exact" and "exact" in by_mode:
                rel = (by_mode["exact"] - by_mode[mode]) / abs(by_mode["exact"])
                lines.append(f"\n{mode} is {100 * rel:.2f}% below exact (target: within 2%).")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", default="/work/shared/data")
    p.add_argument("--datasets", help="comma-separated subset (default: all with splits)")
    p.add_argument("--modes", default=",".join(CONFIGS), help="subset of " + ",".join(CONFIGS))
    p.add_argument("--no-synthetic", action="store_true")
    p.add_argument("--synthetic-rows", type=int, default=1_000_000)
    p.add_argument("--synthetic-kappa", type=float, default=0.01)
    p.add_argument("--no-msnbc", action="store_true")
    p.add_argument("--throughput", action="store_true", help="only the throughput section")
    p.add_argument("--throughput-rows", type=int, default=1_000_000)
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        kind, *rest = args.worker
        if kind == "dataset":
            out = worker_dataset(args.data, rest[0], rest[1])
        elif kind == "msnbc":
            out = worker_msnbc(args.data, rest[0])
        elif kind == "throughput":
            out = worker_throughput(*map(int, rest))
        else:
            out = worker_synthetic(int(rest[0]), 100, float(rest[1]), 65536)
        print(json.dumps(out))
        return
    if args.throughput:
        run_throughput(args.throughput_rows, args.out)
        return

    names = sorted(
        d
        for d in os.listdir(args.data)
        if all(
            os.path.exists(os.path.join(args.data, d, f"{d}.{s}.data"))
            for s in ("train", "valid", "test")
        )
    )
    if args.datasets:
        wanted = args.datasets.split(",")
        names = [n for n in names if n in wanted]
    modes = args.modes.split(",")
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.processor() or platform.platform()}",
        "kappas": list(KAPPAS),
        "datasets": [],
        "libra_cpu": {k: v[1] for k, v in LIBRA.items() if k in names},
    }
    for name in names:
        for mode in modes:
            r = run_worker(["dataset", name, mode])
            c = r["chosen"]
            print(
                f"{name:10s} {mode:9s} kappa={c['kappa']:g} test PLL {c['test_pll']:.4f} "
                f"cpu {c['cpu_s']:.2f}s wall {c['wall_s']:.2f}s",
                flush=True,
            )
            results["datasets"].append(r)
    if not args.no_msnbc:
        results["msnbc"] = []
        for mode in modes:
            r = run_worker(["msnbc", mode])
            print(f"msnbc      {mode:9s} test PLL {r['final']['test_pll']:.4f}", flush=True)
            results["msnbc"].append(r)
    if not args.no_synthetic:
        r = run_worker(["synthetic", str(args.synthetic_rows), str(args.synthetic_kappa)])
        print(f"synthetic  {r['rows_per_s_wall']:,.0f} rows/s", flush=True)
        results["synthetic"] = r
    write_results(args.out, "dtsl", results, markdown(results))


if __name__ == "__main__":
    main()
