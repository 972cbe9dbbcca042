"""Fault-injection benchmark: what ``streammn learn`` survives, and what it refuses, and how.

1. **SIGKILL at random moments.** A 300k-row run (16 binary variables with planted pairs, a
   snapshot every 20,000 rows, 4096-row batches) from a ``.data`` file (9.6 MB, past pyarrow's
   4 MiB first block) and from Parquet, killed with SIGKILL at ``--trials`` moments drawn
   uniformly over an uninterrupted run's duration (its first 85%), then resumed with
   ``--resume``: each final
   model (``model.json``) and learner checkpoint must be byte-identical to the uninterrupted run.
2. **Disk full.** ENOSPC injected into the snapshot writer (the file-writing call raises
   ``OSError(ENOSPC)``) while the k-th snapshot is written, for several k and files: the run
   must exit 1 naming the directory and the intact previous snapshot, leave no partial
   snapshot, and resume to the uninterrupted run's model.
3. **The broker.** ``streammn learn redis://...`` following a live stream: a persistent
   redis-server (append-only file) is SIGKILLed and restarted on the same port mid-run, and the
   run must carry on and learn every row exactly once; a server restarted without its data must
   end the run with exit 4 after a snapshot of every row learned before.
4. **Bad inputs.** Every class of bad input and option the CLI documents, with its exit code,
   the first line of its message, and (for a bad row) whether every row before it was kept.

Results: ``benchmarks/results/faults.json`` and ``faults.md``. Run:
``python benchmarks/faults.py [--trials 20] [--rows 300000]``.
"""

from __future__ import annotations

import argparse
import errno
import gzip
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the tests' kill/resume and redis-server helpers

from streammn.connectors import write_parquet  # noqa: E402
from helpers.killresume import (
    ENV,
    kill_after,
    learn,
    learn_argv,
    learned_value_counts,
    outcome,
    same_counts,
    value_counts,
)
from streammn import Schema, read_snapshot
from streammn.stream import snapshot  # noqa: E402
from streammn.cli import main  # noqa: E402
from streammn.stream.snapshot import list_snapshots, resolve_snapshot  # noqa: E402

SCHEMA = Schema.binary(16)
# kill moments are drawn over the first 85% of an uninterrupted run's duration, so that on a
# loaded machine (runs vary in length) nearly every trial kills a run that has not ended
KILL_WINDOW = 0.85
OPTIONS = ["--batch-size", 4096, "--every-rows", 20000, "--formats", "json,mn,uai", "--keep", 3]


def planted_rows(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, (n, SCHEMA.n_vars))
    x[:, 8:] = x[:, :8] ^ (rng.random((n, 8)) < 0.15)
    return x.astype(np.uint8)


def write_data(path: Path, rows: np.ndarray) -> Path:
    np.savetxt(path, rows, fmt="%d", delimiter=",")
    return path


# 1. SIGKILL -------------------------------------------------------------------------------------
def sigkill_trials(source: Path, work: Path, trials: int, rng) -> dict:
    started = time.monotonic()
    whole_run = learn(source, work / "whole", *OPTIONS)
    duration = time.monotonic() - started
    assert whole_run.returncode == 0, whole_run.stderr
    whole = outcome(work / "whole")
    rows = []
    for t in range(trials):
        out = work / f"killed-{t}"
        delay = float(rng.uniform(0, KILL_WINDOW * duration))
        killed = kill_after(source, out, *OPTIONS, delay=delay)
        resumed = learn(source, out, *OPTIONS, "--resume")
        final = outcome(out) if resumed.returncode == 0 else None
        rows.append(
            {
                "kill_after_s": round(delay, 2),
                "finished_before_kill": killed["finished"],
                "rows_in_newest_snapshot_at_kill": killed["rows_at_kill"],
                "resume_exit": resumed.returncode,
                "resume_error": resumed.stderr.strip()[-300:] or None,
                "identical": final == whole,
            }
        )
    return {
        "source": source.name,
        "source_mb": round(source.stat().st_size / 2**20, 1),
        "uninterrupted_s": round(duration, 1),
        "rows": whole["rows_seen"],
        "trials": rows,
        "identical": sum(r["identical"] for r in rows),
    }


