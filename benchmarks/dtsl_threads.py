"""One-pass DTSL on one thread and on every core, on an idle machine and on a busy one.

Why: ``n_threads='auto'`` (every core) is DTSL's default. A parallel step waits for the slowest
of its threads, so on a machine where other jobs hold cores, more threads could be slower than
one. This benchmark measures that instead of assuming it: a 1M-row pass at the defaults over a
planted stream of 100 binary variables, on one thread and on numba's thread count, first on an
idle machine and then with one and with as many busy-looping processes as there are cores
running alongside (pure-Python loops: CPU-bound jobs that take a core each). Thread counts are
interleaved, each timed ``--reps`` times; the medians of the wall times are reported.
Results go to ``benchmarks/results/dtsl_threads.json`` and ``.md``.

    PYTHONPATH=. python -m benchmarks.dtsl_threads [--rows 1000000] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

import numba

from benchmarks.convergence import BATCH
from benchmarks.dtsl import every_step_parallel, one_pass, planted_rows, write_results

HERE = os.path.dirname(os.path.abspath(__file__))
BUSY_LOOP = "while True: pass"


def timed_pass(rows, schema, n_threads: int) -> float:
    """Wall seconds of one pass of a default DTSL on ``n_threads`` threads over ``rows``."""
    from streammn.dtsl import DTSL

    model = DTSL(schema, n_threads=n_threads, cpd="tree")
    start = time.perf_counter()
    one_pass(model, rows)
    return time.perf_counter() - start


def measure(n_rows: int, reps: int) -> dict:
    from streammn.dtsl import DTSL
    from streammn.schema import Schema

    schema = Schema.from_cardinalities([2] * 100)
    rows = planted_rows(n_rows, 100, 2)
    cores = numba.get_num_threads()
    thread_counts = (1, cores)
    with every_step_parallel():  # load the compiled kernels, the parallel ones too
        DTSL(schema, n_threads=cores, cpd="tree").fit(rows[:2000])
    # untimed: the process's first touch of the memory it grows
    one_pass(DTSL(schema, cpd="tree"), rows)
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "n_rows": n_rows,
        "reps": reps,
        "conditions": [],
    }
    for others in sorted({0, 1, cores}):
        busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(others)]
        try:
            time.sleep(0.5 if busy else 0.0)
            walls = {n: [] for n in thread_counts}
            for _ in range(reps):
                for n in thread_counts:
                    walls[n].append(timed_pass(rows, schema, n))
        finally:
            for proc in busy:
                proc.kill()
                proc.wait()
        median = {n: statistics.median(w) for n, w in walls.items()}
        results["conditions"].append(
            {
                "other_jobs": others,
                "walls": {str(n): w for n, w in walls.items()},
                "rows_per_s": {str(n): n_rows / median[n] for n in thread_counts},
                "speedup": median[1] / median[cores],
            }
        )
        print(
            f"{others} other jobs: "
            + ", ".join(f"{n} thread(s) {n_rows / median[n]:,.0f} rows/s" for n in thread_counts)
            + f", speedup {median[1] / median[cores]:.2f}x",
            flush=True,
        )
    return results


def markdown(results: dict) -> str:
    lines = [
        "# One-pass DTSL: one thread vs every core, idle and busy machine\n",
        f"Machine: {results['machine']}. Defaults, planted stream of "
        f"{results['n_rows']:,} rows x 100 binary variables, batches of {BATCH:,}; "
        f"median wall time of {results['reps']} interleaved runs per thread count. "
        "Other jobs: pure-Python busy loops, one core each.\n",
        "| other jobs | threads | rows/s (median) | runs (wall s) | speedup over 1 thread |",
        "|---|---|---|---|---|",
    ]
    for c in results["conditions"]:
        for n, rate in c["rows_per_s"].items():
            walls = ", ".join(f"{w:.2f}" for w in c["walls"][n])
            speedup = "" if n == "1" else f"{c['speedup']:.2f}x"
            lines.append(f"| {c['other_jobs']} | {n} | {rate:,.0f} | {walls} | {speedup} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=3, help="timed passes per thread count")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    args = p.parse_args(argv)
    results = measure(args.rows, args.reps)
    write_results(args.out, "dtsl_threads", results, markdown(results))


if __name__ == "__main__":
    main()
