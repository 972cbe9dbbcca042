"""End-to-end time of ``streammn learn`` in two checkouts of the project, on the same stream.

For a change that should not move performance (a refactoring), run the command of both
checkouts on one planted stream (``benchmarks.stream.write_stream``: binary variables,
Parquet), alternating old and new run by run so that the machine's drift hits both alike, and
report the median wall time of each::

    git worktree add /tmp/old <commit>
    PYTHONPATH=. python -m benchmarks.compare_checkouts --old /tmp/old --new . \\
        --out benchmarks/results/seams_pass.md

Each run is a fresh process (``python -m streammn.cli learn``, its imports and kernel loads
included) at the defaults plus ``--every-rows``; the model files of both are compared, so the
table also says whether the two checkouts published the same model.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.stream import write_stream


def _run(checkout: Path, data: Path, out: Path, every: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
    cmd = [sys.executable, "-m", "streammn.cli", "learn", str(data), "--out", str(out)]
    t0 = time.perf_counter()
    subprocess.run(
        cmd + ["--every-rows", str(every), "--quiet"], env=env, check=True, capture_output=True
    )
    return time.perf_counter() - t0


def _model_hash(out: Path) -> str:
    latest = (out / "LATEST").read_text().strip()
    return hashlib.sha256((out / latest / "model.json").read_bytes()).hexdigest()[:16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="the old checkout")
    parser.add_argument("--new", type=Path, required=True, help="the new checkout")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--vars", type=int, default=100)
    parser.add_argument("--every-rows", type=int, default=250_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True, help="Markdown results file")
    args = parser.parse_args()
    times = {"old": [], "new": []}
    hashes = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "stream.parquet"
        write_stream(data, args.rows, args.vars, 0)
        for which in ("old", "new"):  # load each checkout's kernels once, untimed
            _run(getattr(args, which), data, Path(tmp) / f"warm-{which}", args.every_rows)
        for k in range(args.repeats):
            for which in ("old", "new"):
                out = Path(tmp) / f"{which}-{k}"
                times[which].append(_run(getattr(args, which), data, out, args.every_rows))
                hashes[which] = _model_hash(out)
                print(f"{which} run {k}: {times[which][-1]:.2f} s", file=sys.stderr)
    old, new = statistics.median(times["old"]), statistics.median(times["new"])
    lines = [
        f"# streammn learn: {args.old} vs {args.new}",
        "",
        f"{args.rows:,} rows x {args.vars} binary variables (Parquet), defaults, a snapshot "
        f"every {args.every_rows:,} rows; median of {args.repeats} runs each, alternated, "
        "a fresh process per run (imports and kernel loads included).",
        "",
        "| checkout | median s | rows/s | runs (s) | model.json sha256 |",
        "|---|---:|---:|---|---|",
    ]
    for which, median in (("old", old), ("new", new)):
        runs = ", ".join(f"{t:.2f}" for t in times[which])
        lines.append(
            f"| {which} ({getattr(args, which)}) | {median:.2f} | "
            f"{args.rows / median:,.0f} | {runs} | {hashes[which]} |"
        )
    lines += ["", f"new / old: {new / old:.3f}; same model: {hashes['old'] == hashes['new']}"]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