# 2. disk full -----------------------------------------------------------------------------------
def disk_full_trials(source: Path, work: Path) -> list[dict]:
    whole = outcome(work / "whole")
    real = snapshot._write_durably
    out_rows = []
    for k, name in [
        (1, "learner.bin"),
        (4, "weight_state.bin"),
        (9, "manifest.json"),
        (14, "learner.bin"),
    ]:
        # snapshots are written by forked writers: count the writes in a file all of them see
        count_file = work / f"writes-{k}-{name}"

        def filling_up(path, data, k=k, name=name, count_file=count_file):
            if path.name == name:
                with open(count_file, "a") as f:
                    f.write(".")
                if count_file.stat().st_size == k:
                    raise OSError(errno.ENOSPC, "No space left on device")
            real(path, data)

        out = work / f"full-{k}-{name}"
        snapshot._write_durably = filling_up
        try:
            code = main([str(a) for a in ["learn", source, "--out", out, "--quiet", *OPTIONS]])
        finally:
            snapshot._write_durably = real
        done = list_snapshots(out)
        previous_valid = all(read_snapshot(p) for p in done)
        leftovers = [p.name for p in out.iterdir() if p.name.startswith(".tmp-")]
        resumed = learn(source, out, *OPTIONS, "--resume")
        out_rows.append(
            {
                "failing_write": f"{name} of snapshot {k}",
                "exit": code,
                "snapshots_left": len(done),
                "previous_valid": previous_valid,
                "partial_left_behind": leftovers,
                "resumed_identical": resumed.returncode == 0 and outcome(out) == whole,
            }
        )
    return out_rows


