"""Every exception streammn raises on purpose, in one module, with its CLI exit code.

Each library error class derives from one of the three kinds below, and the kind carries the
exit code the ``streammn`` command returns for it, so the CLI maps any error in one line
(``error.exit_code``) instead of a list of ``isinstance`` checks that falls behind the code:

- :class:`SettingsError` (exit 2): arguments or options that make no sense, or that contradict
  what a snapshot being resumed was made with.
- :class:`DataError` (exit 3): rows, model files, snapshots or learner states that are malformed.
- :class:`UnavailableError` (exit 4): a source or service that cannot be reached at all.

Errors outside this tree (a bug, ``MemoryError``) exit 1. The kinds keep ``ValueError`` as a
base so code that caught ``ValueError`` before the root existed keeps working; the classes that
replaced a ``TypeError``, ``IndexError`` or ``RuntimeError`` keep that builtin as a base too.

Every class is defined here (like scikit-learn's ``sklearn.exceptions``) and imported back by
the module that raises it, so ``from streammn.schema import SchemaError``,
``from streammn.connectors.base import SourceError`` and ``streammn.SchemaError`` keep working. The
areas, in order:

- the root and the kinds;
- schemas and rows (:mod:`streammn.schema`, :mod:`streammn.trees.growth`);
- sources and connectors (:mod:`streammn.stream.source`, :mod:`connectors`);
- models and features (:mod:`streammn.features`, :mod:`streammn.network.model`,
  :mod:`streammn.dn`, :mod:`streammn.network.loglinear`);
- model files (:mod:`streammn.formats`);
- snapshots and publishing (:mod:`streammn.stream.snapshot`, :mod:`streammn.stream.publishing`);
- learners, the engine and weights (:mod:`streammn.learner`, :mod:`streammn.stream.engine`,
  :mod:`streammn.stream.resume_guard`, :mod:`streammn.network.published`,
  :mod:`streammn.network.weights`, :mod:`streammn.river`);
- the learner families (DTSL, DN2MN, tree features, CSGS, EdgeGrafting, ET);
- sufficient statistics (:mod:`streammn.stats`);
- inference (:mod:`streammn.inference`);
- optional extras (pgmpy, pictures).

This module is the bottom layer: it imports nothing from ``streammn`` or ``connectors``.
"""

from __future__ import annotations

import os

EXIT_OK, EXIT_OTHER, EXIT_USAGE, EXIT_BAD_INPUT, EXIT_UNAVAILABLE = 0, 1, 2, 3, 4
EXIT_SIGTERM, EXIT_SIGINT = 143, 130


# --- the root and the kinds ---------------------------------------------------------------------


class StreamMNError(Exception):
    """Root of every error streammn raises on purpose; ``exit_code`` is the CLI's."""

    exit_code = EXIT_OTHER


class SettingsError(StreamMNError, ValueError):
    """Options or arguments that are invalid or inconsistent (exit code 2)."""

    exit_code = EXIT_USAGE


class UsageError(SettingsError):
    """Command-line arguments that parse but do not make sense together (exit code 2)."""


class DataError(StreamMNError, ValueError):
    """Input rows, files, models, snapshots or states that are malformed (exit code 3)."""

    exit_code = EXIT_BAD_INPUT


class UnavailableError(StreamMNError):
    """A source, file or service that cannot be reached at all (exit code 4)."""

    exit_code = EXIT_UNAVAILABLE


def exit_code(error: BaseException) -> int:
    """The CLI exit code for ``error``: its class's own, 130 for Ctrl-C, else 1."""
    if isinstance(error, KeyboardInterrupt):
        return EXIT_SIGINT
    return (
        getattr(error, "exit_code", EXIT_OTHER) if isinstance(error, StreamMNError) else EXIT_OTHER
    )


# --- schemas and rows (streammn.schema, streammn.trees.growth) ----------------------------------


class SchemaError(DataError):
    """Rows that do not fit the schema, or a schema that cannot be built.

    ``row`` is the absolute row offset in the source (``None`` when the error is not about a
    row), ``column`` the column index, ``source`` a description of where the rows came from,
    ``reason`` the message without that location prefix.
    """

    def __init__(
        self,
        message: str,
        *,
        row: int | None = None,
        column: int | None = None,
        source: str | None = None,
    ):
        self.reason = message
        self.row = row
        self.column = column
        self.source = source
        where = []
        if source is not None:
            where.append(str(source))
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class MissingModeUnsupported(SettingsError):
    """A learner that cannot learn from missing values was given a schema in missing mode."""


class GrowthUnsupported(SettingsError):
    """A learner that cannot add values mid-stream was given a schema in growth mode."""


