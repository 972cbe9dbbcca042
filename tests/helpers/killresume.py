"""Kill a ``streammn learn`` process with SIGKILL, resume it, and compare with an uninterrupted run:
shared by the fault tests (``test_faults.py``) and the longer fault benchmark
(``benchmarks/faults.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from streammn import read_snapshot
from streammn.stream.snapshot import list_snapshots, resolve_snapshot

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def learn_argv(source, out, *options) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streammn.cli",
        "learn",
        str(source),
        "--out",
        str(out),
        "--quiet",
        *map(str, options),
    ]


def learn(source, out, *options, timeout=900) -> subprocess.CompletedProcess:
    """Run ``streammn learn`` to its end."""
    return subprocess.run(
        learn_argv(source, out, *options), env=ENV, capture_output=True, text=True, timeout=timeout
    )


def outcome(out) -> dict:
    """What a finished run left: the newest snapshot's model and checkpoint bytes, its rows."""
    snap = read_snapshot(resolve_snapshot(out))
    return {
        "rows_seen": snap.manifest["rows_seen"],
        "model": snap.file("model.json").read_bytes(),
        "learner": snap.file("learner.bin").read_bytes(),
    }


def snapshots_done(out) -> int:
    return len(list_snapshots(out))


def kill_after(
    source, out, *options, delay: float = 0.0, min_snapshots: int = 0, deadline: float = 600
) -> dict:
    """Start ``learn``, SIGKILL it ``delay`` seconds after ``min_snapshots`` snapshots exist (or
    when it has ended by itself), and say where it was: ``finished`` (it ended before the
    kill), ``rows_at_kill`` (rows of the newest snapshot then)."""
    proc = subprocess.Popen(
        learn_argv(source, out, *options),
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        give_up = time.monotonic() + deadline
        while snapshots_done(out) < min_snapshots and proc.poll() is None:
            if time.monotonic() > give_up:
                raise TimeoutError("the learner made no snapshot")
            time.sleep(0.002)
        if delay:
            time.sleep(delay)
    finally:
        finished = proc.poll() is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = [
        read_snapshot(p).manifest["rows_seen"]
        for p in list_snapshots(out)
        if (p / "manifest.json").exists()
    ]
    return {"finished": finished, "rows_at_kill": max(done, default=0)}


def learned_value_counts(snap) -> list:
    """How often each value of each variable was learned by a snapshot's DTSL learner: its
    trees' leaves partition every row they counted (DependencyNetwork.marginal_counts), so
    these equal the stream's own counts iff every row was learned exactly once."""
    from streammn.dtsl import DTSL

    learner = DTSL.from_bytes(snap.file("learner.bin").read_bytes())
    return [
        np.asarray(c, dtype=np.int64) for c in learner.to_dependency_network().marginal_counts()
    ]


def value_counts(schema, rows) -> list:
    """How often each value of each variable occurs in ``rows``."""
    return [
        np.bincount(rows[:, i], minlength=int(d)).astype(np.int64)
        for i, d in enumerate(schema.cardinalities)
    ]


def same_counts(a, b) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
