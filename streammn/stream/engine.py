"""StreamLearner: the loop source -> learner -> model -> snapshots.

For every batch the engine (1) scores it prequentially with the learner's current model
(test-then-train), (2) gives it to the learner, which keeps its own statistics and its sample
of the rows for the published weights, and (3) when a snapshot is due converts the learner into
a Markov network and writes a durable snapshot holding the model files, the learner checkpoint
and the source position. Snapshots are also
written at the end of a finite source, on SIGINT/SIGTERM, and before a bad batch stops the run,
so nothing already learned is lost and ``resume`` continues exactly where the last one ended.
A signal also asks the learner to stop (:meth:`~streammn.learner.StructureLearner.stop`): a
structure update in flight is abandoned rather than awaited and the final snapshot holds the
state before it, with the update pending for the resumed run; batches are cut where the
learner plans its next update (``rows_to_pause``), so that one falls at the end of a piece.

A periodic snapshot costs the stream a ``fork()``: at the cut, the state after the snapshot's
last row, a child process converts and writes the snapshot from its copy-on-write image of the
learner while the parent keeps learning (:mod:`streammn.stream.publishing` says why a fork rather
than a writer thread or a serialised copy, and what the child must not touch). Unless the
snapshot is cheap: the fork is not free either, since every page the learner writes while the
child lives is copied by the kernel, one fault each (at 100 binary variables some 20,000 pages,
about 0.2 s of system time a snapshot, on this project's 2-core machines). So when the last
periodic snapshot's work (conversion, weights, files) took less than ``in_place_under``
seconds (default ``IN_PLACE_UNDER``, 0.25 s), the next one is written on the learning thread,
before learning continues, and the first that takes longer sends the next back to a child;
each history entry says which (``in_place``). On 1M rows of 100 binary variables with a
snapshot every 100k rows, a run ran at 0.80-0.86 of the rate of one with the final snapshot
only when every snapshot was forked, at 0.885 with this rule (``benchmarks/results/stream.md``).
The snapshot holds exactly the
state at the cut, so it equals the one a blocking writer would produce and resume stays
byte-identical. At most one snapshot is in flight; when the next one is due before the previous one
is durable, ``when_busy`` decides: ``"wait"`` (default) blocks learning until it is, so every due
snapshot is written; ``"skip"`` drops the due one and keeps learning (with ``every_rows`` the next
snapshot is at the next multiple of N; with ``every_seconds`` at the first batch end after the one
in flight is durable) and gives the writer, which is falling behind, its normal priority back; but
it skips at most ``max_skipped`` due snapshots in a row: the next one waits for the writer, so a
durable snapshot is never more than ``max_skipped + 1`` cadences old (plus the write in flight).
Each snapshot's history entry records, once it is durable, how long after its cut that was
(``latency_seconds``) and how many rows had been learned since (``latency_rows``); the
progress line shows the last ones. Coalescing a late snapshot into a later row would break the
exact row cadence, so it is not offered. A failed write (disk full, a killed writer) ends the
run with :class:`~streammn.stream.snapshot.SnapshotWriteFailed` (exit code 1); the snapshots before
it stay valid. The final snapshot (end of source, signal, bad batch) is written in the foreground.
With ``validation`` rows, a learner whose conversion is not declared serial
(``converts_in_writer``, see :class:`~streammn.learner.StructureLearner`), or weights refined
over a variable of more than 64 values (row by row, on parallel kernels), the model is converted,
its weights refined and the model scored on the learning thread (scoring and CSGS's fits run
numba's parallel kernels, which a forked child must not start); only the files are written in
the background.

The published weights (:mod:`streammn.network.published`): with the learner's ``weights="refined"``
(the default) the learner keeps a uniform sample of its stream
(:mod:`streammn.network.weight_sample`), and every snapshot publishes the learner's network with
its weights continued by pseudo-likelihood on the sample's training rows when they score its
held-out rows (or the ``validation`` rows) better; the manifest's
``weights`` entry records the choice, each candidate's held-out PLL and the time it took. The
refinement runs where the conversion does (in the writer child, on serial kernels, unless the
model is converted on the learning thread) and continues from the previous snapshot's refined
weights, which the parent reads back from the durable snapshot (``WEIGHT_STATE_FILE``), so a
resumed run continues from the very weights an uninterrupted one does.

With ``every_rows=N`` snapshots fall on rows N, 2N, 3N... exactly: a batch that crosses a
multiple of N is learned in two pieces, cut at the multiple, when the source can name the
position after any row of a batch (``position_after``: files, arrays, generators); the learners
do not depend on how the stream is cut into batches, so the model is the same. Message logs
(Kafka, Redis) resume only at message boundaries: there the snapshot falls at the first batch
end at or after each multiple. A finite source (``rewindable``) is read one batch ahead
(:class:`~streammn.stream.source.Lookahead`) where a snapshot is due at a batch end: when that is
the source's last row, the snapshot there is the end's (a full weight search, the learner's
``finish``), so the model a run leaves behind does not depend on where its last row falls.
Sources with a ``commit(position)`` method (Kafka, Redis Streams) are told to commit a position
only after the snapshot covering it is durable; on a signal their ``stop()`` is called so a
source waiting for new messages returns.

A learner is any :class:`~streammn.learner.StructureLearner` (``partial_fit``, ``fit``,
``pll_terms`` for the prequential score, ``learned_network``, ``weight_sample``, ``to_bytes`` /
``from_bytes``, ``settings``). Its learning must depend only on the batches it sees, which
the sources make identical on resume; then a resumed run ends with the same model as an
uninterrupted one.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import Protocol, Sequence, TextIO, cast

import numpy as np

from streammn.stream.source import Batch, Lookahead, Source
from streammn.formats import SNAPSHOT_UAI_MAX_ENTRIES, model_files
from streammn.learner import StructureLearner
from streammn.network.loglinear import MASK_VALUES
from streammn.network.model import MarkovNetwork
from streammn.stream.resume_guard import check_resume_settings
from streammn.network.published import Published, WeightState, publish, sample_split, scorable_rows
from streammn.network.weight_sample import list_bytes
from streammn.stream.progress import STDERR, Progress, peak_rss_mb, progress_line
from streammn.blas import blas_threads
from streammn.stream.publishing import IN_PLACE_UNDER, Publisher
from streammn.stream.warmup import WriterKernels
from streammn.stream.compile_ahead import CompileAhead
from streammn.stream.snapshot import (
    NO_SNAPSHOT,
    RESUME_HINT,
    FileContent,
    Keyed,
    SnapshotWriteFailed,
    SnapshotWriter,
    latest_valid_snapshot,
    model_summary,
    resolve_snapshot,
)
from streammn.schema import Validated
from streammn.errors import EngineError, NoRowsError, NotFittedError

LEARNER_FILE = "learner.bin"
WEIGHT_STATE_FILE = "weight_state.bin"
ENGINE_KEY = "engine"
WHEN_BUSY = ("wait", "skip")


class RemotePasses(Protocol):
    """Passes of exact DTSL made elsewhere (:class:`connectors.distributed.DaskPasses`): DTSL's
    ``count_pass`` (:data:`streammn.trees.exact.CountPass`), which also counts the rows and
    says where a local pass would end."""

    def count_rows(self) -> int: ...

    @property
    def n_batches(self) -> int: ...

    def end_position(self, n_rows: int) -> object: ...


class StreamLearner:
    """Follow ``source``, learn with ``learner``, publish snapshots into ``snapshot_dir``.

    Parameters
    ----------
    every_rows, every_seconds:
        Snapshot cadence (either, both, or neither: then only at the end / on a signal).
    keep:
        Snapshots retained; older ones are removed once a newer one is durable.
    validation:
        Rows (a ``uint8`` matrix) scored at every snapshot; with the learner's
        ``weights="refined"`` they are the held-out rows the published weights are judged on,
        and every row of the learner's sample is a training row.
    prequential_rows:
        Rows of each batch scored before learning (the first ones); ``None`` scores all.
    formats:
        Model files written into each snapshot: any of ``"json"``, ``"mn"``, ``"uai"``.
    progress:
        A text stream for progress lines (``None``: silent; default ``"stderr"``: whatever
        ``sys.stderr`` is when a line is printed, so a redirection made after import holds).
    background:
        Write periodic snapshots from a forked child while learning continues (default; falls
        back to writing in this thread where the platform cannot fork), except cheap ones.
    in_place_under:
        With ``background``: a periodic snapshot whose predecessor's work (conversion, weights,
        files) took less than this many seconds is written in this thread, which costs the
        stream less than a fork (module docstring). Default ``IN_PLACE_UNDER`` (0.25); 0
        forks every one.
    when_busy:
        ``"wait"`` (default) or ``"skip"``: what happens when a snapshot is due while the
        previous one is still being written (see the module docstring).
    max_skipped:
        With ``"skip"``: due snapshots skipped in a row at most before one waits (default 3).
    compile_ahead:
        When numba's cache misses a kernel (a first run), compile the snapshot's kernels in a
        second process meanwhile (:mod:`streammn.stream.compile_ahead`; the CLI's choice for
        a person at a terminal). Default off.

    Examples
    --------
    Follow a synthetic stream of 4,000 rows, with a snapshot every 2,000:

    >>> import tempfile
    >>> from streammn.connectors.synthetic import SyntheticSource
    >>> from streammn.demo import planted_network
    >>> from streammn.dtsl import DTSL
    >>> from streammn.stream.engine import StreamLearner
    >>> from streammn.stream.snapshot import load_snapshot
    >>> planted, _ = planted_network(8, seed=0)
    >>> source = SyntheticSource(planted, n_rows=4000, batch_size=1000, seed=0)
    >>> engine = StreamLearner(source, DTSL(source.schema, kappa=0.01), tempfile.mkdtemp(),
    ...                        every_rows=2000, progress=None)
    >>> path = engine.run()
    >>> path.name, [h["rows_seen"] for h in engine.state.history]
    ('snap-000002', [2000, 4000])
    >>> [round(h["prequential_pll"], 3) for h in engine.state.history]
    [-5.314, -4.808]
    >>> load_snapshot(path)
    MarkovNetwork(8 variables, 99 features, max_states=1048576)
    """

    def __init__(
        self,
        source: Source,
        learner: StructureLearner,
        snapshot_dir: str | os.PathLike,
        every_rows: int | None = None,
        every_seconds: float | None = None,
        keep: int = 5,
        validation: np.ndarray | None = None,
        prequential_rows: int | None = 4096,
        formats: Sequence[str] = ("json", "mn", "uai"),
        progress: TextIO | str | None = STDERR,
        progress_interval: float = 2.0,
        background: bool = True,
        in_place_under: float = IN_PLACE_UNDER,
        when_busy: str = "wait",
        max_skipped: int = 3,
        compile_ahead: bool = False,
    ):
        if every_rows is not None and every_rows < 1:
            raise EngineError(f"every_rows must be positive, got {every_rows}")
        if every_seconds is not None and every_seconds <= 0:
            raise EngineError(f"every_seconds must be positive, got {every_seconds}")
        if not isinstance(learner, StructureLearner):
            raise EngineError(
                f"{type(learner).__name__} is not a structure learner (see "
                f"streammn.learner.StructureLearner)"
            )
        try:
            same = learner.schema.same_stream(source.schema)
        except NotFittedError:
            name = type(learner).__name__
            raise EngineError(
                f"{name} has no schema: the engine learns over the source's, build the learner "
                f"over it ({name}(source.schema, ...))"
            ) from None
        if not same:
            raise EngineError(
                f"learner schema {learner.schema!r} differs from the source's {source.schema!r}"
            )
        if when_busy not in WHEN_BUSY:
            raise EngineError(f"when_busy must be one of {', '.join(WHEN_BUSY)}, got {when_busy!r}")
        if not (isinstance(in_place_under, (int, float)) and in_place_under >= 0):
            raise EngineError(f"in_place_under must be seconds >= 0, got {in_place_under!r}")
        if not (isinstance(max_skipped, int) and max_skipped >= 0):
            raise EngineError(f"max_skipped must be an integer >= 0, got {max_skipped!r}")
        if isinstance(progress, str) and progress != STDERR:
            raise EngineError(
                f"progress must be a text stream, None or {STDERR!r}, got {progress!r}"
            )
        self.source = source
        self.learner = learner
        self.writer = SnapshotWriter(snapshot_dir, keep=keep)
        self.every_rows = every_rows
        self.every_seconds = every_seconds
        self.validation = None if validation is None else source.schema.validate(validation)
        self.prequential_rows = prequential_rows
        self.formats = tuple(formats)
        self._progress = progress
        self.progress_interval = progress_interval
        self.weight_state = WeightState()  # where the last refinement left off
        self.state = Progress(next_snapshot_rows=every_rows)
        self.model: MarkovNetwork | None = None
        self.when_busy = when_busy
        self.max_skipped = max_skipped
        self.publisher = Publisher(background)
        self.in_place_under = float(in_place_under)
        self.compile_ahead = compile_ahead
        self._writer_kernels: WriterKernels | None = None  # loading beside the first batches
        self.published: list[dict] = []  # this run's durable snapshots, in order
        # (history entry, position, perf_counter at the cut) of the snapshot being written
        self._in_flight: tuple[dict, object, float] | None = None
        self._position = None  # the source position after the last row learned
        self._last_path: Path | None = None
        self._resumed_from: Path | None = None
        self._stop_signal: int | None = None

    def __repr__(self) -> str:
        return (
            f"StreamLearner({self.source.describe()}, {self.learner!r}, "
            f"every_rows={self.every_rows}, every_seconds={self.every_seconds}, "
            f"keep={self.writer.keep}, "
            f"background={self.publisher.background}, when_busy={self.when_busy!r})"
        )

    # resume -------------------------------------------------------------------------------
    def resume(self) -> bool:
        """Restore learner (with its weight sample), the weights' warm start, counters and
        source position from the newest valid snapshot, and point ``LATEST`` at it. Returns
        False (and changes nothing) when there is none. A snapshot of another learner class or
        other learner settings (``weights`` among them: its row sample would start over) is
        refused (:class:`~streammn.errors.ResumeSettingsError` names the setting). Takes the
        snapshot directory's writer lock, which the following :meth:`run` keeps until it
        ends."""
        self.writer.acquire()
        snap = latest_valid_snapshot(self.writer.directory)
        if snap is None:
            return False
        manifest = snap.manifest
        engine = manifest.get(ENGINE_KEY)
        if engine is None or LEARNER_FILE not in snap.files:
            raise EngineError(f"{snap.path}: not a snapshot of a StreamLearner run")
        check_resume_settings(snap.path, manifest, self.learner)
        learner = type(self.learner).from_bytes(snap.file(LEARNER_FILE).read_bytes())
        if not learner.schema.same_stream(self.source.schema):
            raise EngineError(f"{snap.path}: snapshot schema differs from the source's")
        if learner.weight_sample is not None and WEIGHT_STATE_FILE in snap.files:
            self.weight_state = WeightState.from_bytes(snap.file(WEIGHT_STATE_FILE).read_bytes())
        learner.schema.share_names(self.source.schema)  # names met go on numbered as before
        self.source.seek(manifest["source"]["position"])
        self.learner = learner
        self.state = Progress.from_dict(engine)
        if self.every_rows is not None and self.state.next_snapshot_rows is None:
            # the run resumed had no row cadence: this one's starts at its next multiple
            rows = self.state.rows_seen
            self.state.next_snapshot_rows = (rows // self.every_rows + 1) * self.every_rows
        self.writer.point_latest(snap.path)  # repairs a LATEST a killed writer left behind
        self._resumed_from = snap.path
        return True

    # the loop -----------------------------------------------------------------------------
    def run(self) -> Path:
        """Consume the source until it ends or a signal arrives; returns the last snapshot path.

        A :class:`~streammn.schema.SchemaError` (or any source error) from a batch stops the
        run after a snapshot of everything learned before that batch, then propagates.

        While batches are learned, numpy's BLAS keeps to one thread: OpenBLAS shuts its
        thread pool down at every ``fork()`` (each snapshot writer) and starts it again at its
        next call here, which cost about 0.1 s a snapshot (1M rows of 100 binary variables, a
        snapshot every 100k rows: 7.4 -> 6.2 s), and the learner's numba threads have the
        cores. The end of the source (the regressions' batch fit, the last snapshot) runs as
        before, on every BLAS thread.
        """
        with self._compiling_ahead():
            return self._run()

    def _run(self) -> Path:
        self.writer.acquire()  # one run per snapshot directory, refused at once
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
        self.learner.clear_stop()
        self._position = self.source.position()
        self._last_path = None
        # the writer's kernels load beside the batches after the first (whose own kernels
        # load first: numba's compiler serves one thread at a time)
        load_writer_kernels = self.publisher.background and bool(
            self.every_rows or self.every_seconds
        )
        self._fit_batches_to_budget()
        try:
            batches = Lookahead(self.source)
            with blas_threads(1):  # see the docstring
                while self._stop_signal is None:
                    try:
                        batch = next(batches)
                    except StopIteration:
                        break
                    except Exception as error:
                        try:
                            self._finish_in_flight()
                            if self.state.rows_seen > rows_at_start:
                                self._snapshot("error")
                        except Exception as also:  # keep the original error in front
                            error.add_note(f"the snapshot after it failed too: {also}")
                        raise
                    now = time.monotonic()
                    learned = 0
                    for piece in self._pieces(batch):
                        if self._stop_signal is not None:
                            break  # the rest of the batch is learned by a resumed run
                        self._learn(piece)
                        learned += len(piece)
                        if load_writer_kernels:
                            load_writer_kernels = False
                            self._writer_kernels = WriterKernels(
                                self.learner, self.formats, self._refines
                            )
                        self._finish_in_flight(block=False)
                        now = time.monotonic()
                        if self._due(now, last_snapshot_time):
                            batch_done = learned == len(batch)
                            if batch_done and self.source.rewindable and batches.at_end():
                                break  # the end's snapshot follows: the model a run leaves behind
                            if self._periodic_snapshot():
                                last_snapshot_time = time.monotonic()
                    if (
                        self.progress_stream is not None
                        and now - last_print >= self.progress_interval
                    ):
                        self._print_progress(now - started, self.state.rows_seen - rows_at_start)
                        last_print = now
            self._finish_in_flight()
            # a signal while the last snapshot finished asks for a prompt end too (no full
            # weight search, no batch fit)
            reason = "signal" if self._stop_signal is not None else "end"
            finished = reason == "end" and self.learner.finish()  # the model changed
            if self.state.rows_seen == 0 and reason == "end":
                raise NoRowsError(
                    f"{self.source.describe()}: no rows to learn from (no snapshot written)"
                )
            if self.state.rows_seen != self._last_snapshot_rows or finished:
                self._snapshot(reason)
            path = self._last_path
            if path is None:  # resumed with nothing new: that snapshot stands
                path = self._resumed_from or resolve_snapshot(self.writer.directory)
            if self.progress_stream is not None:
                self._print_progress(
                    time.monotonic() - started, self.state.rows_seen - rows_at_start, final=True
                )
            return path
        finally:
            if self._writer_kernels is not None:  # a run that ended before any snapshot
                self._writer_kernels.wait(raise_error=False)
                self._writer_kernels = None
            self.publisher.abandon()  # only a run ending on an unexpected error has one left
            for s, handler in previous.items():
                signal.signal(s, handler)
            self.writer.release()

    def run_multipass(self, passes: RemotePasses | None = None) -> Path:
        """Exact learning over a finite, rewindable source (``learner.fit`` makes its passes),
        after one pass that counts the rows; then one snapshot. Returns its path.

        With ``passes``, a runner of the learner's passes elsewhere (DTSL's ``count_pass``,
        e.g. :class:`streammn.connectors.distributed.DaskPasses`: Dask tasks over the Parquet
        source's partitions), the rows are counted and every pass is made there (``count_rows``,
        ``n_batches``, ``end_position``: where a local pass would leave the source); the
        snapshot holds the same model.
        """
        if not self.source.rewindable:
            raise EngineError(
                f"{self.source.describe()} cannot be read again: multi-pass "
                f"learning needs a finite file source"
            )
        with self.writer.holding(), self._compiling_ahead():
            return self._run_multipass(passes)

    def _compiling_ahead(self):
        """Where ``compile_ahead`` asks for it, the snapshot's kernels compiled in a second
        process on a first run."""
        if not self.compile_ahead:
            return contextlib.nullcontext()
        return CompileAhead(self.learner, self.formats, self._refines, self.validation is not None)

    def _run_multipass(self, passes):
        started = time.monotonic()
        if passes is not None:
            if self._refines:
                raise EngineError(
                    "refined weights keep a row sample in this process; with "
                    "passes made elsewhere (Dask), publish the closed form (the "
                    "learner's weights='closed-form')"
                )
            n_rows = passes.count_rows()
            self.state.rows_seen += n_rows
            self.state.batches_seen += passes.n_batches
            # where a local final pass would leave the source (recorded in the manifest)
            self.source.seek(passes.end_position(n_rows))
        else:
            self.source.rewind()
            for batch in self.source:
                self.state.rows_seen += len(batch)
                self.state.batches_seen += 1
            self.source.rewind()
        if self.state.rows_seen == 0:
            raise NoRowsError(
                f"{self.source.describe()}: no rows to learn from (no snapshot written)"
            )
        if self.progress_stream is not None:
            print(
                f"counted {self.state.rows_seen:,} rows; growing trees level by level",
                file=self.progress_stream,
                flush=True,
            )
        if passes is None:
            self.learner.fit(self.source)
        else:  # DTSL's exact passes, made on Dask
            self.learner.fit(self.source, count_pass=passes)
        self._position = self.source.position()
        path = self._snapshot("end")
        if self.progress_stream is not None:
            self._print_progress(time.monotonic() - started, self.state.rows_seen, final=True)
        return path

    @property
    def stop_signal(self) -> int | None:
        """The signal (SIGINT, SIGTERM) that ended the last :meth:`run`, or None."""
        return self._stop_signal

    def _on_signal(self, signum, frame):
        self._stop_signal = signum
        self.learner.stop()  # an update in flight is abandoned, not awaited
        self.source.stop()  # a following log source ends its wait for new rows

    def _fit_batches_to_budget(self) -> None:
        """Read a file's batches no longer than the learner's memory budget allows (DTSL's
        ``batch_rows``: the rows in flight are its share, :mod:`streammn.trees.budget`); the
        model does not depend on where batches are cut. A log source keeps its batches (the
        learner learns them in pieces)."""
        rows = self.learner.batch_rows
        if rows is not None and self.source.rewindable and self.source.batch_size > rows:
            self.source.batch_size = rows

    def _pieces(self, batch: Batch):
        """``batch``, cut at every multiple of ``every_rows`` it crosses and at the learner's
        next planned structure update (``rows_to_pause``: so that a stop finds an update at
        the end of a piece and can abandon it), when the source can say where each piece
        ends, as batches learned one after the other."""
        n, start = len(batch), 0
        while start < n:
            stop, end = n, batch.end
            # next_snapshot_rows is set wherever every_rows is (__init__, resume)
            room = (
                self.state.next_snapshot_rows - self.state.rows_seen  # type: ignore[operator]
                if self.every_rows is not None
                else 0
            )
            pause = self.learner.rows_to_pause()  # a structure update a stop may abandon
            if pause is not None and 0 < pause < n - start and not 0 < room <= pause:
                room = pause
            if 0 < room < n - start:
                cut = self.source.position_after(batch, start + room)
                if cut is not None:
                    stop, end = start + room, cut
            yield (
                batch
                if stop - start == n
                else Batch(
                    batch.rows[start:stop], end=end, start=batch.start + start, schema=batch.schema
                )
            )
            start = stop

    def _learn(self, batch: Batch) -> None:
        self._score(batch)  # a source's batch is validated once, by the source
        self.learner.partial_fit(batch)
        self.state.rows_seen += len(batch)
        self.state.batches_seen += 1
        self._position = batch.end

    def _advance_cadence(self) -> None:
        st = self.state
        if self.every_rows is not None:  # (next_snapshot_rows: see _pieces)
            while st.next_snapshot_rows <= st.rows_seen:  # type: ignore[operator]
                st.next_snapshot_rows += self.every_rows  # type: ignore[operator]

    def _due(self, now: float, last_time: float) -> bool:
        st = self.state
        # (next_snapshot_rows: see _pieces)
        if self.every_rows is not None and st.rows_seen >= st.next_snapshot_rows:  # type: ignore[operator]
            return True
        return self.every_seconds is not None and now - last_time >= self.every_seconds

    def _score(self, batch) -> None:
        if self.state.rows_seen == 0:
            return  # nothing learned yet: no model to test with
        if self.prequential_rows is not None:
            batch = batch.head(self.prequential_rows)
        terms = self.learner.pll_terms(batch)
        self.state.preq_log_sum += float(terms.sum())
        self.state.preq_rows += len(batch)

    @property
    def _last_snapshot_rows(self) -> int | None:
        return self.state.history[-1]["rows_seen"] if self.state.history else None

    def current_model(self) -> MarkovNetwork:
        """The Markov network a snapshot would publish now (no snapshot is written)."""
        return self._weigh(self.learner.learned_network(), self._learner_pll(), None).model

    @property
    def _refines(self) -> bool:
        """Whether snapshots refine the learner's weights (the learner keeps a sample)."""
        return self.learner.weight_sample is not None

    def _refines_row_by_row(self) -> bool:
        """Whether refining takes the row-by-row path of variables of more than
        ``MASK_VALUES`` values, whose kernels are parallel only (so not for a forked child)."""
        return self._refines and self.learner.schema.cardinalities.max() > MASK_VALUES

    def _held_out(self) -> np.ndarray | None:
        """The rows the published weights are judged on: the validation rows, else the
        sample's held-out share."""
        if self._refines and self.validation is None:
            return self.learner.weight_sample.held_out  # type: ignore[union-attr]  # (_refines)
        return self.validation

    def _learner_pll(self) -> float | None:
        """The learner's own PLL of the held-out rows (a DN's, for DTSL): recorded beside the
        published candidates. Computed here on the learning thread (its kernels may be
        parallel), at the cut."""
        held = scorable_rows(self.learner.schema, self._held_out())
        if not self._refines or held is None or held.shape[0] == 0:
            return None
        terms = self.learner.pll_terms(Validated(held, self.learner.schema))
        return _finite(float(terms.sum(axis=1).mean()))

    def _weigh(
        self, model: MarkovNetwork, learner_pll: float | None, reason: str | None
    ) -> Published:
        """The weights to publish for the learner's ``model`` (module docstring). The rows are
        those the model can score (:func:`scorable_rows`): in missing mode the complete ones,
        as a pseudo-likelihood term reads the whole Markov blanket of its variable. The fit's
        work is what the rows learned have earned (:meth:`WeightState.affordable`), and a
        probe that found nothing waits for the stream to double, except at the end of a finite
        source, where the model a run leaves behind gets a full fit."""
        if not self._refines:
            return Published(
                model, {"published": "closed-form", "refinement": "off"}, self.weight_state
            )
        sample = self.learner.weight_sample
        assert sample is not None  # _refines
        train, held = sample_split(model.schema, sample, self.validation)
        limit = (
            None
            if reason == "end"
            else self.weight_state.affordable(self.state.rows_seen, train.shape[0])
        )
        if reason == "end" and self.progress_stream is not None and train.shape[0]:
            print(
                f"refining the published weights on {train.shape[0]:,} sample rows "
                f"(judged on {held.shape[0]:,} held-out rows)",
                file=self.progress_stream,
                flush=True,
            )
        return publish(
            model,
            train,
            held,
            self.weight_state,
            list_bytes(sample),
            learner_pll,
            limit,
            None if reason == "end" else self.state.rows_seen,
            probe=reason != "end",  # the model a run leaves behind: the full search decides
        )

    def _skips(self) -> bool:
        """Whether a due snapshot is skipped: the writer is busy, ``when_busy`` is ``"skip"``
        and fewer than ``max_skipped`` were skipped since the last one written."""
        return (
            self.when_busy == "skip"
            and self.publisher.busy
            and self.state.skipped_in_a_row < self.max_skipped
        )

    def _periodic_snapshot(self) -> bool:
        """A due snapshot: skipped (:meth:`_skips`; the writer, fallen behind, is hurried) or
        cut in the background; whether it was cut."""
        if self._skips():
            self._advance_cadence()
            self.state.snapshots_skipped += 1
            self.state.skipped_in_a_row += 1
            self.publisher.hurry()
            return False
        self._snapshot("periodic", background=True)
        return True

    def _in_place_pays(self) -> bool:
        """Whether a due periodic snapshot is written here rather than by a forked child: the
        last one's work took less than ``in_place_under`` seconds (module docstring). Either
        way the snapshot's bytes are the same (the parallel and serial kernels give the same
        bits)."""
        last = next((e for e in reversed(self.state.history) if "convert_seconds" in e), None)
        return (
            self.publisher.background
            and last is not None
            and last["convert_seconds"] + last["write_seconds"] < self.in_place_under
        )

    def _kernels_loaded(self) -> None:
        """Wait for the writer's kernels being loaded beside the first batches, if they are."""
        loading, self._writer_kernels = self._writer_kernels, None
        if loading is not None:
            loading.wait()

    def _snapshot(self, reason: str, background: bool = False) -> Path | None:
        """Cut a snapshot of the state now: written by the publisher's child (``background``,
        unless :meth:`_in_place_pays`; returns None) or here (returns its path). Any snapshot
        in flight is finished first."""
        self._kernels_loaded()
        t0 = time.perf_counter()
        self._finish_in_flight()
        waited = time.perf_counter() - t0
        if background and self._stop_signal is not None:
            return None  # stopped while waiting: the final snapshot is cut next, here
        background = background and not self._in_place_pays()  # known once the last is durable
        st = self.state
        self._advance_cadence()
        st.snapshots_written += 1
        st.skipped_in_a_row = 0
        entry = {
            "rows_seen": st.rows_seen,
            "reason": reason,
            "prequential_pll": _finite(st.prequential_pll),
            "validation_pll": None,
        }
        if reason == "periodic":  # the others are all written here
            entry["in_place"] = not (background and self.publisher.background)
        st.history.append(entry)
        st.history = st.history[-1000:]
        scored = None
        learner_pll = self._learner_pll()
        if background and (
            self.validation is not None
            or not self.learner.converts_in_writer
            or self._refines_row_by_row()
        ):
            scored = self._convert(learner_pll, reason)  # parallel kernels: not in a child
        work = functools.partial(
            self._publish, reason, self._position, peak_rss_mb(), learner_pll, scored
        )
        if background:
            self.publisher.start(work)
            self._in_flight = (entry, self._position, t0 + waited)
            entry["wait_seconds"] = waited  # learning held up by the previous snapshot
            entry["pause_seconds"] = time.perf_counter() - t0 - waited  # the cut itself
            return None
        try:
            result = work()
        except OSError as error:
            raise SnapshotWriteFailed(self._failure(entry, error)) from error
        self._published(entry, self._position, result, t0 + waited)
        return self._last_path

    def _convert(self, learner_pll: float | None, reason: str | None):
        """The model to publish with the seconds its conversion took, its validation PLL and
        the weights' decision (:class:`~streammn.network.published.Published`); keeps where the
        refinement left off."""
        t0 = time.perf_counter()
        published = self._weigh(self.learner.learned_network(), learner_pll, reason)
        self.weight_state = published.state
        model = published.model
        convert_seconds = time.perf_counter() - t0
        validation = scorable_rows(model.schema, self.validation)
        validation_pll = _finite(
            model.pll(validation) if validation is not None and validation.shape[0] else None
        )
        return model, convert_seconds, validation_pll, published

    def _publish(self, reason: str, position, peak_rss_mb, learner_pll, scored=None) -> dict:
        """Write the snapshot (in the publisher's child, or here); the model is converted
        here unless ``scored`` (from :meth:`_convert`) already holds it."""
        model, convert_seconds, validation_pll, published = scored or self._convert(
            learner_pll, reason
        )
        self.model = model
        st = self.state
        st.history[-1]["validation_pll"] = validation_pll
        made = model_files(
            model.schema, model.features, self.formats, uai_max_entries=SNAPSHOT_UAI_MAX_ENTRIES
        )
        skipped = made.skipped  # UAI, when its tables would be too large
        # a model unchanged since the last snapshot shares its files (snapshot module doc)
        files: dict[str, FileContent] = {
            name: Keyed(made.key, write) for name, write in made.items()
        }
        files[LEARNER_FILE] = self.learner.to_bytes()
        files.update(self.learner.snapshot_files())  # e.g. ET's model.et
        if self._refines:
            files[WEIGHT_STATE_FILE] = self.weight_state.to_bytes()
        manifest = {
            "rows_seen": st.rows_seen,
            "reason": reason,
            "source": {"description": self.source.describe(), "position": position},
            "learner": {"class": type(self.learner).__name__, "params": self.learner.settings()},
            "scores": {
                "prequential_pll": _finite(st.prequential_pll),
                "validation_pll": validation_pll,
            },
            "model": model_summary(model.schema, model.features),
            "skipped_formats": skipped,
            "weights": {"choice": self.learner.weights, **published.record},
            "timings": {"convert_seconds": convert_seconds, "weights_seconds": published.seconds},
            "peak_rss_mb": peak_rss_mb,
            ENGINE_KEY: st.to_dict(),
        }
        conditionals = self.learner.conditionals()
        if conditionals is not None:  # which kind of conditional each variable uses
            manifest["conditionals"] = conditionals
        drift = self.learner.drift_summary()
        if drift is not None:  # learners that adapt to drift: their alarms and swaps
            manifest["drift"] = drift
        schema = self.learner.schema
        if schema.grows:  # new values mid-stream: the cardinalities now and their version
            manifest["schema"] = {
                "version": schema.version,
                "cardinalities": schema.cardinalities.tolist(),
            }
        if schema.named:  # what the numeric model files' states are called
            manifest["vocabulary"] = {v.name: v.to_dict() for v in schema if v.state_names}
        t1 = time.perf_counter()
        path = self.writer.write(files, manifest)
        return {
            "path": str(path),
            "validation_pll": validation_pll,
            "convert_seconds": convert_seconds,
            "write_seconds": time.perf_counter() - t1,
            **self.writer.last_write,
            "weights": published.record["published"],
        }

    def _finish_in_flight(self, block: bool = True) -> None:
        """Take the result of the snapshot in flight (waiting for it with ``block``)."""
        if self._in_flight is None:
            return
        entry, position, cut = self._in_flight
        try:
            result = self.publisher.wait() if block else self.publisher.poll()
        except SnapshotWriteFailed as error:
            self._in_flight = None
            if self._stop_signal is not None and error.killed_by == self._stop_signal:
                # the signal that stops this run reached the writer too (a process group or
                # cgroup was signalled): that snapshot is lost, the final one is written next
                self.state.history.remove(entry)
                self.state.snapshots_written -= 1
                return
            raise SnapshotWriteFailed(self._failure(entry, error)) from None
        if result is not None:
            self._in_flight = None
            if self._refines:  # refined in the child: continue where it left off
                self.weight_state = WeightState.from_bytes(
                    (Path(result["path"]) / WEIGHT_STATE_FILE).read_bytes()
                )
            self._published(entry, position, result, cut)

    def _published(self, entry: dict, position, result: dict, cut: float) -> None:
        """A snapshot is durable: record it (with its latency since ``cut``, the
        ``perf_counter`` at its cut), then let a log commit the offsets it covers."""
        entry["latency_seconds"] = time.perf_counter() - cut
        entry["latency_rows"] = self.state.rows_seen - entry["rows_seen"]
        entry["validation_pll"] = result["validation_pll"]
        entry["convert_seconds"] = result["convert_seconds"]  # kept by the next snapshot
        entry["write_seconds"] = result["write_seconds"]
        entry["bytes_written"] = result["bytes_written"]  # new bytes on disk; the rest shared
        entry["bytes_shared"] = result["bytes_shared"]
        entry["weights"] = result["weights"]  # which weights the snapshot published
        self._last_path = Path(result["path"])
        self.published.append(
            {
                "rows_seen": entry["rows_seen"],
                "path": self._last_path,
                "durable_at_rows": self.state.rows_seen,
            }
        )
        self.source.commit(position)  # a log's offsets move only once the snapshot is durable

    def _failure(self, entry: dict, error) -> str:
        """The run's last words on a failed snapshot: which one, why, and what survives
        (unless the writer's own message already says so)."""
        what = f"writing the snapshot at row {entry['rows_seen']:,} failed: {error}"
        if RESUME_HINT in str(error) or NO_SNAPSHOT in str(error):
            return what
        # the directory says, not this run's record: a writer killed after its rename has
        # made durable a snapshot this run never heard of, and --resume continues from that one
        snap = latest_valid_snapshot(self.writer.directory)
        durable = snap.path if snap is not None else None
        last = (
            f"the last durable snapshot is {durable}; {RESUME_HINT}"
            if durable is not None
            else f"{NO_SNAPSHOT} in {self.writer.directory}"
        )
        return f"{what}; {last}"

    @property
    def progress_stream(self) -> TextIO | None:
        """Where progress lines go now (see ``progress``)."""
        # (the one str __init__ accepts is STDERR)
        return sys.stderr if self._progress == STDERR else cast("TextIO | None", self._progress)

    def _print_progress(self, elapsed: float, rows: int, final: bool = False) -> None:
        memory = self.learner.memory_binding()  # what the budget holds back
        print(
            progress_line(self.state, self.learner, elapsed, rows, final, memory),
            file=self.progress_stream,
            flush=True,
        )


def _finite(x):
    return None if x is None or not math.isfinite(x) else float(x)