class GrowthStateError(DataError):
    """Learner-state arrays that do not have the widths of the schema they are grown from."""


class SchemaFileUnavailable(UnavailableError):
    """A declared schema file that is missing or cannot be opened (exit code 4, like a source)."""


# --- sources and connectors (streammn.stream.source, connectors) -------------------------------


class SourceError(DataError, OSError):
    """A source cannot be opened or read: missing, truncated or corrupt file, broker gone.

    Rows yielded before the error stay valid; the message names the file or endpoint.
    """


class SourceUnavailable(SourceError, UnavailableError):
    """The source's backing service or file cannot be reached at all (CLI exit code 4)."""

    exit_code = EXIT_UNAVAILABLE


class BatchError(DataError, TypeError):
    """A :class:`~streammn.stream.source.Batch` whose rows are not a C-contiguous 2-D ``uint8``
    array."""


class DistributedError(SettingsError):
    """Dask is missing, a cluster spec is malformed, or the input cannot be partitioned."""


class MockClusterError(UnavailableError, RuntimeError):
    """librdkafka's mock Kafka cluster did not start, or refused to create a topic."""


# --- models and features (streammn.features, .model, .loglinear; streammn.dn) ----------


class ModelError(SettingsError):
    """Features, weights, CPDs or rows that do not fit a model's schema or each other."""


class VariableIndexError(ModelError, IndexError):
    """A variable index outside ``0 .. n_vars - 1`` (a negative one would silently wrap)."""


class NoRowsError(DataError):
    """A score asked of no rows: a mean over nothing has no value to give."""


class EnumerationTooLarge(SettingsError):
    """Exact enumeration was asked for a model with more joint states than allowed."""


# --- model files (streammn.formats) -------------------------------------------------------------


