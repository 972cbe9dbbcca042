"""Throughput of the sufficient-statistic stores against the BLAS floor.

Measures rows/s of :meth:`streammn.stats.PairCounts.update` on binary data (default: 100
variables, 1M rows, batches of 65536) against plain float32 ``X.T @ X`` on the same matrix,
already converted to float32, in the same batches and the same run: the floor a one-GEMM design
is measured against. BLAS runs on one thread so the comparison is about work, not cores.

It also measures Parquet reading: rows/s and MB/s of :class:`streammn.connectors.ParquetSource` (uint8
columns, snappy) against pyarrow's ``iter_batches`` alone on the same file, which yields columns
and does no validation or row layout: the floor for a source that must deliver validated rows.

Each measurement is one function returning a dict; :func:`main` collects them into
``benchmarks/results/stats_throughput.json`` and a Markdown table next to it, together with the
machine they ran on. Run: ``python benchmarks/stats_throughput.py``.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy is imported: one BLAS thread

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import tempfile  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from streammn.connectors import ParquetSource, write_parquet  # noqa: E402

from streammn import Schema  # noqa: E402
from streammn.stats import PairCounts  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """Where the figures come from."""
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "blas_threads": 1,
        "load_average_1min_at_start": os.getloadavg()[0],
    }


def binary_rows(n_rows: int, n_vars: int, seed: int) -> np.ndarray:
    """Random binary rows with per-variable probabilities, as the uint8 matrix a source yields."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, size=n_vars)
    return np.ascontiguousarray((rng.random((n_rows, n_vars)) < p).astype(np.uint8))


def _timed(run) -> float:
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def measure_pair_counts(rows: np.ndarray, batch_size: int) -> tuple[float, PairCounts]:
    """Seconds for PairCounts.update over the matrix in batches (validation included)."""
    schema = Schema.binary(rows.shape[1])
    batches = [rows[b : b + batch_size] for b in range(0, rows.shape[0], batch_size)]
    store = PairCounts(schema)

    def run():
        for batch in batches:
            store.update(batch)

    return _timed(run), store


def measure_xtx(rows: np.ndarray, batch_size: int) -> tuple[float, np.ndarray]:
    """Seconds for float32 ``X.T @ X`` on the same batches, already converted to float32."""
    batches = [
        np.ascontiguousarray(rows[b : b + batch_size], dtype=np.float32)
        for b in range(0, rows.shape[0], batch_size)
    ]
    total = np.zeros((rows.shape[1], rows.shape[1]), dtype=np.float64)

    def run():
        for x in batches:
            total.__iadd__(x.T @ x)

    return _timed(run), total


def pair_counts_section(n_rows: int, n_vars: int, batch_size: int, repeats: int, seed: int) -> dict:
    """PairCounts against the X.T @ X floor on the same data; checks both agree.

    The two measurements alternate, ``repeats`` rounds, and the best round of each counts, so
    that load from other processes on a shared machine hits both alike.
    """
    rows = binary_rows(n_rows, n_vars, seed)
    PairCounts(Schema.binary(n_vars)).update(rows[:16])  # load the numba kernels untimed
    times = {"PairCounts.update": [], "float32 X.T @ X": []}
    for _ in range(repeats):
        seconds, gram = measure_xtx(rows, batch_size)
        times["float32 X.T @ X"].append(seconds)
        seconds, store = measure_pair_counts(rows, batch_size)
        times["PairCounts.update"].append(seconds)
    both_one = np.array(
        [
            [store.table(i, j)[1, 1] if i != j else store.counts(i)[1] for j in range(n_vars)]
            for i in range(n_vars)
        ]
    )
    if not np.array_equal(both_one, gram.astype(np.int64)):
        raise AssertionError("PairCounts and X.T @ X disagree on the (1, 1) counts")
    measurements = [
        {"name": name, "seconds": ts, "best_seconds": min(ts), "rows_per_s": n_rows / min(ts)}
        for name, ts in times.items()
    ]
    ratio = min(times["PairCounts.update"]) / min(times["float32 X.T @ X"])
    return {
        "n_rows": n_rows,
        "n_vars": n_vars,
        "batch_size": batch_size,
        "repeats": repeats,
        "measurements": measurements,
        "slowdown_vs_xtx": ratio,
        "target": "<= 2.0",
        "meets_target": ratio <= 2.0,
    }


