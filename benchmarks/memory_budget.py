"""Peak memory of `streammn learn` against `--memory-mb`: is the process within budget + floor?

``--memory-mb`` bounds a DTSL run above a fixed floor (streammn.trees.budget). This runs the
command on a planted chain stream (benchmarks/stream.py's generator) of 600,000 binary rows at
100 and 300 variables, at budgets of 64, 256 and 1024 MB, with a snapshot every 100,000 rows,
and records the learning process's peak RSS (its ``VmHWM``), the peak of
its forked snapshot writers (``RUSAGE_CHILDREN``: the largest writer's, shared pages included),
the peak of the whole process tree (:class:`TreeMemory`: the learning process's RSS plus its
writers' private pages, sampled every 10 ms), and rows/s. The floor is the peak of the same command on the same stream at ``--memory-mb 1``,
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
import threading
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


class TreeMemory:
    """The peak memory of a process and its children together, sampled every ``interval``
    seconds on a thread: the process's RSS plus each child's private pages (a forked snapshot
    writer shares the rest with its parent; a page either writes after the fork becomes
    private to one of them, so nothing is counted twice). ``peak_mb`` after :meth:`stop`."""

    def __init__(self, pid: int, interval: float = 0.01):
        self.pid, self.interval, self.peak_mb = pid, interval, 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        return self.peak_mb

    def _sample(self) -> None:
        while not self._done.wait(self.interval):
            try:
                total = _rollup_kb(self.pid, ("Rss",))
            except OSError:  # the process has ended
                return
            for child in _children(self.pid):
                try:
                    total += _rollup_kb(child, ("Private_Clean", "Private_Dirty"))
                except OSError:  # the writer has just exited
                    pass
            self.peak_mb = max(self.peak_mb, total / 1024)


def _rollup_kb(pid: int, fields: tuple[str, ...]) -> int:
    lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    return sum(int(line.split()[1]) for line in lines if line.split(":")[0] in fields)


def _children(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            children += [int(c) for c in task.read_text().split()]
        except OSError:
            pass
    return children


def peak_run(data: Path, out: Path, memory_mb: float, every: int) -> dict:
    """One `streammn learn` run: its peak RSS, its writers' peak, the process tree's, seconds."""
    cmd = [sys.executable, "-c", PEAK_SCRIPT, "learn", str(data), "--out", str(out)]
    cmd += ["--memory-mb", str(memory_mb), "--every-rows", str(every), "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tree = TreeMemory(proc.pid)
    _, stderr = proc.communicate()
    seconds = time.perf_counter() - t0
    tree_mb = tree.stop()
    if proc.returncode != 0:
        raise RuntimeError(stderr[-3000:])
    line = next(x for x in stderr.splitlines() if x.startswith("PEAK "))
    self_kb, child_kb = (int(v) for v in line.split()[1:])
    return {
        "peak_rss_mb": self_kb / 1024,
        "writer_peak_rss_mb": child_kb / 1024,
        "tree_peak_mb": tree_mb,
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
                    tree_floor_mb=floor["tree_peak_mb"],
                    tree_within=run["tree_peak_mb"] <= mb + floor["tree_peak_mb"],
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
        "Tree: the learning process's RSS plus its forked writers' private pages, sampled "
        "every 10 ms (what the process and its writers hold together); its floor is the same "
        "measure at `--memory-mb 1`.",
        "",
        "MB are MiB (2**20 bytes), as `--memory-mb` counts them. Before `--memory-mb` covered "
        "the process (it bounded the forest, replay buffer and split statistics only), the "
        "300-variable runs peaked at 716, 742 and 786 MB at 64, 256 and 1024 (the same "
        "stream, `/usr/bin/time`).",
        "",
        "What the floor is made of (300 variables, RSS stepped through a run): imports about "
        "165 MB (Python and numpy 29, pyarrow 42, numba and llvmlite 62, scipy 16: numba loads "
        "scipy.linalg for its BLAS bindings, and scipy.special, for the significance test's "
        "chi-square quantile, adds 2; the chosen learner's modules the rest: `learn` imports "
        "no other learner's module, 3 MB less at 300 variables; pandas "
        "(37 MB, which pyarrow's `to_numpy` imports on its first call) is not loaded: the "
        "Parquet path reads the Arrow buffers, streammn.connectors.arrow.plain_values; nor is "
        "scipy.sparse, which ET imports where it builds its spanning tree: floor 321 -> 316 MB "
        "at 300 variables); the numba kernels loaded, those of learning and those the snapshot "
        "writer runs (loaded in this process beside the first batches), about 80; Arrow's "
        "Parquet reader buffers, about 30 at 300 columns of 65,536-row groups (in Arrow's jemalloc "
        "pool, which streammn makes the default where it is first to load pyarrow: mimalloc, "
        "Arrow's own default, kept 6-8 MB more at 300 variables and decoded 15% slower; the "
        "system allocator kept the least but decoded 15-30% slower); the "
        "least shares (FTRL state 6.5 MB at 300 variables, 1,024-row batches), about 15.",
        "",
        "| variables | --memory-mb | floor MB | peak RSS MB | budget + floor | within | "
        "writer peak MB | tree floor MB | tree peak MB | tree within | rows/s |",
        "|---:|---:|---:|---:|---:|:---:|---:|---:|---:|:---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['n_vars']} | {r['memory_mb']} | {r['floor_mb']:.0f} | "
            f"{r['peak_rss_mb']:.0f} | {r['memory_mb'] + r['floor_mb']:.0f} | "
            f"{'yes' if r['within'] else 'no'} | {r['writer_peak_rss_mb']:.0f} | "
            f"{r['tree_floor_mb']:.0f} | {r['tree_peak_mb']:.0f} | "
            f"{'yes' if r['tree_within'] else 'no'} | "
            f"{r['rows_per_s']:,.0f} |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
