"""End-to-end streaming benchmark: ``streammn learn`` with snapshots, against the same run with
only the final snapshot and the learner alone (issue 40).

Writes Parquet streams over ``--vars`` (100) binary variables from a structured process (chains
of noisy copies, so trees have something to find) and runs ``streammn learn`` at its defaults,
each run a process of its own:

- the targets' ratios: 3M rows with a snapshot every 1M, and 1M rows with a snapshot every
  100k, each against the same file with only the final snapshot, run alternately ``--repeats``
  times (the median ratio of the pairs' rates);
- ``--rows`` (10M) rows with a snapshot every 1M rows (a line per snapshot) and every 100k
  (means), next to the learner's ``partial_fit`` alone on the same file: per snapshot the time
  it took from the learning thread (the cut, a fork; any wait for the previous snapshot), the
  writer's convert (weights included) and write seconds, the bytes written and shared with the
  previous snapshot, peak RSS and size.

Results: ``benchmarks/results/stream.json`` and ``stream.md``. Run: ``python
benchmarks/stream.py [--rows N] [--repeats K]``. The memory budget's figures are
``benchmarks/memory_budget.py``'s.
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

from streammn.connectors.arrow import schema_to_metadata  # noqa: E402
from streammn import Schema, read_snapshot  # noqa: E402
from streammn.stream.snapshot import list_snapshots  # noqa: E402
from streammn.stream.publishing import IN_PLACE_UNDER  # noqa: E402


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


def learn(data: Path, out: Path, every: int | None) -> float:
    """Wall seconds of ``streammn learn data --out out`` at the defaults, a snapshot every
    ``every`` rows (None: only the final one)."""
    cmd = [sys.executable, "-m", "streammn.cli", "learn", str(data), "--out", str(out)]
    cmd += ["--keep", "1000", "--quiet"]
    if every:
        cmd += ["--every-rows", str(every)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def learner_alone(data: Path) -> float:
    """Rows/s of the one-pass learner's ``partial_fit`` over the file's batches, in a process of
    its own after a warm-up (no engine, no snapshots, no prequential scoring)."""
    script = f"""
import time
from streammn.connectors.parquet import ParquetSource
from streammn import DTSL
source = ParquetSource({str(data)!r})
learner = DTSL(source.schema)
batches = [b.rows for b in source]
learner.partial_fit(batches[0][:20000])
learner = DTSL(source.schema)
t0 = time.perf_counter()
for rows in batches:
    learner.partial_fit(rows)
print(sum(len(r) for r in batches) / (time.perf_counter() - t0))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True)
    return float(done.stdout.decode().split()[-1])