# 3. redis-server killed and restarted -----------------------------------------------------------
def redis_trials(work: Path) -> list[dict]:
    from helpers.redisserver import REDIS_SERVER, RedisServer

    if REDIS_SERVER is None:
        return [{"case": "redis-server not installed", "skipped": True}]
    rows = planted_rows(60000, seed=3)
    (work / "r.schema").write_text(SCHEMA.libra_line() + "\n")
    results = []
    for persistent in (True, False):
        server_dir = work / f"redis-{persistent}"
        server_dir.mkdir()
        server = RedisServer(server_dir, persistent=persistent)
        stream = "events"

        def produce(block):
            pipe = server.client.pipeline()
            for r in block:
                pipe.xadd(stream, {"data": ",".join(map(str, r))})
            pipe.execute()

        produce(rows[:30000])
        out = work / f"redis-out-{persistent}"
        uri = (
            f"redis://{server.address}/{stream}?group=g&format=csv&max_wait=0.2"
            f"&broker_timeout=30" + ("" if persistent else "&stop_at_end=true")
        )
        proc = subprocess.Popen(
            learn_argv(
                uri,
                out,
                "--schema",
                work / "r.schema",
                "--batch-size",
                1000,
                "--every-rows",
                5000,
                "--formats",
                "json",
            ),
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        while not list_snapshots(out) and proc.poll() is None:
            time.sleep(0.01)
        port = server.port
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
        time.sleep(1.0)
        server = RedisServer(server_dir, port=port, persistent=persistent)
        if persistent:
            produce(rows[30000:])
            while proc.poll() is None:  # caught up: every row learned, then stop it
                snaps = list_snapshots(out)
                if snaps and read_snapshot(snaps[-1]).manifest["rows_seen"] >= len(rows):
                    proc.send_signal(signal.SIGTERM)
                    break
                time.sleep(0.1)
        _, stderr = proc.communicate(timeout=600)
        server.stop()
        final = read_snapshot(resolve_snapshot(out))
        expected = rows if persistent else rows[: final.manifest["rows_seen"]]
        exactly_once = same_counts(learned_value_counts(final), value_counts(SCHEMA, expected))
        results.append(
            {
                "case": (
                    "persistent server SIGKILLed and restarted mid-run (the "
                    "run follows the stream; SIGTERM once every row is learned)"
                    if persistent
                    else "server SIGKILLed and restarted without its data"
                ),
                "exit": proc.returncode,
                "rows_seen": final.manifest["rows_seen"],
                "rows_produced": len(rows) if persistent else 30000,
                "every_learned_row_exactly_once": exactly_once,
                "message": stderr.strip().splitlines()[-1] if stderr.strip() else "",
            }
        )
    return results


# 4. bad inputs ----------------------------------------------------------------------------------
def bad_input_cases(work: Path) -> list[dict]:
    d = work / "bad"
    d.mkdir()
    rows = planted_rows(50000, seed=5)
    write_data(d / "good.data", rows)
    (d / "binary.schema").write_text(SCHEMA.libra_line() + "\n")
    bad = rows.astype(np.int64)
    bad[41234, 7] = 2
    write_data(d / "badrow.data", bad)
    write_parquet(d / "good.parquet", rows, SCHEMA)
    lines = (d / "good.data").read_bytes().split(b"\n")
    latin = list(lines)
    latin[37000] = b"1,\xe9" + latin[37000][3:]
    (d / "latin1.data").write_bytes(b"\n".join(latin))
    quote = list(lines)
    quote[30000] = b'1,"0' + quote[30000][3:]
    (d / "quote.data").write_bytes(b"\n".join(quote))
    (d / "gzip.data").write_bytes(gzip.compress((d / "good.data").read_bytes()[:100000]))
    (d / "parquet.data").write_bytes((d / "good.parquet").read_bytes())
    (d / "token.data").write_text("1,0\n0,a\n")
    (d / "empty.data").write_text("")
    (d / "header.csv").write_text(",".join(SCHEMA.names) + "\n")
    (d / "garbage.mn").write_text("not a model\n")
    snaps = d / "snaps"
    assert learn(d / "good.data", snaps, "--every-rows", 25000, "--keep", 5).returncode == 0
    truncated = d / "truncated"
    subprocess.run(["cp", "-r", str(snaps), str(truncated)], check=True)
    model = resolve_snapshot(truncated) / "model.json"
    model.write_bytes(model.read_bytes()[:-10])
    learn_ = ["learn", "--out", "{out}"]
    cases = [
        (
            "bad value at row 41,234 (.data, declared schema)",
            [*learn_, "{d}/badrow.data", "--schema", "{d}/binary.schema", "--batch-size", 4096],
            41234,
        ),
        (
            "byte that is not UTF-8 at row 37,000 (Latin-1)",
            [*learn_, "{d}/latin1.data", "--schema", "{d}/binary.schema", "--batch-size", 4096],
            37000,
        ),
        (
            "unbalanced quote at row 30,000",
            [*learn_, "{d}/quote.data", "--schema", "{d}/binary.schema", "--batch-size", 4096],
            30000,
        ),
        ("gzip file named .data", [*learn_, "{d}/gzip.data"], None),
        ("Parquet file named .data", [*learn_, "{d}/parquet.data"], None),
        ("non-integer token while inferring the schema", [*learn_, "{d}/token.data"], None),
        ("empty file", [*learn_, "{d}/empty.data"], None),
        ("score: header-only CSV", ["score", "{d}/snaps", "{d}/header.csv"], None),
        ("score: a file that is not a model", ["score", "{d}/garbage.mn", "{d}/good.data"], None),
        (
            "score: a snapshot with a truncated model.json",
            ["score", "{d}/truncated", "{d}/good.data"],
            None,
        ),
        ("missing source file", [*learn_, "{d}/missing.data"], None),
        ("missing --schema file", [*learn_, "{d}/good.data", "--schema", "{d}/none.schema"], None),
        ("convert into a missing directory", ["convert", "{d}/snaps", "{d}/nowhere/m.uai"], None),
        ("--kappa 2", [*learn_, "{d}/good.data", "--kappa", 2], None),
        ("--batch-size 0", [*learn_, "{d}/good.data", "--batch-size", 0], None),
        ("--delta 2", [*learn_, "{d}/good.data", "--delta", 2], None),
        ("--formats ''", [*learn_, "{d}/good.data", "--formats", ""], None),
        (
            "--max-edges -1",
            [*learn_, "{d}/good.data", "--algo", "grafting", "--max-edges", -1],
            None,
        ),
        ("inspect --top -1", ["inspect", "{d}/snaps", "--top", -1], None),
        ("demo --vars 1", ["demo", "--vars", 1], None),
    ]
    results = []
    for k, (name, argv, bad_row) in enumerate(cases):
        out = d / f"out-{k}"
        argv = [str(a).format(d=d, out=out) for a in argv]
        if argv[0] == "learn":
            argv += ["--quiet"]
        proc = subprocess.run(
            [sys.executable, "-m", "streammn.cli", *argv],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=600,
        )
        message = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
        kept = None
        if bad_row is not None:
            kept = read_snapshot(resolve_snapshot(out)).manifest["rows_seen"] == bad_row
        results.append(
            {
                "case": name,
                "exit": proc.returncode,
                "message": message.replace(str(d) + "/", "")[:160],
                "traceback": "Traceback" in proc.stderr,
                "every_row_before_kept": kept,
            }
        )
    return results


# report -----------------------------------------------------------------------------------------
def machine() -> dict:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average_1min_at_start": os.getloadavg()[0],
    }


