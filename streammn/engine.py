"""StreamLearner: the loop source -> statistics -> learner -> model -> snapshots.

For every batch the engine (1) scores it prequentially with the learner's current model
(test-then-train), (2) updates the marginal counts and the learner, and (3) when a snapshot is
due converts the learner into a Markov network and writes a durable snapshot holding the model
files, the learner checkpoint, the statistics and the source position. Snapshots are also
written at the end of a finite source, on SIGINT/SIGTERM, and before a bad batch stops the run,
so nothing already learned is lost and ``resume`` continues exactly where the last one ended.
Sources with a ``commit(position)`` method (Kafka, Redis Streams) are told to commit a position
only after the snapshot covering it is durable; on a signal their ``stop()`` is called so a
source waiting for new messages returns.

A learner is any object with ``schema``, ``partial_fit(batch)``, ``pll_terms(rows)`` (its
current conditionals, for the prequential score), ``to_bytes()`` / class method
``from_bytes(data)``, ``get_params()``, and either ``to_markov_network()`` or
``to_dependency_network()`` (converted with DN2MN). Its learning must depend only on the batches
it sees, which the sources make identical on resume; then a resumed run ends with the same model
as an uninterrupted one.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np

from connectors.base import Source
from streammn.dn2mn import dn2mn
from streammn.formats.uai import uai_table_entries
from streammn.model import MarkovNetwork
from streammn.snapshot import SnapshotWriter, latest_valid_snapshot, model_files, model_summary
from streammn.stats import MarginalCounts, RowReservoir
from streammn.errors import SettingsError

LEARNER_FILE = "learner.bin"
STATS_FILE = "marginals.bin"
RESERVOIR_FILE = "reservoir.bin"
ENGINE_KEY = "engine"
REFINE_ITERATIONS = 30
REFINE_ROWS = 20000
UAI_MAX_ENTRIES = 1 << 22


def learner_to_model(learner, marginals: MarginalCounts, refine: bool = False,
                     validation: np.ndarray | None = None,
                     train: np.ndarray | None = None) -> MarkovNetwork:
    """The learner's current Markov network: its own, or DN2MN of its dependency network
    (default base and orderings, product of the counted marginals). With ``refine``, DN2MN's
    weights continue by pseudo-likelihood on ``train`` and are kept only if the validation PLL
    improves."""
    if hasattr(learner, "to_markov_network"):
        return learner.to_markov_network()
    dn = learner.to_dependency_network()
    if refine and train is not None and train.shape[0] and validation is not None:
        return dn2mn(dn, marginals=marginals, refine=REFINE_ITERATIONS, train=train,
                     valid=validation)
    return dn2mn(dn, marginals=marginals)


class EngineError(SettingsError):
    """The engine cannot start or resume (e.g. a snapshot of another learner or schema)."""


class ResumeSettingsError(EngineError):
    """A resumed run asks for a learner setting other than the snapshot's: ``option`` (the
    learner's parameter name), ``snapshot_value`` and ``requested_value``."""

    def __init__(self, snapshot, option: str, snapshot_value, requested_value):
        self.option, self.snapshot_value, self.requested_value = \
            option, snapshot_value, requested_value
        super().__init__(f"{snapshot}: the snapshot was learned with {option}="
                         f"{snapshot_value!r}, this run asks for {option}={requested_value!r}; "
                         f"resume with the snapshot's setting or start a new snapshot directory")


def check_resume_settings(snapshot, manifest: dict, learner) -> None:
    """Refuse to resume ``manifest``'s learner state as ``learner`` when the class or a
    setting that shapes the model differs. A learner lists the settings that do not change
    what it learns (e.g. thread counts) in ``resume_may_change``; those are not compared."""
    recorded = manifest.get("learner") or {}
    cls = type(learner).__name__
    if recorded.get("class") not in (None, cls):
        raise EngineError(f"{snapshot}: the snapshot holds a {recorded['class']} learner, this "
                          f"run uses {cls}; resume with the same learner or start a new "
                          f"snapshot directory")
    old_params = recorded.get("params") or {}
    free = set(getattr(learner, "resume_may_change", ()))
    requested = json.loads(json.dumps(learner.get_params()))  # as the manifest stores them
    for name, value in requested.items():
        if name in old_params and name not in free and old_params[name] != value:
            raise ResumeSettingsError(snapshot, name, old_params[name], value)


