"""What a run reports: its counters (checkpointed in every snapshot manifest) and its progress
lines.

:class:`Progress` is the engine's bookkeeping that must survive a resume (rows and batches
learned, the prequential score, the snapshot cadence and history); :func:`progress_line` is the
one line a user watches (rate, prequential PLL, snapshots, and drift, schema growth or a binding
memory budget where the learner has them), and :func:`peak_rss_mb` the memory figure each
manifest records.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

STDERR = "stderr"  # progress to sys.stderr as it is when a line is printed


@dataclass
class Progress:
    """Counters of a run, checkpointed in every snapshot manifest."""

    rows_seen: int = 0
    batches_seen: int = 0
    preq_log_sum: float = 0.0
    preq_rows: int = 0
    snapshots_written: int = 0
    snapshots_skipped: int = 0  # due snapshots skipped (``when_busy="skip"``) in all
    skipped_in_a_row: int = 0  # ... since the last one written
    next_snapshot_rows: int | None = None
    history: list = field(default_factory=list)

    @property
    def prequential_pll(self) -> float | None:
        return self.preq_log_sum / self.preq_rows if self.preq_rows else None

    def to_dict(self) -> dict:
        return {
            "rows_seen": self.rows_seen,
            "batches_seen": self.batches_seen,
            "preq_log_sum": self.preq_log_sum,
            "preq_rows": self.preq_rows,
            "snapshots_written": self.snapshots_written,
            "snapshots_skipped": self.snapshots_skipped,
            "skipped_in_a_row": self.skipped_in_a_row,
            "next_snapshot_rows": self.next_snapshot_rows,
            "history": self.history,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Progress":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def progress_line(
    state: Progress, learner, elapsed: float, rows: int, final: bool, memory=()
) -> str:
    """The progress line for ``rows`` learned in ``elapsed`` seconds by this run; ``memory``
    names what the learner's memory budget holds back (DTSL's ``memory_binding``)."""
    rate = rows / elapsed if elapsed > 0 else 0.0
    preq = state.prequential_pll
    preq_text = f"{preq:.4f}" if preq is not None else "n/a"
    line = (
        f"rows {state.rows_seen:,}  {rate:,.0f} rows/s  prequential PLL {preq_text}  "
        f"snapshots {state.snapshots_written}"
    )
    if state.snapshots_skipped:
        line += f" ({state.snapshots_skipped} skipped)"
    lag = next((h for h in reversed(state.history) if "latency_rows" in h), None)
    if lag is not None:  # how far learning had gone when the last snapshot became durable
        line += f"  lag {lag['latency_seconds']:.1f} s / {lag['latency_rows']:,} rows"
    drift = learner.drift_summary()
    if drift is not None:
        line += (
            f"  drift alarms {drift['alarms']} swaps {drift['swaps']} "
            f"alternates {len(drift['alternating'])}"
        )
    if learner.schema.grows:  # new values mid-stream: the manifest's schema version
        line += f"  schema version {learner.schema.version}"
    if memory:  # the memory budget binds: what it holds back
        line += f"  memory budget binds: {', '.join(memory)}"
    return ("done: " if final else "") + line


def peak_rss_mb() -> float | None:
    """Peak resident memory of this process so far, in MB (None where unknown)."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 1e6