class ModelFormatError(DataError):
    """A model file that cannot be read or a model that cannot be written in a format.

    ``path`` and ``line`` (1-based, ``None`` when not about a line) say where; ``reason`` is the
    message without them.
    """

    def __init__(
        self, message: str, *, path: str | os.PathLike | None = None, line: int | None = None
    ):
        self.reason = message
        self.path = None if path is None else str(path)
        self.line = line
        where = []
        if self.path is not None:
            where.append(self.path)
        if line is not None:
            where.append(f"line {line}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class ModelFileMissing(ModelFormatError, UnavailableError):
    """A model file (or snapshot directory) that is not there: a :class:`ModelFormatError`
    naming it, with the exit code of a missing file (4), as a missing data file has."""

    exit_code = EXIT_UNAVAILABLE


class ModelWriteError(UnavailableError):
    """A model file cannot be written where asked (missing directory, permissions; exit 4)."""


# --- snapshots and publishing (streammn.stream.snapshot, .publishing) --------------------------


class SnapshotError(DataError):
    """A snapshot that is missing, partial, corrupt or cannot be written; ``path`` names it."""

    def __init__(self, message: str, path: str | os.PathLike | None = None):
        self.path = None if path is None else str(path)
        super().__init__(f"{self.path}: {message}" if self.path else message)


class SnapshotMissingFile(SnapshotError):
    """A snapshot directory, its manifest or a file it lists that is not there: damage, or a
    snapshot its writer removed (its ``keep``) while it was read, which a reader of a snapshot
    root takes for a cue to read the then-newest one
    (:func:`streammn.stream.snapshot.with_snapshot`)."""


class SnapshotVanished(SnapshotError, UnavailableError):
    """Snapshots removed by their writer while being read, more times in a row than a reader
    retries, or a snapshot directory named on its own removed while being read: nothing is
    damaged, the snapshot is gone (exit code 4)."""

    exit_code = EXIT_UNAVAILABLE


class SnapshotNameError(SettingsError):
    """A snapshot file name that is not a plain file name, or is reserved (the manifest's)."""


class SnapshotWriteFailed(StreamMNError):
    """A snapshot could not be written (disk full, permissions, a background writer process
    killed): the run stops with exit code 1; the snapshots written before stay valid and
    resumable. ``killed_by`` is the signal that ended a writer process, if one did."""

    def __init__(self, message: str, killed_by: int | None = None):
        super().__init__(message)
        self.killed_by = killed_by


class SnapshotDirectoryBusy(UnavailableError):
    """Another process is writing snapshots into the directory (exit code 4)."""


class SnapshotInFlight(StreamMNError, RuntimeError):
    """A publisher asked to start a snapshot while its previous one is still in flight (a bug
    in the caller: exit code 1)."""


# --- learners, the engine and weights -----------------------------------------------------------


class LearnerStateError(DataError):
    """Bytes that are not a saved state of the learner class they are loaded as."""


class NotFittedError(SettingsError, AttributeError):
    """A learner built without a schema was asked for its schema, model, scores or another
    learned attribute before ``fit`` or ``partial_fit`` took one from the data (scikit-learn's
    name, and like scikit-learn's an ``AttributeError`` too, so ``hasattr`` says no)."""


class LearnerDefinitionError(StreamMNError, TypeError):
    """A learner class whose ``__init__`` takes ``*args``/``**kwargs`` instead of named
    parameters (a bug in the learner: exit code 1)."""


class EngineError(SettingsError):
    """The engine cannot start or resume (e.g. a snapshot of another learner or schema)."""


class ResumeSettingsError(SettingsError):
    """A resumed run asks for a learner setting other than the snapshot's: ``option`` (the
    learner's parameter name, ``"learner"`` for its class), ``snapshot_value`` and
    ``requested_value``."""

    def __init__(self, snapshot, option: str, snapshot_value, requested_value):
        self.option, self.snapshot_value, self.requested_value = (
            option,
            snapshot_value,
            requested_value,
        )
        if option == "learner":
            what = (
                f"the snapshot holds a {snapshot_value} learner, this run uses "
                f"{requested_value}; resume with the same learner"
            )
        else:
            what = (
                f"the snapshot was learned with {option}={snapshot_value!r}, this run asks "
                f"for {option}={requested_value!r}; resume with the snapshot's setting"
            )
        super().__init__(f"{snapshot}: {what} or start a new snapshot directory")


class WeightsError(SettingsError):
    """A bad ``weights`` choice or budget."""


class WeightStateError(DataError):
    """A saved weight sample or warm-start state that cannot be read."""


class WeightLearningError(SettingsError):
    """Bad weight-learning arguments (no rows, wrong number of initial weights, stddev <= 0)."""


class WeightLearningTypeError(WeightLearningError, TypeError):
    """Weight learning given something that is not a MarkovNetwork or a FeatureSet."""


class RiverRowError(DataError):
    """A river row (dict) or frame that does not fit the learner's schema."""


# --- the learner families (DTSL, DN2MN, tree features, CSGS, EdgeGrafting, ET) ------------------


class DTSLError(SettingsError):
    """A DTSL setting or call that cannot work (bad parameter, wrong mode, unusable source)."""


class DTSLStateError(DataError):
    """Bytes that are not a saved DTSL state (:meth:`DTSL.from_bytes`)."""


class DN2MNError(SettingsError):
    """A DN2MN argument is missing or inconsistent (base distribution, order, refine data)."""


class FeatureMethodError(SettingsError):
    """An unknown feature-generation method name."""


class CSGSError(SettingsError):
    """Bad CSGS settings, or a model asked for before any row was seen."""


class CSGSStateError(DataError):
    """A serialised CSGS state could not be read."""


class GraftingError(SettingsError):
    """An EdgeGrafting setting or call that cannot work (bad parameter, no rows yet)."""


class GraftingStateError(DataError):
    """A serialised EdgeGrafting state could not be read."""


class ETError(SettingsError):
    """An EnsembleOfTrees setting or call that cannot work."""


class ETStateError(DataError):
    """A serialised EnsembleOfTrees state could not be read."""


class ETDensityError(DataError):
    """An ET density file that cannot be read."""


# --- sufficient statistics (streammn.stats) -----------------------------------------------------


class StatsError(SettingsError):
    """Bad arguments to a statistics store (smoothing, capacity, variables, no rows yet)."""


class StatsIndexError(StatsError, IndexError):
    """A variable index outside ``0 .. n_vars - 1`` of a statistics store's schema."""


class StatsFormatError(DataError):
    """A byte string is not a valid serialised store of the requested kind."""


class StatsBytesError(StatsFormatError, TypeError):
    """A serialised store asked to be read from something that is not bytes."""


class StatsMergeError(SettingsError):
    """Two stores cannot be merged: different kinds, schemas or settings."""


# --- inference (streammn.inference) -------------------------------------------------------------


class InferenceError(SettingsError):
    """Bad inference arguments (evidence shape or values, sample counts)."""


class InferenceTypeError(InferenceError, TypeError):
    """Inference asked of something that is not a MarkovNetwork or a DependencyNetwork."""


# --- optional extras (pgmpy, pictures) ----------------------------------------------------------


class PgmpyMissing(UnavailableError):
    """pgmpy is not installed (``pip install 'streammn[pgmpy]'``)."""


class PgmpyModelError(DataError):
    """A pgmpy model that has no streammn counterpart."""


class VizMissing(UnavailableError):
    """matplotlib or networkx is not installed (``pip install 'streammn[viz]'``)."""


class PictureError(SettingsError):
    """A picture that cannot be made as asked (unknown suffix, nothing to draw)."""
