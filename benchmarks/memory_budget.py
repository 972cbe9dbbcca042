"""Peak memory of `streammn learn` against `--memory-mb`: is the process within budget + floor?

``--memory-mb`` bounds a DTSL run above a fixed floor (streammn.trees.budget). This runs the
command on a planted chain stream (benchmarks/stream.py's generator) of 600,000 binary rows at
100 and 300 variables, at budgets of 64, 256 and 1024 MB, with a snapshot every 100,000 rows,
and records the learning process's peak RSS (its ``VmHWM``), the peak of
its forked snapshot writers (``RUSAGE_CHILDREN``: the largest writer's, shared pages included),
and rows/s. The floor is the peak of the same command on the same stream at ``--memory-mb 1``,
where every share of the budget is at its least: the interpreter, the libraries, every kernel
compiled or loaded, the Parquet reader's own buffers, and nothing of size kept.

    OPENBLAS_NUM_THREADS=1 python benchmarks/memory_budget.py [--rows 600000]

Writes benchmarks/results/memory_budget.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.stream import machine, write_stream  # noqa: E402

BUDGETS = (64, 256, 1024)
WIDTHS = (100, 300)
# runs the command in a process that reports its own peak and its children's at exit
# (VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child of a large process
# would report its parent's peak)
PEAK_SCRIPT = (
    "import resource, sys\n"
    "from streammn.cli.parser import main\n"
    "try:\n"
    "    code = main(sys.argv[1:])\n"
    "finally:\n"
    "    status = open('/proc/self/status').read().split('VmHWM:')[1]\n"
    "    self_kb = int(status.split()[0])\n"
    "    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "    print(f'PEAK {self_kb} {child_kb}', file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def peak_run(data: Path, out: Path, memory_mb: float, every: int) -> dict:
    """One `streammn learn` run: its peak RSS, its writers' peak, seconds."""
    cmd = [sys.executable, "-c", PEAK_SCRIPT, "learn", str(data), "--out", str(out)]
    cmd += ["--memory-mb", str(memory_mb), "--every-rows", str(every), "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    line = next(x for x in proc.stderr.splitlines() if x.startswith("PEAK "))
    self_kb, child_kb = (int(v) for v in line.split()[1:])
    return {
        "peak_rss_mb": self_kb / 1024,
        "writer_peak_rss_mb": child_kb / 1024,
        "seconds": seconds,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=600_000)
    ap.add_argument("--every", type=int, default=100_000)
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for n_vars in WIDTHS:
            data = tmp / f"stream{n_vars}.parquet"
            write_stream(data, args.rows, n_vars, seed=0)
            floor = peak_run(data, tmp / f"floor{n_vars}", 1, args.every)
            print(f"{n_vars} variables: floor {floor['peak_rss_mb']:.0f} MB", flush=True)
            for mb in BUDGETS:
                run = peak_run(data, tmp / f"out{n_vars}_{mb}", mb, args.every)
                run.update(
                    n_vars=n_vars,
                    n_rows=args.rows,
                    memory_mb=mb,
                    floor_mb=floor["peak_rss_mb"],
                    rows_per_s=args.rows / run["seconds"],
                    within=run["peak_rss_mb"] <= mb + floor["peak_rss_mb"],
                )
                results.append(run)
                print(
                    f"  --memory-mb {mb}: peak {run['peak_rss_mb']:.0f} MB (budget + floor "
                    f"{mb + floor['peak_rss_mb']:.0f}), writer {run['writer_peak_rss_mb']:.0f} "
                    f"MB, {run['rows_per_s']:,.0f} rows/s",
                    flush=True,
                )
    m = machine()
    out = ROOT / "benchmarks" / "results"
    (out / "memory_budget.json").write_text(json.dumps({"machine": m, "runs": results}, indent=2))
    (out / "memory_budget.md").write_text(markdown(results, m))


def markdown(results: list[dict], m: dict) -> str:
    lines = [
        "# memory budget: peak RSS of `streammn learn` against `--memory-mb`",
        "",
        f"Machine: {m['platform']}, {m['cpu_count']} CPUs, Python {m['python']} "
        f"(load average {m['load_average_1min_at_start']:.2f} at start; a machine shared "
        f"with other jobs). `OPENBLAS_NUM_THREADS=1`.",
        "",
        f"Stream: planted chains of 10 binary variables (benchmarks/stream.py), "
        f"{results[0]['n_rows']:,} rows, a snapshot every 100,000 rows, DTSL at its defaults "
        f"(`cpd='auto'`, refined weights). Peak: the learning process's own `VmHWM`; "
        f"writer: the largest forked snapshot writer's (shared pages included). Floor: the "
        f"same command on the same stream at `--memory-mb 1`, every share at its least "
        f"(interpreter, numpy, scipy, pyarrow, numba and every kernel "
        f"it loads, the Parquet reader's buffers; nothing of size kept).",
        "",
        "MB are MiB (2**20 bytes), as `--memory-mb` counts them. Before `--memory-mb` covered "
        "the process (it bounded the forest, replay buffer and split statistics only), the "
        "300-variable runs peaked at 716, 742 and 786 MB at 64, 256 and 1024 (the same "
        "stream, `/usr/bin/time`).",
        "",
        "What the floor is made of (300 variables, RSS stepped through a run): imports about "
        "180 MB (Python and numpy 25, pyarrow 48, numba and llvmlite 60, scipy 20, streammn and "
        "connectors 30; pandas, 37 more, which pyarrow's `to_numpy` imports on its first call, "
        "is no longer loaded: the Parquet path reads the Arrow buffers, streammn.connectors.arrow."
        "plain_values; floor 315 and 347 MB before); the numba kernels loaded, those of "
        "learning and those "
        "the snapshot writer runs (loaded in this process beside the first batches), about "
        "90; Arrow's Parquet reader buffers, about 30 at 300 columns of 65,536-row groups; "
        "the least shares (FTRL state 6.5 MB at 300 variables, 1,024-row batches), about 15.",
        "",
        "| variables | --memory-mb | floor MB | peak RSS MB | budget + floor | within | "
        "writer peak MB | rows/s |",
        "|---:|---:|---:|---:|---:|:---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['n_vars']} | {r['memory_mb']} | {r['floor_mb']:.0f} | "
            f"{r['peak_rss_mb']:.0f} | {r['memory_mb'] + r['floor_mb']:.0f} | "
            f"{'yes' if r['within'] else 'no'} | {r['writer_peak_rss_mb']:.0f} | "
            f"{r['rows_per_s']:,.0f} |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