def markdown(r: dict) -> str:
    m = r["machine"]
    out = [
        "# fault-injection benchmark: what `streammn learn` survives and refuses",
        "",
        f"Machine: {m['platform']}, {m['cpu_count']} CPUs, Python {m['python']} (load "
        f"average {m['load_average_1min_at_start']:.2f} at start; a shared machine, so the "
        f"durations are only indicative).",
        "",
        "## SIGKILL at random moments, then `--resume`",
        "",
    ]
    for s in r["sigkill"]:
        out += [
            f"**{s['source']}** ({s['source_mb']} MB, {s['rows']:,} rows, uninterrupted "
            f"run {s['uninterrupted_s']} s): **{s['identical']} of {len(s['trials'])}** "
            f"resumed runs byte-identical (model.json and learner checkpoint); "
            f"{sum(not t['finished_before_kill'] for t in s['trials'])} of them killed "
            f"before the run had ended.",
            "",
            "| kill after s | ended before the kill | rows in newest snapshot | resume exit "
            "| identical |",
            "|---:|:---:|---:|---:|:---:|",
        ]
        out += [
            f"| {t['kill_after_s']} | {'yes' if t['finished_before_kill'] else 'no'} | "
            f"{t['rows_in_newest_snapshot_at_kill']:,} | {t['resume_exit']} | "
            f"{'yes' if t['identical'] else 'NO'} |"
            for t in s["trials"]
        ]
        out.append("")
    out += [
        "## Disk full (ENOSPC injected into the snapshot writer)",
        "",
        "| failing write | exit | snapshots left | all valid | partial left behind "
        "| resumed identical |",
        "|---|---:|---:|:---:|:---:|:---:|",
    ]
    out += [
        f"| {t['failing_write']} | {t['exit']} | {t['snapshots_left']} | "
        f"{'yes' if t['previous_valid'] else 'NO'} | "
        f"{', '.join(t['partial_left_behind']) or 'none'} | "
        f"{'yes' if t['resumed_identical'] else 'NO'} |"
        for t in r["disk_full"]
    ]
    out += [
        "",
        "## redis-server killed and restarted mid-run",
        "",
        "| case | exit | rows learned / produced | every learned row exactly once | last message |",
        "|---|---:|---:|:---:|---|",
    ]
    for t in r["redis"]:
        if t.get("skipped"):
            out.append(f"| {t['case']} | | | | |")
            continue
        out.append(
            f"| {t['case']} | {t['exit']} | {t['rows_seen']:,} / "
            f"{t['rows_produced']:,} | {'yes' if t['every_learned_row_exactly_once'] else 'NO'}"
            f" | {t['message'][:100]} |"
        )
    out += [
        "",
        "## Bad inputs",
        "",
        "| input | exit | traceback | rows before it kept | message |",
        "|---|---:|:---:|:---:|---|",
    ]
    for t in r["bad_inputs"]:
        kept = (
            ""
            if t["every_row_before_kept"] is None
            else ("yes" if t["every_row_before_kept"] else "NO")
        )
        msg = t["message"].replace("|", "\\|")
        out.append(
            f"| {t['case']} | {t['exit']} | {'YES' if t['traceback'] else 'no'} | {kept} | {msg} |"
        )
    return "\n".join(out) + "\n"


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    result = {"machine": machine(), "rows": args.rows, "options": list(map(str, OPTIONS))}
    with tempfile.TemporaryDirectory(prefix="streammn-faults-") as tmp:
        work = Path(tmp)
        rows = planted_rows(args.rows)
        data = write_data(work / "stream.data", rows)
        parquet = work / "stream.parquet"
        write_parquet(parquet, rows, SCHEMA, row_group_size=16384)
        result["sigkill"] = []
        for source in (data, parquet):
            (work / source.suffix[1:]).mkdir()
            result["sigkill"].append(
                sigkill_trials(source, work / source.suffix[1:], args.trials, rng)
            )
            print(result["sigkill"][-1]["source"], result["sigkill"][-1]["identical"], flush=True)
        result["disk_full"] = disk_full_trials(data, work / "data")
        print("disk full done", flush=True)
        result["redis"] = redis_trials(work)
        print("redis done", flush=True)
        result["bad_inputs"] = bad_input_cases(work)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "faults.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "faults.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main_()