@dataclass
class Progress:
    """Counters of a run, checkpointed in every snapshot manifest."""

    rows_seen: int = 0
    batches_seen: int = 0
    preq_log_sum: float = 0.0
    preq_rows: int = 0
    snapshots_written: int = 0
    next_snapshot_rows: int | None = None
    history: list = field(default_factory=list)

    @property
    def prequential_pll(self) -> float | None:
        return self.preq_log_sum / self.preq_rows if self.preq_rows else None

    def to_dict(self) -> dict:
        return {"rows_seen": self.rows_seen, "batches_seen": self.batches_seen,
                "preq_log_sum": self.preq_log_sum, "preq_rows": self.preq_rows,
                "snapshots_written": self.snapshots_written,
                "next_snapshot_rows": self.next_snapshot_rows, "history": self.history}

    @classmethod
    def from_dict(cls, d: dict) -> "Progress":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


class StreamLearner:
    """Follow ``source``, learn with ``learner``, publish snapshots into ``snapshot_dir``.

    Parameters
    ----------
    every_rows, every_seconds:
        Snapshot cadence (either, both, or neither: then only at the end / on a signal).
    keep:
        Snapshots retained; older ones are removed once a newer one is durable.
    refine:
        Continue DN2MN's weights with pseudo-likelihood steps, kept only if the validation PLL
        improves (needs ``validation``).
    validation:
        Rows (a ``uint8`` matrix) scored at every snapshot; also guide ``refine``.
    prequential_rows:
        Rows of each batch scored before learning (the first ones); ``None`` scores all.
    formats:
        Model files written into each snapshot: any of ``"json"``, ``"mn"``, ``"uai"``.
    progress:
        A text stream for progress lines (``None``: silent).
    """

    def __init__(self, source: Source, learner, snapshot_dir, every_rows: int | None = None,
                 every_seconds: float | None = None, keep: int = 5, refine: bool = False,
                 validation: np.ndarray | None = None, prequential_rows: int | None = 4096,
                 formats=("json", "mn", "uai"), progress: TextIO | None = sys.stderr,
                 progress_interval: float = 2.0):
        if every_rows is not None and every_rows < 1:
            raise ValueError(f"every_rows must be positive, got {every_rows}")
        if every_seconds is not None and every_seconds <= 0:
            raise ValueError(f"every_seconds must be positive, got {every_seconds}")
        if learner.schema != source.schema:
            raise EngineError(f"learner schema {learner.schema!r} differs from the source's "
                              f"{source.schema!r}")
        if refine and validation is None:
            raise ValueError("refine needs validation rows")
        self.source = source
        self.learner = learner
        self.writer = SnapshotWriter(snapshot_dir, keep=keep)
        self.every_rows = every_rows
        self.every_seconds = every_seconds
        self.refine = refine
        self.validation = None if validation is None else source.schema.validate(validation)
        self.prequential_rows = prequential_rows
        self.formats = tuple(formats)
        self.progress_stream = progress
        self.progress_interval = progress_interval
        self.marginals = MarginalCounts(source.schema)
        self.reservoir = RowReservoir(source.schema, capacity=REFINE_ROWS, seed=0) \
            if refine else None
        self.state = Progress(next_snapshot_rows=every_rows)
        self.model: MarkovNetwork | None = None
        self._resumed_from = None
        self._stop_signal: int | None = None

    def __repr__(self) -> str:
        return (f"StreamLearner({self.source.describe()}, {self.learner!r}, "
                f"every_rows={self.every_rows}, every_seconds={self.every_seconds}, "
                f"keep={self.writer.keep}, refine={self.refine})")

    # resume -------------------------------------------------------------------------------
    def resume(self) -> bool:
        """Restore learner, statistics, counters and source position from the newest valid
        snapshot, and point ``LATEST`` at it. Returns False (and changes nothing) when there is
        none. A snapshot of another learner class or other learner settings is refused
        (:class:`ResumeSettingsError` names the setting), as is a change of ``refine`` (its
        row sample would start over)."""
        snap = latest_valid_snapshot(self.writer.directory)
        if snap is None:
            return False
        manifest = snap.manifest
        engine = manifest.get(ENGINE_KEY)
        if engine is None or LEARNER_FILE not in snap.files:
            raise EngineError(f"{snap.path}: not a snapshot of a StreamLearner run")
        check_resume_settings(snap.path, manifest, self.learner)
        if (RESERVOIR_FILE in snap.files) != (self.reservoir is not None):
            raise ResumeSettingsError(snap.path, "refine", RESERVOIR_FILE in snap.files,
                                      self.reservoir is not None)
        learner = type(self.learner).from_bytes(snap.file(LEARNER_FILE).read_bytes())
        if learner.schema != self.source.schema:
            raise EngineError(f"{snap.path}: snapshot schema differs from the source's")
        marginals = MarginalCounts.from_bytes(snap.file(STATS_FILE).read_bytes())
        if self.reservoir is not None:
            self.reservoir = RowReservoir.from_bytes(snap.file(RESERVOIR_FILE).read_bytes())
        self.source.seek(manifest["source"]["position"])
        self.learner, self.marginals = learner, marginals
        self.state = Progress.from_dict(engine)
        self.writer.point_latest(snap.path)  # repairs a LATEST a killed writer left behind
        self._resumed_from = snap.path
        return True

    # the loop -----------------------------------------------------------------------------
    def run(self):
        """Consume the source until it ends or a signal arrives; returns the last snapshot path.

        A :class:`~streammn.schema.SchemaError` (or any source error) from a batch stops the
        run after a snapshot of everything learned before that batch, then propagates.
        """
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for s in previous:
                signal.signal(s, self._on_signal)
        except ValueError:  # not the main thread: signals stay with the caller
            previous = {}
        started = time.monotonic()
        last_snapshot_time = started
        last_print = started
        rows_at_start = self.state.rows_seen
        path = None
        try:
            batches = iter(self.source)
            while self._stop_signal is None:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except Exception as error:
                    if self.state.rows_seen > rows_at_start:
                        try:
                            self._snapshot("error")
                        except Exception as also:  # keep the original error in front
                            error.add_note(f"the snapshot after it failed too: {also}")
                    raise
                self._score(batch.rows)
                self.marginals.update(batch.rows)
                if self.reservoir is not None:
                    self.reservoir.update(batch.rows)
                self.learner.partial_fit(batch)
                self.state.rows_seen += len(batch)
                self.state.batches_seen += 1
                now = time.monotonic()
                if self._due(now, last_snapshot_time):
                    path = self._snapshot("periodic")
                    last_snapshot_time = time.monotonic()
                if self.progress_stream is not None and now - last_print >= self.progress_interval:
                    self._print_progress(now - started, self.state.rows_seen - rows_at_start)
                    last_print = now
            reason = "signal" if self._stop_signal is not None else "end"
            if self.state.rows_seen != self._last_snapshot_rows:
                path = self._snapshot(reason)
            elif path is None:  # resumed with nothing new: that snapshot stands
                path = self._resumed_from
            if self.progress_stream is not None:
                self._print_progress(time.monotonic() - started,
                                     self.state.rows_seen - rows_at_start, final=True)
            return path
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def run_multipass(self, dask_client=None):
        """Exact learning over a finite, rewindable source (``learner.fit`` makes its passes),
        after one pass that counts the marginals; then one snapshot. Returns its path.

        With a ``dask_client`` (:func:`streammn.distributed.dask_client`) the marginals and
        every pass are computed by Dask tasks over the Parquet source's partitions; the
        snapshot holds the same model.
        """
        if not self.source.rewindable:
            raise EngineError(f"{self.source.describe()} cannot be read again: multi-pass "
                              f"learning needs a finite file source")
        started = time.monotonic()
        count_pass = None
        if dask_client is not None:
            from streammn.distributed import DaskPasses, count_statistics, n_batches
            if self.reservoir is not None:
                raise EngineError("refine keeps a row sample in this process; it does not "
                                  "combine with Dask passes")
            self.marginals.merge(count_statistics(self.source, MarginalCounts, dask_client))
            self.state.rows_seen += self.marginals.n_rows
            self.state.batches_seen += n_batches(self.source)
            count_pass = DaskPasses(dask_client, self.source,
                                    cache_bytes=int(self.learner.memory_mb * 2 ** 20))
            # where a local final pass would leave the source (recorded in the manifest)
            self.source.seek({"file_index": len(self.source.paths), "row": 0,
                              "offset": self.marginals.n_rows})
        else:
            self.source.rewind()
            for batch in self.source:
                self.marginals.update(batch.rows)
                if self.reservoir is not None:
                    self.reservoir.update(batch.rows)
                self.state.rows_seen += len(batch)
                self.state.batches_seen += 1
            self.source.rewind()
        if self.progress_stream is not None:
            print(f"counted {self.state.rows_seen:,} rows; growing trees level by level",
                  file=self.progress_stream, flush=True)
        self.learner.fit(self.source, count_pass=count_pass)
        path = self._snapshot("end")
        if self.progress_stream is not None:
            self._print_progress(time.monotonic() - started, self.state.rows_seen, final=True)
        return path

    def _on_signal(self, signum, frame):
        self._stop_signal = signum
        stop = getattr(self.source, "stop", None)
        if stop is not None:  # a following log source ends its wait for new rows
            stop()

    def _due(self, now: float, last_time: float) -> bool:
        st = self.state
        if self.every_rows is not None and st.rows_seen >= st.next_snapshot_rows:
            return True
        return self.every_seconds is not None and now - last_time >= self.every_seconds

    def _score(self, rows: np.ndarray) -> None:
        if self.state.rows_seen == 0:
            return  # nothing learned yet: no model to test with
        if self.prequential_rows is not None:
            rows = rows[:self.prequential_rows]
        terms = self.learner.pll_terms(rows)
        self.state.preq_log_sum += float(terms.sum())
        self.state.preq_rows += rows.shape[0]

    @property
    def _last_snapshot_rows(self) -> int | None:
        return self.state.history[-1]["rows_seen"] if self.state.history else None

    def current_model(self) -> MarkovNetwork:
        """Convert the learner's current state into a Markov network (no snapshot)."""
        train = self.reservoir.rows if self.reservoir is not None else None
        return learner_to_model(self.learner, self.marginals, refine=self.refine,
                                validation=self.validation, train=train)

    def _snapshot(self, reason: str):
        t0 = time.perf_counter()
        model = self.current_model()
        self.model = model
        convert_seconds = time.perf_counter() - t0
        st = self.state
        if self.every_rows is not None:
            while st.next_snapshot_rows <= st.rows_seen:
                st.next_snapshot_rows += self.every_rows
        validation_pll = (model.pll(self.validation) if self.validation is not None
                          and self.validation.shape[0] else None)
        st.snapshots_written += 1
        st.history.append({"rows_seen": st.rows_seen, "reason": reason,
                           "prequential_pll": _finite(st.prequential_pll),
                           "validation_pll": _finite(validation_pll)})
        st.history = st.history[-1000:]
        formats, skipped = self._formats_for(model)
        files = model_files(model.schema, model.features, formats=formats)
        files[LEARNER_FILE] = self.learner.to_bytes()
        files[STATS_FILE] = self.marginals.to_bytes()
        if self.reservoir is not None:
            files[RESERVOIR_FILE] = self.reservoir.to_bytes()
        manifest = {
            "rows_seen": st.rows_seen,
            "reason": reason,
            "source": {"description": self.source.describe(), "position": self.source.position()},
            "learner": {"class": type(self.learner).__name__,
                        "params": self.learner.get_params()},
            "scores": {"prequential_pll": _finite(st.prequential_pll),
                       "validation_pll": _finite(validation_pll)},
            "model": model_summary(model.schema, model.features),
            "skipped_formats": skipped,
            "timings": {"convert_seconds": convert_seconds},
            "peak_rss_mb": _peak_rss_mb(),
            ENGINE_KEY: st.to_dict(),
        }
        t1 = time.perf_counter()
        path = self.writer.write(files, manifest)
        st.history[-1]["convert_seconds"] = convert_seconds  # kept by the next snapshot
        st.history[-1]["write_seconds"] = time.perf_counter() - t1
        commit = getattr(self.source, "commit", None)
        if commit is not None:  # a log's offsets move only once the snapshot is durable
            commit(manifest["source"]["position"])
        return path

    def _formats_for(self, model: MarkovNetwork) -> tuple[tuple[str, ...], dict]:
        """The requested model formats, less UAI when its tables would be too large (a
        conjunction over k variables needs a full table over them)."""
        if "uai" not in self.formats:
            return self.formats, {}
        entries = uai_table_entries(model.schema, model.features)
        if entries <= UAI_MAX_ENTRIES:
            return self.formats, {}
        reason = (f"the UAI tables would hold {entries:,} potentials (limit "
                  f"{UAI_MAX_ENTRIES:,}); use the .mn or JSON model")
        return tuple(f for f in self.formats if f != "uai"), {"uai": reason}

    def _print_progress(self, elapsed: float, rows: int, final: bool = False) -> None:
        st = self.state
        rate = rows / elapsed if elapsed > 0 else 0.0
        preq = st.prequential_pll
        preq_text = f"{preq:.4f}" if preq is not None else "n/a"
        line = (f"rows {st.rows_seen:,}  {rate:,.0f} rows/s  prequential PLL {preq_text}  "
                f"snapshots {st.snapshots_written}")
        print(("done: " if final else "") + line, file=self.progress_stream, flush=True)


def _peak_rss_mb() -> float | None:
    """Peak resident memory of this process so far, in MB (None where unknown)."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 1e6


def _finite(x):
    return None if x is None or not math.isfinite(x) else float(x)