def parquet_section(n_rows: int, n_vars: int, batch_size: int, repeats: int, seed: int) -> dict:
    """ParquetSource against pyarrow's iter_batches on one snappy file of uint8 columns."""
    rows = binary_rows(n_rows, n_vars, seed)
    schema = Schema.binary(n_vars)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.parquet")
        write_parquet(path, rows, schema, row_group_size=batch_size)
        size_mb = os.path.getsize(path) / 1e6
        del rows

        def raw():
            n = 0
            for rb in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
                n += rb.num_rows
            assert n == n_rows

        def ours():
            n = 0
            for batch in ParquetSource(path, batch_size=batch_size):
                n += len(batch)
            assert n == n_rows

        ours()  # load the numba kernels untimed
        times = {"pyarrow iter_batches": [], "ParquetSource": []}
        for _ in range(repeats):
            times["pyarrow iter_batches"].append(_timed(raw))
            times["ParquetSource"].append(_timed(ours))
    measurements = [
        {
            "name": name,
            "seconds": ts,
            "best_seconds": min(ts),
            "rows_per_s": n_rows / min(ts),
            "mb_per_s": size_mb / min(ts),
        }
        for name, ts in times.items()
    ]
    ratio = min(times["ParquetSource"]) / min(times["pyarrow iter_batches"])
    return {
        "n_rows": n_rows,
        "n_vars": n_vars,
        "batch_size": batch_size,
        "repeats": repeats,
        "file_mb": size_mb,
        "pyarrow": pyarrow.__version__,
        "measurements": measurements,
        "slowdown_vs_pyarrow": ratio,
        "target": "<= 1.3",
        "meets_target": ratio <= 1.3,
    }


def markdown(results: dict) -> str:
    m = results["machine"]
    lines = [
        "# stats throughput",
        "",
        f"Machine: {m['platform']}, {m['cpu_count']} CPUs, Python {m['python']}, "
        f"numpy {m['numpy']}, numba {m['numba']}, one BLAS thread "
        f"(load average {m['load_average_1min_at_start']:.2f} at start: a shared machine).",
        "",
    ]
    pc = results["pair_counts"]
    lines += [
        f"## PairCounts.update: {pc['n_vars']} binary variables, {pc['n_rows']:,} rows, "
        f"batches of {pc['batch_size']} (best of {pc['repeats']})",
        "",
        "| measurement | best seconds | rows/s |",
        "|---|---:|---:|",
    ]
    for meas in pc["measurements"]:
        lines.append(f"| {meas['name']} | {meas['best_seconds']:.3f} | {meas['rows_per_s']:,.0f} |")
    lines += [
        "",
        f"PairCounts takes {pc['slowdown_vs_xtx']:.2f}x the time of X.T @ X "
        f"(target {pc['target']}: {'met' if pc['meets_target'] else 'missed'}).",
        "",
    ]
    pq_ = results.get("parquet")
    if pq_:
        lines += [
            f"## Parquet read: {pq_['n_vars']} uint8 columns, {pq_['n_rows']:,} rows, "
            f"{pq_['file_mb']:.1f} MB snappy, batches of {pq_['batch_size']} "
            f"(best of {pq_['repeats']})",
            "",
            "| measurement | best seconds | rows/s | MB/s |",
            "|---|---:|---:|---:|",
        ]
        for meas in pq_["measurements"]:
            lines.append(
                f"| {meas['name']} | {meas['best_seconds']:.3f} | "
                f"{meas['rows_per_s']:,.0f} | {meas['mb_per_s']:.1f} |"
            )
        lines += [
            "",
            f"ParquetSource takes {pq_['slowdown_vs_pyarrow']:.2f}x the time of "
            f"pyarrow alone (target {pq_['target']}: "
            f"{'met' if pq_['meets_target'] else 'missed'}).",
            "",
        ]
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--vars", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=65536)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--parquet-rows", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    results = {
        "machine": machine(),
        "pair_counts": pair_counts_section(
            args.rows, args.vars, args.batch_size, args.repeats, args.seed
        ),
        "parquet": parquet_section(
            args.parquet_rows, args.vars, args.batch_size, args.repeats, args.seed
        ),
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "stats_throughput.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out_dir / "stats_throughput.md").write_text(markdown(results))
    print(markdown(results))
    return results


if __name__ == "__main__":
    main()
