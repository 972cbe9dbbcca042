"""End-to-end streaming benchmark: ``streammn learn`` on a long synthetic stream with snapshots.

Generates a Parquet file of ``--rows`` rows (default 10M) over 100 binary variables from a
structured generative process (chains of noisy copies, so trees have something to find), runs
``streammn learn FILE --out DIR --every-rows 1M`` in a subprocess, and reports rows/s end to end,
per snapshot the time taken from the learning thread (the cut: a fork; and any wait for the
previous snapshot) and the convert and write time in the background writer, peak RSS of the
learning process at the first and last snapshot (memory must not grow with stream length), and
snapshot size. Results: ``benchmarks/results/stream.json`` and
``stream.md``. Run: ``python benchmarks/stream.py [--rows N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))

from connectors.arrow import schema_to_metadata  # noqa: E402
from streammn import Schema, read_snapshot  # noqa: E402
from streammn.stream.snapshot import list_snapshots  # noqa: E402


def write_stream(path: Path, n_rows: int, n_vars: int, seed: int, chunk: int = 1_000_000):
    """Chains of 10 variables: each copies its predecessor, flipped with probability 0.15."""
    rng = np.random.default_rng(seed)
    heads = rng.uniform(0.2, 0.8, size=n_vars)  # one stationary distribution for the stream
    schema = Schema.binary(n_vars)
    arrow_schema = pa.schema(
        [(v.name, pa.uint8()) for v in schema], metadata=schema_to_metadata(schema)
    )
    with pq.ParquetWriter(path, arrow_schema, compression="snappy") as writer:
        for start in range(0, n_rows, chunk):
            m = min(chunk, n_rows - start)
            x = np.empty((m, n_vars), dtype=np.uint8)
            for j in range(n_vars):
                if j % 10 == 0:
                    x[:, j] = rng.random(m) < heads[j]
                else:
                    x[:, j] = x[:, j - 1] ^ (rng.random(m) < 0.15)
            table = pa.table({v.name: x[:, j] for j, v in enumerate(schema)}, schema=arrow_schema)
            writer.write_table(table, row_group_size=65536)


def run(n_rows: int, every: int, n_vars: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "stream.parquet", Path(tmp) / "snaps"
        t0 = time.perf_counter()
        write_stream(data, n_rows, n_vars, seed)
        generate_seconds = time.perf_counter() - t0
        cmd = [
            sys.executable,
            "-m",
            "streammn.cli",
            "learn",
            str(data),
            "--out",
            str(out),
            "--every-rows",
            str(every),
            "--keep",
            "1000",
            "--quiet",
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        wall = time.perf_counter() - t0
        snaps = [read_snapshot(p) for p in list_snapshots(out)]
        manifests = [s.manifest for s in snaps]
        history = manifests[-1]["engine"]["history"]
        sizes = [sum(f["size"] for f in m["files"].values()) for m in manifests]
        per_snapshot = [
            {
                "rows_seen": m["rows_seen"],
                "peak_rss_mb": m["peak_rss_mb"],
                "convert_seconds": m["timings"]["convert_seconds"],
                "write_seconds": h.get("write_seconds"),
                "pause_seconds": h.get("pause_seconds"),
                "wait_seconds": h.get("wait_seconds"),
                "n_features": m["model"]["n_features"],
                "bytes": size,
                "prequential_pll": m["scores"]["prequential_pll"],
            }
            for m, h, size in zip(manifests, history[-len(manifests) :], sizes)
        ]
    writes = [s["write_seconds"] for s in per_snapshot if s["write_seconds"] is not None]
    converts = [s["convert_seconds"] for s in per_snapshot]
    pauses = [s["pause_seconds"] for s in per_snapshot if s["pause_seconds"] is not None]
    waits = [s["wait_seconds"] for s in per_snapshot if s["wait_seconds"] is not None]
    return {
        "n_rows": n_rows,
        "n_vars": n_vars,
        "every_rows": every,
        "generate_seconds": generate_seconds,
        "wall_seconds": wall,
        "rows_per_s_end_to_end": n_rows / wall,
        "mean_convert_seconds": float(np.mean(converts)),
        "mean_write_seconds": float(np.mean(writes)) if writes else None,
        "max_pause_seconds": max(pauses) if pauses else None,
        "mean_pause_seconds": float(np.mean(pauses)) if pauses else None,
        "mean_wait_seconds": float(np.mean(waits)) if waits else None,
        "rss_last_over_first": per_snapshot[-1]["peak_rss_mb"] / per_snapshot[0]["peak_rss_mb"],
        "peak_rss_mb_first_snapshot": per_snapshot[0]["peak_rss_mb"],
        "peak_rss_mb_last_snapshot": per_snapshot[-1]["peak_rss_mb"],
        "last_snapshot_bytes": per_snapshot[-1]["bytes"],
        "snapshots": per_snapshot,
    }


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average_1min_at_start": os.getloadavg()[0],
    }


def markdown(r: dict, m: dict) -> str:
    lines = [
        "# streaming benchmark: `streammn learn` with snapshots",
        "",
        f"Machine: {m['platform']}, {m['cpu_count']} CPUs, Python {m['python']} "
        f"(load average {m['load_average_1min_at_start']:.2f} at start; a machine shared "
        f"with other jobs).",
        "",
        f"{r['n_rows']:,} rows x {r['n_vars']} binary variables (Parquet), Hoeffding DTSL "
        f"defaults, a snapshot (DN2MN + JSON, Libra .mn, UAI, checkpoint) every "
        f"{r['every_rows']:,} rows.",
        "",
        f"- end to end: {r['wall_seconds']:.1f} s, **{r['rows_per_s_end_to_end']:,.0f} "
        f"rows/s** (process start and every snapshot included)",
        f"- per periodic snapshot, on the learning thread: the cut (fork) "
        f"{(r['mean_pause_seconds'] or 0):.3f} s mean, {(r['max_pause_seconds'] or 0):.3f} s "
        f"max; waiting for the previous snapshot {(r['mean_wait_seconds'] or 0):.3f} s mean",
        f"- per snapshot, in the background writer: convert "
        f"{r['mean_convert_seconds']:.2f} s, write {(r['mean_write_seconds'] or 0):.2f} s "
        f"(means)",
        f"- peak RSS of the learning process: {r['peak_rss_mb_first_snapshot']:.0f} MB at "
        f"the first snapshot, {r['peak_rss_mb_last_snapshot']:.0f} MB at the last "
        f"({r['rss_last_over_first']:.2f}x)",
        f"- last snapshot: {r['last_snapshot_bytes'] / 1e6:.1f} MB",
        "",
        "| rows seen | peak RSS MB | cut s | waited s | convert s | write s | features | "
        "snapshot MB | prequential PLL |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in r["snapshots"]:
        write = "" if s["write_seconds"] is None else f"{s['write_seconds']:.2f}"
        pause = "" if s["pause_seconds"] is None else f"{s['pause_seconds']:.3f}"
        wait = "" if s["wait_seconds"] is None else f"{s['wait_seconds']:.3f}"
        lines.append(
            f"| {s['rows_seen']:,} | {s['peak_rss_mb']:.0f} | {pause} | {wait} | "
            f"{s['convert_seconds']:.2f} | {write} | {s['n_features']:,} | "
            f"{s['bytes'] / 1e6:.1f} | {s['prequential_pll']:.4f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--every", type=int, default=1_000_000)
    parser.add_argument("--vars", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    m = machine()
    r = run(args.rows, args.every, args.vars, args.seed)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "stream.json").write_text(
        json.dumps({"machine": m, "stream": r}, indent=2) + "\n"
    )
    text = markdown(r, m)
    (args.out_dir / "stream.md").write_text(text)
    print(text)
    return r


if __name__ == "__main__":
    main()
