"""DTSL's memory budget: how ``memory_mb`` is split over everything a one-pass run keeps.

What. ``--memory-mb`` bounds the whole learning process above a fixed floor: the interpreter,
numpy, scipy, pyarrow (and the pandas it loads), numba and the kernels it loads, and a source's
own buffers (Arrow's reader keeps some per column of a row group), measured as the peak of the
same run at ``--memory-mb 1``, where every share is at its least
(``benchmarks/results/memory_budget.md``). :class:`MemoryPlan` gives every part of a
Hoeffding-mode run its share of the budget:

- ``batch``: the rows in flight: a source batch and the one read ahead, the source's decoding
  buffers (Parquet decodes a batch at several bytes a cell) and the learner's per-batch staging
  (bitmaps, packed rows, the logistic regressions' active inputs). Bounded by the rows a batch
  holds: the engine reads batches of at most :attr:`MemoryPlan.batch_rows` rows and DTSL learns
  longer ones in pieces of that size, counted at ``ROW_CELL_BYTES`` a cell.
- ``weight_step``: the published weights' sample and the reach lists of their refinement
  (:mod:`streammn.network.weight_sample`), up to its own ``MEMORY_MB``.
- ``logistic``: with ``cpd`` 'lr' or 'auto', the regressions' sample (and the workspace of its
  batch fit and of scoring its held-out rows, in chunks), up to ``MEMORY_MB``, plus the FTRL
  state, counted exactly (three models during the penalty race).
- ``snapshot``: a snapshot cut in this process (the final one, a periodic one written in
  place, or any with ``validation`` rows): the learner's state serialised (a copy of its
  arrays, and the archive) and the model converted. A periodic snapshot written by a forked
  child has the child's own peak.
- ``allocator``: memory freed but kept by the allocators (glibc's arenas, one per thread that
  allocates; Arrow's pool), which the measured peak counts and no array does.
- ``replay``: the replay buffer's rows, their value bitmaps and their packed indicator rows,
  counted exactly; sized by ``replay_rows`` (``'auto'``: up to 100,000 rows within a quarter of
  the budget at 5 bytes a row and variable, as before).
- ``trees``: what is left: the forest and the split statistics (:mod:`streammn.trees.hoeffding`
  gives statistics whatever the forest leaves of it, so as the trees grow fewer leaves collect).

Degradation. Every share is a function of ``memory_mb``, the schema and the settings, never of
the memory measured at run time, so a resumed run plans exactly as the original did and stays
byte-identical. A smaller budget means fewer rows per batch (slower, same model), smaller
samples for the published weights and the regressions (their fits see fewer rows), a shorter
replay buffer, and fewer leaves collecting statistics. :meth:`MemoryPlan.binding` names the
parts a budget cut below what they would take unbounded; the progress line shows them.

Not covered: the model a periodic snapshot converts (DN2MN's features, the refinement, the
files), which a forked writer builds in its own memory (its peak is reported apart); the rows of
a ``validation`` file; and the regressions' batch fit when a file ends within their sample,
whose Newton steps keep a Hessian per output (about 440 MB at 300 binary variables,
:mod:`streammn.logistic.batch`). Exact mode keeps its own rule: ``memory_mb`` bounds the
statistics of a pass and the rows' node memory (:mod:`streammn.trees.exact`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streammn.network.weight_sample import MEMORY_MB, SAMPLE_ROWS, sample_rows
from streammn.trees import replay
from streammn.schema import Schema

MB = 2**20
ROW_CELL_BYTES = 24  # a cell in flight: decoding (~8-10), batch, read-ahead, scores, staging
BATCH_SHARE = 1 / 8  # the budget's share for the rows in flight ...
MIN_BATCH_ROWS = 1024  # ... never fewer rows a batch (per-batch overheads) ...
MAX_BATCH_ROWS = 65536  # ... nor more than the command line's default batch
WEIGHT_SHARE = 1 / 8  # the published weights' sample and reach lists, up to MEMORY_MB
LOGISTIC_SHARE = 1 / 8  # the regressions' sample and its fits' workspace, up to MEMORY_MB
SNAPSHOT_SHARE = 1 / 8  # a snapshot cut in this process: the state serialised, the model
ALLOCATOR_SHARE = 1 / 8  # freed memory the allocators keep (arenas, Arrow's pool)
REPLAY_SHARE = 1 / 4  # replay_rows='auto': the buffer's share at REPLAY_ROW_BYTES a variable
REPLAY_ROW_BYTES = 5  # the sizing rule (a binary row takes about 1.4 bytes a variable)
MAX_REPLAY_ROWS = 100_000
MIN_TREES_SHARE = 1 / 4  # the trees' least share, when the others' minimums take the rest


def ftrl_bytes(schema: Schema) -> int:
    """The FTRL state of the logistic conditionals at its largest (the penalty race: three
    models side by side, ``z``, ``n`` and ``w`` over the inputs and an intercept, and which
    coordinates are free)."""
    cards = schema.cardinalities.astype(np.int64)
    inputs = int((cards - 1).sum())
    outputs = int(np.where(cards == 2, 1, cards).sum())
    race = 3 * outputs
    return 3 * 8 * (inputs + 1) * race + inputs * race + inputs * outputs


def replay_bytes(schema: Schema, rows: int) -> int:
    """What a replay buffer of ``rows`` rows takes: the rows, a bit per row for every variable
    and value, and the rows' indicator vectors packed as bits."""
    n, max_card = schema.n_vars, int(schema.cardinalities.max())
    k = int((schema.cardinalities.astype(np.int64) - 1).sum())
    return rows * n + n * max_card * 8 * -(-rows // 64) + rows * 8 * replay.packed_words(k)


@dataclass(frozen=True)
class MemoryPlan:
    """The shares of a DTSL run's ``memory_mb`` (module docstring), all in bytes except the
    row counts and the two sample budgets (MB, as
    :class:`~streammn.network.weight_sample.WeightSample` takes them)."""

    memory_mb: float
    batch_rows: int
    weight_mb: float  # 0: no published-weights sample (weights='closed-form')
    logistic_mb: float  # 0: no regressions
    ftrl: int
    replay_rows: int
    replay: int
    n_vars: int
    sample_train_rows: int  # training rows the published weights' sample keeps
    replay_wanted: int  # the rows replay would keep unbounded ('auto': MAX_REPLAY_ROWS)

    @classmethod
    def of(
        cls,
        schema: Schema,
        memory_mb: float,
        replay_rows: int | str = "auto",
        weights: bool = True,
        regressions: bool = True,
    ) -> "MemoryPlan":
        """The plan for ``schema`` under ``memory_mb``; ``replay_rows`` as DTSL's parameter,
        ``weights`` whether the published weights keep a sample, ``regressions`` whether
        logistic conditionals learn."""
        budget = memory_mb * MB
        n = schema.n_vars
        batch_rows = int(budget * BATCH_SHARE // (n * ROW_CELL_BYTES))
        batch_rows = min(MAX_BATCH_ROWS, max(MIN_BATCH_ROWS, batch_rows))
        weight_mb = min(MEMORY_MB, memory_mb * WEIGHT_SHARE) if weights else 0.0
        logistic_mb = min(MEMORY_MB, memory_mb * LOGISTIC_SHARE) if regressions else 0.0
        if replay_rows == "auto":
            wanted = MAX_REPLAY_ROWS
            rows = int(min(MAX_REPLAY_ROWS, budget * REPLAY_SHARE // (REPLAY_ROW_BYTES * n)))
        else:
            wanted = rows = int(replay_rows)
        return cls(
            memory_mb=float(memory_mb),
            batch_rows=batch_rows,
            weight_mb=weight_mb,
            logistic_mb=logistic_mb,
            ftrl=ftrl_bytes(schema) if regressions else 0,
            replay_rows=rows,
            replay=replay_bytes(schema, rows),
            n_vars=n,
            sample_train_rows=sample_rows(n, weight_mb) if weights else 0,
            replay_wanted=wanted,
        )

    @property
    def budget(self) -> int:
        return int(self.memory_mb * MB)

    @property
    def batch(self) -> int:
        """The rows in flight, at ``ROW_CELL_BYTES`` a cell."""
        return self.batch_rows * self.n_vars * ROW_CELL_BYTES

    def outside_trees(self) -> dict[str, int]:
        """Every share but the trees'."""
        return {
            "batch": self.batch,
            "weight_step": int(self.weight_mb * MB),
            "logistic": int(self.logistic_mb * MB) + self.ftrl,
            "snapshot": int(self.budget * SNAPSHOT_SHARE),
            "allocator": int(self.budget * ALLOCATOR_SHARE),
        }

    @property
    def trees_mb(self) -> float:
        """The trees' share with the replay buffer (the budget Hoeffding growth splits between
        the forest, the buffer and the statistics): what the other shares leave, and at least
        ``MIN_TREES_SHARE`` of the budget, so that a budget too small for the other parts'
        minimums (``MIN_BATCH_ROWS``) still grows trees."""
        left = self.budget - sum(self.outside_trees().values())
        return max(left, self.budget * MIN_TREES_SHARE) / MB

    def components(self) -> dict[str, int]:
        """Every share in bytes, ``trees`` holding the forest and the statistics (the replay
        buffer counted apart); they sum to the budget when it covers the parts."""
        out = self.outside_trees()
        out["replay"] = self.replay
        out["trees"] = int(self.trees_mb * MB) - self.replay
        return out

    def binding(self) -> list[str]:
        """The parts that change the model which this budget keeps below what they would take
        unbounded: the published weights' and the regressions' samples, the replay buffer.
        (Shorter batches are not named: they change the speed, not the model.)"""
        out = []
        if self.weight_mb and self.sample_train_rows < SAMPLE_ROWS:
            out.append(f"weight sample {self.sample_train_rows:,} rows")
        if self.logistic_mb and self.logistic_mb < MEMORY_MB:
            rows = sample_rows(self.n_vars, self.logistic_mb)
            if rows < SAMPLE_ROWS:
                out.append(f"regression sample {rows:,} rows")
        if self.replay_rows < self.replay_wanted:
            out.append(f"replay {self.replay_rows:,} rows")
        return out
