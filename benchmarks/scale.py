"""Scale benchmark, section (2): exact DTSL on a synthetic Parquet dataset, one process vs Dask.

Section (1), Kafka throughput, is :mod:`benchmarks.kafka_throughput` (results in
``results/scale_kafka.*``). This section generates ``--rows`` rows (default 20M) of ``--vars``
binary variables (default 100) from a random sparse Bayesian network (up to three earlier
parents per variable, logistic CPDs) into Parquet files of ``--file-rows`` rows, then learns
exact level-wise DTSL twice, each run in its own process so that peak RSS figures are clean:

- ``single``: ``DTSL(mode='exact').fit(ParquetSource)`` in one process;
- ``dask``: the same through :class:`streammn.distributed.DaskPasses` on a LocalCluster of
  ``--workers`` single-threaded worker processes (numba/BLAS pinned to one thread).

Reported: wall time of the learning (and of cluster start-up, separately), passes, tree sizes,
peak RSS of every process (driver and each worker), and whether the two learned states are
byte-identical. ``python -m benchmarks.scale --rows 2000000`` writes ``results/scale.json`` and
``results/scale.md``.
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

import numpy as np

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: unlike ru_maxrss it is not inherited across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def generate(directory: str, n_rows: int, n_vars: int, file_rows: int, seed: int) -> None:
    """Write ``n_rows`` rows from a random sparse Bayesian network as Parquet files."""
    from connectors.parquet import write_parquet
    from streammn.schema import Schema

    rng = np.random.default_rng(seed)
    parents = [rng.choice(j, size=min(j, int(rng.integers(0, 4))), replace=False)
               for j in range(n_vars)]
    weights = [rng.normal(0.0, 2.0, size=p.size) for p in parents]
    bias = rng.normal(0.0, 1.0, size=n_vars)
    schema = Schema.from_cardinalities([2] * n_vars)
    for k, start in enumerate(range(0, n_rows, file_rows)):
        n = min(file_rows, n_rows - start)
        x = np.zeros((n, n_vars), dtype=np.uint8)
        for j in range(n_vars):
            logit = bias[j] + x[:, parents[j]].astype(np.float64) @ weights[j]
            x[:, j] = rng.random(n) < 1.0 / (1.0 + np.exp(-logit))
        write_parquet(os.path.join(directory, f"part-{k:04d}.parquet"), x, schema)


def _learner(schema, args):
    from streammn.dtsl import DTSL
    return DTSL(schema, mode="exact", kappa=args.kappa, max_depth=args.max_depth)


def run_single(args) -> dict:
    from connectors.parquet import ParquetSource
    source = ParquetSource(args.data)
    _learner(source.schema, args).fit(np.zeros((64, source.schema.n_vars), np.uint8))  # load kernels
    started = time.perf_counter()
    model = _learner(source.schema, args).fit(source)
    wall = time.perf_counter() - started
    with open(args.model_out, "wb") as f:
        f.write(model.to_bytes())
    return {"wall_s": wall, "passes": model.n_passes, "peak_rss_mb": {"driver": _peak_rss_mb()},
            "leaves": int(model.forest.n_leaves().sum()),
            "depth": int(model.forest.depths().max())}


def _worker_rss():
    return _peak_rss_mb()


def run_dask(args) -> dict:
    from connectors.parquet import ParquetSource
    from streammn.distributed import DaskPasses, dask_client

    source = ParquetSource(args.data)
    started = time.perf_counter()
    with dask_client(f"local[{args.workers}]") as client:
        client.wait_for_workers(args.workers)
        startup = time.perf_counter() - started
        started = time.perf_counter()
        passes = DaskPasses(client, source)
        model = _learner(source.schema, args).fit(source, count_pass=passes)
        wall = time.perf_counter() - started
        workers = client.run(_worker_rss)
    with open(args.model_out, "wb") as f:
        f.write(model.to_bytes())
    rss = {"driver": _peak_rss_mb()}
    rss.update({f"worker {i}": v for i, (_, v) in enumerate(sorted(workers.items()))})
    return {"wall_s": wall, "cluster_startup_s": startup, "passes": model.n_passes,
            "tasks_per_pass": len(passes.groups), "peak_rss_mb": rss,
            "leaves": int(model.forest.n_leaves().sum()),
            "depth": int(model.forest.depths().max())}


def _in_subprocess(mode: str, args, model_out: str) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.scale", "--run", mode, "--data", args.data,
           "--model-out", model_out, "--kappa", str(args.kappa), "--workers", str(args.workers)]
    if args.max_depth is not None:
        cmd += ["--max-depth", str(args.max_depth)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--vars", type=int, default=100)
    p.add_argument("--file-rows", type=int, default=1_000_000, help="rows per Parquet file")
    p.add_argument("--kappa", type=float, default=0.1)
    p.add_argument("--max-depth", type=int, default=None)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", help="existing dataset directory (skips generation)")
    p.add_argument("--run", choices=["single", "dask"], help=argparse.SUPPRESS)
    p.add_argument("--model-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.run:
        result = run_single(args) if args.run == "single" else run_dask(args)
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory(prefix="streammn-scale-") as tmp:
        if args.data is None:
            args.data = os.path.join(tmp, "data")
            os.makedirs(args.data)
            started = time.perf_counter()
            generate(args.data, args.rows, args.vars, args.file_rows, args.seed)
            print(f"generated {args.rows:,} rows in {time.perf_counter() - started:.1f} s",
                  file=sys.stderr)
        size_mb = sum(os.path.getsize(os.path.join(args.data, f))
                      for f in os.listdir(args.data)) / 2 ** 20
        runs = {}
        models = {}
        for mode in ("single", "dask"):
            out = os.path.join(tmp, f"{mode}.bin")
            runs[mode] = _in_subprocess(mode, args, out)
            with open(out, "rb") as f:
                models[mode] = f.read()
            print(mode, runs[mode], file=sys.stderr)
    result = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_average_end": round(os.getloadavg()[0], 2)},
        "dataset": {"rows": args.rows, "vars": args.vars, "file_rows": args.file_rows,
                    "files": -(-args.rows // args.file_rows), "parquet_mb": round(size_mb, 1),
                    "seed": args.seed},
        "dtsl": {"mode": "exact", "kappa": args.kappa, "max_depth": args.max_depth},
        "command": "python -m benchmarks.scale " + " ".join(argv if argv is not None
                                                            else sys.argv[1:]),
        "workers": args.workers, "runs": runs,
        "identical_model": models["single"] == models["dask"],
        "speedup": round(runs["single"]["wall_s"] / runs["dask"]["wall_s"], 2),
    }
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "scale.json"), "w") as f:
        json.dump(result, f, indent=2)
    with open(os.path.join(RESULTS, "scale.md"), "w") as f:
        f.write(markdown(result))
    print(markdown(result))


def markdown(r: dict) -> str:
    d, m = r["dataset"], r["machine"]
    lines = [
        "# Scale: exact DTSL, one process vs Dask",
        "",
        f"`{r.get('command', '')}` (defaults: 20M rows, no depth limit).",
        "",
        f"{d['rows']:,} rows x {d['vars']} binary variables (random sparse Bayesian network), "
        f"{d['files']} Parquet files, {d['parquet_mb']} MB; exact DTSL kappa "
        f"{r['dtsl']['kappa']}, max_depth {r['dtsl']['max_depth']}. Machine: {m['cpus']} CPUs "
        f"shared with other jobs, {m['platform']}, load average {m['load_average_end']} at "
        f"the end. Dask: LocalCluster of {r['workers']} single-threaded worker processes; "
        "wall time excludes cluster start-up (listed separately) and, for the single process, "
        "numba compilation. Identical model: learned states byte-identical: "
        f"**{r['identical_model']}**; speed-up {r['speedup']}x.",
        "",
        "| run | wall s | passes | leaves | depth | start-up s | peak RSS MB per process |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, run in r["runs"].items():
        rss = ", ".join(f"{k} {v:.0f}" for k, v in run["peak_rss_mb"].items())
        lines.append(f"| {name} | {run['wall_s']:.1f} | {run['passes']} | {run['leaves']:,} | "
                     f"{run['depth']} | {run.get('cluster_startup_s', 0):.1f} | {rss} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