def run(data: Path, n_rows: int, every: int, n_vars: int) -> dict:
    """One run with a snapshot every ``every`` rows: rows/s, and per snapshot what it cost the
    learning thread and the writer, what it wrote and shared, and the memory."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "snaps"
        wall = learn(data, out, every)
        snaps = [read_snapshot(p) for p in list_snapshots(out)]
        manifests = [s.manifest for s in snaps]
        history = manifests[-1]["engine"]["history"]
        sizes = [sum(f["size"] for f in m["files"].values()) for m in manifests]
        per_snapshot = [
            {
                "rows_seen": m["rows_seen"],
                "peak_rss_mb": m["peak_rss_mb"],
                "convert_seconds": m["timings"]["convert_seconds"],
                "weights_seconds": m["timings"]["weights_seconds"],
                "write_seconds": h.get("write_seconds"),
                "pause_seconds": h.get("pause_seconds"),
                "in_place": h.get("in_place"),
                "wait_seconds": h.get("wait_seconds"),
                "latency_rows": h.get("latency_rows"),
                "bytes_written": h.get("bytes_written"),
                "bytes_shared": h.get("bytes_shared"),
                "n_features": m["model"]["n_features"],
                "bytes": size,
                "prequential_pll": m["scores"]["prequential_pll"],
            }
            for m, h, size in zip(manifests, history[-len(manifests) :], sizes)
        ]
    periodic = per_snapshot[:-1]  # the last one is the end's, with its full weight search

    def mean(key):
        values = [s[key] for s in periodic if s[key] is not None]
        return float(np.mean(values)) if values else None

    return {
        "n_rows": n_rows,
        "n_vars": n_vars,
        "every_rows": every,
        "wall_seconds": wall,
        "rows_per_s_end_to_end": n_rows / wall,
        "mean_convert_seconds": mean("convert_seconds"),
        "mean_weights_seconds": mean("weights_seconds"),
        "mean_write_seconds": mean("write_seconds"),
        "max_pause_seconds": max((s["pause_seconds"] or 0) for s in periodic) if periodic else None,
        "mean_pause_seconds": mean("pause_seconds"),
        "mean_wait_seconds": mean("wait_seconds"),
        "mean_bytes_written": mean("bytes_written"),
        "mean_bytes_shared": mean("bytes_shared"),
        "in_place": sum(bool(s["in_place"]) for s in periodic),
        "peak_rss_mb_first_snapshot": per_snapshot[0]["peak_rss_mb"],
        "peak_rss_mb_last_snapshot": per_snapshot[-1]["peak_rss_mb"],
        "last_snapshot_bytes": per_snapshot[-1]["bytes"],
        "snapshots": per_snapshot,
    }


def ratio(data: Path, n_rows: int, every: int, repeats: int) -> dict:
    """End-to-end rate with a snapshot every ``every`` rows over the rate with only the final
    snapshot, the two run alternately ``repeats`` times; the median ratio of the pairs."""
    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(repeats):
            final = learn(data, Path(tmp) / f"final{k}", None)
            periodic = learn(data, Path(tmp) / f"periodic{k}", every)
            pairs.append((final, periodic))
    ratios = [final / periodic for final, periodic in pairs]
    return {
        "n_rows": n_rows,
        "every_rows": every,
        "final_only_seconds": [f for f, _ in pairs],
        "periodic_seconds": [p for _, p in pairs],
        "ratios": ratios,
        "median_ratio": float(np.median(ratios)),
    }


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average_1min_at_start": os.getloadavg()[0],
    }


def _mb(x) -> str:
    return "" if x is None else f"{x / 1e6:.2f}"


def _s(x, digits=2) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def snapshot_section(r: dict, alone: float, every_line: bool) -> list[str]:
    lines = [
        f"### {r['n_rows']:,} rows, a snapshot every {r['every_rows']:,} rows",
        "",
        f"- end to end: {r['wall_seconds']:.1f} s, **{r['rows_per_s_end_to_end']:,.0f} "
        f"rows/s** (process start and every snapshot included); the learner alone on the same "
        f"file: {alone:,.0f} rows/s",
        f"- {r['in_place']} of {len(r['snapshots']) - 1} periodic snapshots written in place "
        f"(on the learning thread, the last one having taken under {IN_PLACE_UNDER} s), the "
        f"others by a "
        f"forked child; per forked snapshot, on the learning thread: the cut (fork) "
        f"{_s(r['mean_pause_seconds'], 3)} s mean, {_s(r['max_pause_seconds'], 3)} s max; "
        f"waiting for the previous snapshot {_s(r['mean_wait_seconds'], 3)} s mean",
        f"- per periodic snapshot, in place or in the child: convert "
        f"{_s(r['mean_convert_seconds'])} s (of which the weights' probe and fit "
        f"{_s(r['mean_weights_seconds'])} s), write {_s(r['mean_write_seconds'])} s; "
        f"{_mb(r['mean_bytes_written'])} MB written and {_mb(r['mean_bytes_shared'])} MB "
        f"shared with the previous snapshot (means)",
        f"- peak RSS of the learning process: {r['peak_rss_mb_first_snapshot']:.0f} MB at "
        f"the first snapshot, {r['peak_rss_mb_last_snapshot']:.0f} MB at the last; last "
        f"snapshot {r['last_snapshot_bytes'] / 1e6:.1f} MB",
        "",
    ]
    if not every_line:
        return lines
    lines += [
        "| rows seen | written | peak RSS MB | cut s | waited s | convert s | weights s | "
        "write s | MB written | MB shared | features | snapshot MB | prequential PLL |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in r["snapshots"]:
        lines.append(
            f"| {s['rows_seen']:,} | {_written(s.get('in_place'))} | {s['peak_rss_mb']:.0f} | "
            f"{_s(s['pause_seconds'], 3)} | "
            f"{_s(s['wait_seconds'], 3)} | {s['convert_seconds']:.2f} | "
            f"{s['weights_seconds']:.2f} | {_s(s['write_seconds'])} | "
            f"{_mb(s['bytes_written'])} | {_mb(s['bytes_shared'])} | {s['n_features']:,} | "
            f"{s['bytes'] / 1e6:.1f} | {s['prequential_pll']:.4f} |"
        )
    return lines + [""]


def _written(in_place: bool | None) -> str:
    return {True: "in place", False: "forked", None: "end"}[in_place]


def markdown(result: dict, m: dict) -> str:
    n_vars = result["n_vars"]
    lines = [
        "# Streaming benchmark: `streammn learn` with snapshots (issue 40)",
        "",
        f"Machine: {m['platform']}, {m['cpu_count']} CPUs, Python {m['python']} "
        f"(load average {m['load_average_1min_at_start']:.2f} at start; a machine shared "
        f"with other jobs).",
        "",
        f"Parquet streams of {n_vars} binary variables (chains of noisy copies), `streammn "
        f"learn` at its defaults (one-pass DTSL, refined weights, JSON + Libra .mn + UAI + "
        f"checkpoint per snapshot), in a process of its own; wall time includes process start.",
        "",
        "## Targets: snapshot cost against the final snapshot only",
        "",
        "| stream | snapshot every | final only (s) | with snapshots (s) | rate ratio "
        "(median) | target |",
        "|---|---:|---|---|---:|---:|",
    ]
    for t, target in zip(result["ratios"], (0.9, 0.85)):
        final = ", ".join(f"{x:.2f}" for x in t["final_only_seconds"])
        periodic = ", ".join(f"{x:.2f}" for x in t["periodic_seconds"])
        met = "met" if t["median_ratio"] >= target else "not met"
        lines.append(
            f"| {t['n_rows']:,} rows | {t['every_rows']:,} | {final} | {periodic} | "
            f"{t['median_ratio']:.3f} | {target} ({met}) |"
        )
    lines += ["", "## Long streams", ""]
    for r, every_line in zip(result["long"], (True, False)):
        lines += snapshot_section(r, result["learner_alone"], every_line)
    lines += ["## Notes", ""] + [f"- {note}" for note in NOTES]
    return "\n".join(lines) + "\n"


NOTES = [
    "Where a forked snapshot's cost goes (1M rows, a snapshot every 100k rows, every one forked, "
    "rusage of the run against the final snapshot only): the cut itself, a fork of the ~500 MB "
    "learning process, 0.02 s; then about 21,000 more page faults in the learning process per "
    "snapshot, about 0.24 s of system time: after a fork every page the learner writes (its "
    "heap, above all: arrays made for every batch) is write-protected, and while the child "
    "lives each write copies the page (about 6 us a fault on this machine; after the child's "
    "exit a fault only takes the page back). The child's own work is about 0.1 s of CPU on the "
    "two cores the learner's threads use. Written in place the same snapshot costs its work "
    "alone, about 0.05-0.08 s here, so the engine writes a periodic snapshot in place when the "
    "last one took under 0.25 s (`--in-place-under`), and forks the costly ones, which would "
    "otherwise stall learning for their whole length.",
    "A snapshot whose weight fit turns out long is written in place once (it went by the last "
    "one's time), stalling learning for that long: above, the one at 8M rows (1.2 s: the "
    "budget the rows learned had earned and no fit had spent yet); the next one is forked. The "
    "periodic fits earn 0.1 sample-row evaluations per row learned (0.5 before: an evaluation "
    "costs about 8 us a row here, so a snapshot every 100k rows could spend more on its fit "
    "than learning the rows took).",
    "Bytes: a snapshot is the model files (0.15 MB at 1.4k features) and the checkpoint "
    "(2.9 MB): the replay buffer of the last 100,000 rows and the two row samples, stored as "
    "bits. The replay buffer is a ring rewritten whole every 100,000 rows and the samples change "
    "with every row, so nothing of a DTSL snapshot is shared with the one before it; files that "
    "do not change (a grafting model between its updates, a repeated weight state) are "
    "hard-linked instead of written.",
    "Conversion: DN2MN's closed form itself costs 0.01-0.03 s here; the rest of 'convert' is the "
    "published weights' budgeted probe and fit.",
    "This machine ran the learner alone at 1.4-1.5M rows/s today where it ran at 2.26M on the day "
    "of the last committed run: compare figures from the same run (the targets' ratios are). The "
    "ratios move by a few hundredths between runs: an hour earlier, before Arrow's jemalloc pool, "
    "the same benchmark gave 0.989 and 0.885.",
]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the long stream")
    parser.add_argument("--vars", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3, help="pairs of runs per ratio")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument(
        "--markdown", action="store_true", help="only rewrite the .md from the JSON"
    )
    args = parser.parse_args(argv)
    if args.markdown:
        saved = json.loads((args.out_dir / "stream.json").read_text())
        (args.out_dir / "stream.md").write_text(markdown(saved["stream"], saved["machine"]))
        return saved["stream"]
    m = machine()
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for n_rows in (1_000_000, 3_000_000, args.rows):
            files[n_rows] = Path(tmp) / f"stream{n_rows}.parquet"
            write_stream(files[n_rows], n_rows, args.vars, args.seed)
        result = {
            "n_vars": args.vars,
            "ratios": [
                ratio(files[3_000_000], 3_000_000, 1_000_000, args.repeats),
                ratio(files[1_000_000], 1_000_000, 100_000, args.repeats),
            ],
            "learner_alone": learner_alone(files[args.rows]),
            "long": [
                run(files[args.rows], args.rows, every, args.vars) for every in (1_000_000, 100_000)
            ],
        }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "stream.json").write_text(
        json.dumps({"machine": m, "stream": result}, indent=2) + "\n"
    )
    text = markdown(result, m)
    (args.out_dir / "stream.md").write_text(text)
    print(text)
    return result


if __name__ == "__main__":
    main()
