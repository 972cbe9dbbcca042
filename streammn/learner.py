"""The structure-learner contract, and parameters read from ``__init__``.

Every structure learner (DTSL, EdgeGrafting, EnsembleOfTrees, CSGS) subclasses one contract,
:class:`StructureLearner`, and the engine calls its members instead of probing for them: it
learns from validated batches (``partial_fit``) or a whole finite source (``fit``), scores rows
with its current conditionals (``pll_terms``, the prequential score), gives its current
:class:`~streammn.network.model.MarkovNetwork`, saves and restores its full state (``to_bytes`` /
``from_bytes``), reports its settings (``settings``), and may add snapshot files or a drift
summary (defaults: none). ``tests/test_conformance.py`` checks every learner against it.

:class:`Estimator` derives ``get_params``, ``set_params``, ``clone`` and ``__repr__`` from the
``__init__`` signature (the idea of river's ``Base._get_params`` and scikit-learn's
``_get_param_names``): a parameter is a keyword of ``__init__`` stored under the same attribute
name, so a learner never repeats its parameter list by hand and ``type(l)(**l.get_params())``
rebuilds it (so does scikit-learn's ``clone``). The first argument, ``schema``, is data the
learner is built over rather than a setting: ``get_params`` holds it as given (scikit-learn's
convention), ``settings`` leaves it out (what snapshot manifests and saved states record, the
schema stored apart), and the repr shows it first. What each parameter allows, its help and its
command-line flag are declared once, in the class's ``parameters`` table
(:mod:`streammn.params`); ``__init__`` checks its arguments against it. A renamed parameter
is declared in the class's ``renamed`` table (old name -> new): ``__init__``, ``set_params`` and
``from_bytes`` take the old name too (and it still reads as an attribute), while ``get_params``
and saved states give the new one.

A learner built without a schema (``DTSL()``, every parameter defaulted) takes it from the
data. ``fit`` takes it from all of its data, anew at every ``fit``: a source's own schema, or
inferred from rows in memory by :func:`~streammn.schema.inference.infer_rows_schema` (a
matrix holds state numbers; a table or data frame names its states and bins its numbers).
``partial_fit`` takes it from its first batch; after it, a learner that can add values
mid-stream (Hoeffding DTSL, :mod:`streammn.trees.growth`) lets every variable of named or
numbered states grow up to :data:`INFERRED_MAX_CARDINALITY` states, and the others keep it
fixed (a later new value is a located ``SchemaError``). Before its first data such a learner is
unfitted: its ``schema``, model and scores raise :class:`~streammn.errors.NotFittedError`.
``get_params`` keeps ``schema=None``, so ``clone`` gives a learner that infers again, and a
saved state records the schema taken apart from the one given.

The cap is 255 states, the format's own: state numbers are ``uint8`` (255 is the missing
value). It reserves nothing, since growth extends the statistics when a value first appears
rather than allocating them at the cap: a variable grown to ``c`` states costs what one
declared with ``c`` costs. That cost is in DTSL's split statistics, whose every slot holds
``max_card * (K + 1)`` counts (``K`` indicator columns, one per state beyond the first): at 100
binary variables a slot takes 1.6 KB, and with one of them grown to 255 states 0.7 MB, so the
same ``memory_mb`` lets about 440 times fewer leaves collect at once. A lower cap would save
nothing up front and stop a stream of ordinary categories (countries, products) with an error.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Iterable, Self, TypeAlias

import numpy as np

from streammn.errors import (
    DataError,
    LearnerDefinitionError,
    LearnerStateError,
    NotFittedError,
    SettingsError,
    WeightStateError,
)
from streammn.network.model import MarkovNetwork
from streammn.packed_state import pack_state, unpack_state
from streammn.params import OneOf, Param, check_params, new_names, renamed_to
from streammn.network.published import WEIGHTS, Published, publish_sample
from streammn.schema import MAX_CARDINALITY, Rows, Schema
from streammn.schema.variables import dense
from streammn.schema.encoding import table_of
from streammn.schema.inference import infer_rows_schema
from streammn.network.weight_sample import MEMORY_MB, WeightSample

#: the ``weights`` entry of every learner's parameter table
WEIGHTS_PARAM = Param(
    OneOf(*WEIGHTS),
    "weights of the published network: 'refined' continues the learner's own by "
    "pseudo-likelihood on a uniform sample of the stream that the learner keeps, and "
    "publishes them when they score held-out rows of the stream better; 'closed-form' "
    "publishes the learner's own (DTSL: DN2MN's closed form) and keeps no sample",
    flag="--weights",
)
#: what ``fit`` learns from: rows in memory, or a finite source (an iterable of batches)
Data: TypeAlias = "Rows | Iterable[Rows]"

SAMPLE_KEY = "weight_sample"  # the sample's bytes in a saved state
INFERRED_KEY = "schema_inferred"  # in a saved state: the schema was taken from the data
#: the most states a variable of a schema that ``partial_fit`` inferred may grow to (the
#: module docstring says why)
INFERRED_MAX_CARDINALITY = MAX_CARDINALITY


def _own_schema(data) -> Schema | None:
    """The schema ``data`` comes with: a source's, or that of a batch a source validated (an
    Arrow table's ``schema`` is no streammn schema); None for rows alone."""
    schema = getattr(data, "schema", None)
    return schema if isinstance(schema, Schema) else None


class Estimator:
    """Mixin: ``get_params``, ``set_params``, ``clone`` and ``__repr__`` from the ``__init__``
    signature, and validation of the settings against the class's ``parameters`` table
    (:mod:`streammn.params`)."""

    parameters: dict[str, Param] = {}
    param_error: type[Exception] = SettingsError  # what a disallowed setting raises
    #: the ``schema`` given to ``__init__``, what ``get_params`` gives (None: from the data)
    _declared_schema: Schema | None = None
    #: old name -> new name of the renamed parameters, still accepted with a warning
    renamed: dict[str, str] = {}

    def __init_subclass__(cls, **kwargs):
        """A class that renames parameters gets an ``__init__`` that also takes the old
        names (its signature, read by ``get_params`` and ``help()``, stays the new one)."""
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("renamed"):
            init = cls.__init__

            @functools.wraps(init)
            def __init__(self, *args, **kwargs):
                init(self, *args, **new_names(cls, kwargs, cls.param_error))

            cls.__init__ = __init__

    if not TYPE_CHECKING:  # a type checker sees the declared attributes only

        def __getattr__(self, name: str):
            """A renamed parameter read by its old name (deprecated)."""
            if name not in type(self).renamed:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            return getattr(self, renamed_to(type(self), name))

    def _check_params(self, values: dict) -> None:
        """Refuse a setting its table does not allow (``values``: ``__init__``'s
        ``locals()``); called first thing in ``__init__``."""
        check_params(type(self), values, self.param_error)

    @classmethod
    def _param_names(cls) -> list[str]:
        names = []
        for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise LearnerDefinitionError(
                    f"{cls.__name__}.__init__ takes *args/**kwargs: parameters must be named"
                )
            if p.name != "schema":
                names.append(p.name)
        return names

    def settings(self) -> dict:
        """The settings as passed to ``__init__``, without the schema (read from the attributes
        of the same names): what manifests, saved states and resume checks record."""
        return {name: getattr(self, name) for name in self._param_names()}

    def get_params(self, deep: bool = True) -> dict:
        """Every argument of ``__init__`` as given, the schema first (scikit-learn's
        convention, so that ``sklearn.base.clone`` and ``type(l)(**l.get_params())`` rebuild
        the learner; a schema inferred from the data is not an argument: ``schema`` stays
        None); ``deep`` is accepted for scikit-learn (a learner holds no estimators)."""
        return {"schema": self._declared_schema, **self.settings()}

    def set_params(self, **params) -> Self:
        """This learner, unfitted, with ``params`` changed (scikit-learn's convention: the
        settings are checked as ``__init__`` checks them, and learned state starts over)."""
        params = new_names(type(self), params, self.param_error)
        unknown = set(params) - {"schema", *self._param_names()}
        if unknown:
            raise self.param_error(f"{type(self).__name__} has no parameter {sorted(unknown)[0]!r}")
        fresh = self.clone(**params)
        self.__dict__.clear()
        self.__dict__.update(fresh.__dict__)
        return self

    def clone(self, **overrides) -> Self:
        """A fresh, unfitted learner with the same parameters (``overrides`` win)."""
        return type(self)(**{**self.get_params(), **overrides})

    def __repr__(self) -> str:
        args = [f"{k}={v!r}" for k, v in self.settings().items()]
        if self._declared_schema is not None:
            args.insert(0, repr(self._declared_schema))
        return f"{type(self).__name__}({', '.join(args)})"


class StructureLearner(Estimator):
    """What the engine, the river wrappers and the conformance suite need from a learner: a
    role with fixed verbs (river's base classes), so callers call and never probe.

    Subclasses implement the methods that raise ``NotImplementedError``; the others have
    defaults a learner overrides when it has more to say.
    """

    #: ``to_markov_network`` runs on serial kernels, so a forked snapshot writer may call it
    #: (DTSL's does); otherwise the engine converts on the learning thread and the writer only
    #: writes files.
    converts_in_writer: bool = False

    # the schema: given, or taken from the data ---------------------------------------------
    _schema: Schema | None = None

    @property
    def schema(self) -> Schema:
        """The variables learned over: the schema given to ``__init__``, or the one the first
        ``fit`` or ``partial_fit`` took from the data (grown since, in growth mode)."""
        if self._schema is None:
            raise self._not_fitted("schema")
        return self._schema

    if not TYPE_CHECKING:  # (as Estimator's)

        def __getattr__(self, name: str):
            """A learner built without a schema has no learned attributes before it takes one
            (its model, statistics, scores): asking for one raises :class:`NotFittedError`."""
            if name.startswith("_") or name in type(self).renamed or self._schema is not None:
                return super().__getattr__(name)
            raise self._not_fitted(name)

    def _not_fitted(self, name: str) -> NotFittedError:
        learner = type(self).__name__
        return NotFittedError(
            f"{learner} has no schema yet (asked for {name!r}): fit(X) or partial_fit(X) takes "
            f"it from the data (or build the learner over one: {learner}(schema))"
        )

    @property
    def n_features_in_(self) -> int:
        """The number of variables (scikit-learn's name for the columns ``fit`` saw)."""
        return self.schema.n_vars

    def __sklearn_tags__(self):
        """What scikit-learn's estimator checks should feed the learner: rows of state numbers
        (``categorical`` and ``positive_only``: they round their random data to non-negative
        integers), no target.
        Read by scikit-learn only, which is then installed."""
        from sklearn.utils import InputTags, Tags, TargetTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=False),
            input_tags=InputTags(categorical=True, positive_only=True),
        )

    def __sklearn_is_fitted__(self) -> bool:
        """Whether the learner can score rows: it has a schema (given, or taken from data)."""
        return self._schema is not None

    @property
    def adds_values(self) -> bool:
        """Whether a schema that ``partial_fit`` infers may grow (new values become new
        states): the learner can add values mid-stream under its settings. No by default."""
        return False

    def _init_schema(self, schema: Schema | None) -> None:
        """``__init__``'s last step: keep the ``schema`` argument and, given one, learn over it
        from now on (:meth:`_use_schema`); without one the first data will say."""
        self._declared_schema = schema
        if schema is not None:
            self._use_schema(schema)

    def _use_schema(self, schema: Schema) -> None:
        """Learn over ``schema`` from scratch: checked against the settings
        (:meth:`_check_schema`), then the learned state allocated over it (``_reset``)."""
        if not isinstance(schema, Schema):
            raise self.param_error(
                f"schema must be a streammn Schema (or None: taken from the data), got "
                f"{type(schema).__name__}"
            )
        self._check_schema(schema)
        self._schema = schema
        self._reset()

    def _check_schema(self, schema: Schema) -> None:
        """Refuse, with the learner's error class, a schema its settings cannot learn over."""

    def _reset(self) -> None:
        """A fresh learned state over :attr:`schema`."""
        raise NotImplementedError

    def _schema_for_fit(self, data) -> None:
        """``fit``'s first step, for a learner built without a schema: take it from ``data``
        (a source's own, or inferred from all the rows in memory), anew at every fit."""
        if self._declared_schema is None:
            schema = _own_schema(data)
            self._use_schema(schema if schema is not None else self._inferred(data))

    def _schema_for_batch(self, batch) -> None:
        """``partial_fit``'s first step, for a learner with no schema yet: take it from the
        first batch (the schema a source validated it against, or inferred from its rows and
        then growing up to :data:`INFERRED_MAX_CARDINALITY` states where :attr:`adds_values`)."""
        if self._schema is not None:
            return
        schema = _own_schema(batch)
        if schema is None:
            schema = self._inferred(batch)
            if self.adds_values:
                schema = schema.with_growth(INFERRED_MAX_CARDINALITY)
        self._use_schema(schema)

    def _inferred(self, data) -> Schema:
        """The schema of rows in memory (:func:`~streammn.schema.inference.infer_rows_schema`
        over all of them)."""
        dense(data)  # a sparse matrix is refused by name
        rows = getattr(data, "rows", data)  # a batch no source validated
        if not (isinstance(rows, (np.ndarray, list)) or table_of(rows) is not None):
            raise self.param_error(
                f"{type(self).__name__} built without a schema takes it from rows in memory (a "
                f"matrix, table or data frame) or a source, not from {type(rows).__name__}: "
                f"build it over a schema, or give the batches to partial_fit"
            )
        return infer_rows_schema(rows, first_rows=None)

    def partial_fit(self, batch: Rows, y: object = None) -> Self:
        """Learn from one batch (a validated ``Batch`` or a raw matrix, validated first; a
        rejected batch leaves the learner untouched). ``y`` is ignored, here and in ``fit``
        and ``score``: scikit-learn's place for a target, where a Markov network models every
        column."""
        raise NotImplementedError

    def fit(self, source: Data, y: object = None, *, progress: bool = False) -> Self:
        """Learn from scratch from a finite source (or a row matrix); ``y`` is ignored.
        ``progress``: a progress bar on stderr (:mod:`streammn.progress_bar`)."""
        raise NotImplementedError

    # a prompt stop ------------------------------------------------------------------------
    _stop_requested: bool = False

    def stop(self) -> None:
        """Ask the work in flight to end promptly (safe to call from a signal handler: it only
        sets a flag). A learner whose structure updates take long checks the flag inside them
        and abandons the update under way, keeping the state from before it and recording the
        update as pending, so that it runs first when learning continues (after
        :meth:`clear_stop`, or in a run resumed from a snapshot of that state): the model stays
        the one an uninterrupted run makes. A learner without long updates ignores it."""
        self._stop_requested = True

    def clear_stop(self) -> None:
        """Withdraw a :meth:`stop` request (the engine does at the start of every run)."""
        self._stop_requested = False

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`stop` was called since the last :meth:`clear_stop`."""
        return self._stop_requested

    def rows_to_pause(self) -> int | None:
        """Rows until the learner's next planned structure update, which a stop can abandon
        only when it falls at the end of a batch: the engine cuts batches there when the
        source can name the position (as at snapshot rows), which changes no model since
        learners do not depend on the cut. None (the default): no such point planned."""
        return None

    def finish(self) -> bool:
        """A finite source has ended: bring any part of the model that is refreshed at fixed
        points of the stream up to every row learned (DTSL's logistic conditionals), and say
        whether the model changed. The engine calls it at the end of a source and snapshots
        again if it did; ``fit`` calls it itself. Nothing by default."""
        return False

    def pll_terms(self, rows: Rows) -> np.ndarray:
        """``log P(x_i | x_-i)`` under the current model: shape ``(n_rows, n_vars)``."""
        raise NotImplementedError

    def learned_network(self) -> MarkovNetwork:
        """The current model as a Markov network with the learner's own weights (DTSL: DN2MN's
        closed form; the others: weights fitted by their own objective)."""
        raise NotImplementedError

    def _state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The learned state as metadata (with ``format``, ``schema`` and ``params``) and
        arrays; :meth:`to_bytes` adds the weight sample."""
        raise NotImplementedError

    # the published weights -------------------------------------------------------------
    #: ``'refined'`` or ``'closed-form'``: a parameter of every learner (:data:`WEIGHTS_PARAM`)
    weights: str
    _weight_sample: WeightSample | None = None

    @property
    def weight_sample(self) -> WeightSample | None:
        """The uniform sample of the rows learned that the published weights are fitted and
        judged on (:mod:`streammn.network.weight_sample`); None with ``weights='closed-form'``."""
        return self._weight_sample

    def _new_weight_sample(self) -> None:
        """Start the sample over (a fresh learner, or ``fit`` from scratch), sized for the
        largest values a growing schema may reach, within :attr:`weight_sample_mb`."""
        self._weight_sample = (
            WeightSample(self.schema.ceiling(), self.weight_sample_mb)
            if self.weights == "refined"
            else None
        )

    @property
    def weight_sample_mb(self) -> float:
        """The weight step's memory (its sample and the reach lists of a fit): the default
        ``MEMORY_MB``; DTSL's is its memory budget's share (:mod:`streammn.trees.budget`)."""
        return MEMORY_MB

    def _sample(self, rows: np.ndarray, first: int) -> None:
        """Offer validated ``rows`` (stream rows ``first ..``) to the weight sample."""
        if self._weight_sample is not None:
            self._weight_sample.update(rows, first)

    def publish(self, validation: Rows | None = None) -> Published:
        """The network :meth:`to_markov_network` gives, with the record of how its weights
        were chosen (:class:`~streammn.network.published.Published`): :meth:`learned_network`'s
        weights refined on the sample and kept only if they score its held-out rows (or
        ``validation``, rows in memory) better (:mod:`streammn.network.published`), a full fit from
        the learner's weights each time; with ``weights='closed-form'`` the learner's own."""
        model = self.learned_network()
        if self._weight_sample is None:
            return Published(model, {"published": "closed-form", "refinement": "off"})
        if validation is not None:
            validation = self.schema.ceiling().rows_of(validation)
        return publish_sample(model, self._weight_sample, validation, probe=False)

    def to_markov_network(self) -> MarkovNetwork:
        """The current model as a Markov network, with the weights ``weights`` says (see
        :meth:`publish`)."""
        return self.publish().model

    def to_bytes(self) -> bytes:
        """The full state, weight sample included; ``type(self).from_bytes`` restores an equal
        learner. A learner built without a schema records the schema it took from the data
        apart from the one given (none), or only its settings before it took one."""
        if self._schema is None:
            meta = {"format": self.state_format, "schema": None, "params": self.settings()}
            return pack_state(meta, {})
        meta, arrays = self._state()
        if self._declared_schema is None:
            meta = {**meta, INFERRED_KEY: True}
        if self._weight_sample is not None:
            sample = np.frombuffer(self._weight_sample.to_bytes(), dtype=np.uint8)
            arrays = {**arrays, SAMPLE_KEY: sample}
        return pack_state(meta, arrays)

    #: the ``format`` recorded in the metadata of the states :meth:`to_bytes` writes
    state_format: str | int
    #: what :meth:`from_bytes` raises on bytes that are not such a state
    state_error: type[DataError] = LearnerStateError

    @classmethod
    def from_bytes(cls, data: bytes) -> "StructureLearner":
        """The learner saved by :meth:`to_bytes` (:func:`pack_state`: metadata with its
        ``format``, ``schema`` and ``params``, and named arrays). The one checkpoint loader of
        every learner: bytes that are not such a state (garbage, empty, truncated, another
        learner's or another format's) raise ``state_error`` naming the class and the reason,
        never a numpy or zip error. A state saved before a parameter was renamed holds its old
        name, read as the new one."""
        try:
            meta, arrays = unpack_state(data)
            if meta.get("format") != cls.state_format:
                raise ValueError(f"state format {meta.get('format')!r}, not {cls.state_format!r}")
            params = new_names(cls, meta["params"], cls.state_error, warn=False)
            if meta["schema"] is None:  # built without a schema, saved before it took one
                return cls(**params)
            schema = Schema.from_dict(meta["schema"])
            # every learner takes the schema first (StructureLearner declares no __init__)
            learner = cls(None if meta.get(INFERRED_KEY) else schema, **params)  # type: ignore[call-arg]
            if learner._schema is None:
                learner._use_schema(schema)
            learner._restore(meta, arrays)
            learner._restore_sample(arrays)
        except cls.state_error:
            raise
        except (ValueError, TypeError, KeyError, IndexError, OSError, EOFError) as exc:
            raise cls.state_error(f"not a saved {cls.__name__} state ({exc})") from exc
        return learner

    def _restore(self, meta: dict, arrays: dict[str, np.ndarray]) -> None:
        """Set the learned state of this fresh learner (built from the state's schema and
        settings) from the rest of a state's ``meta`` and ``arrays``."""
        raise NotImplementedError

    def _restore_sample(self, arrays: dict[str, np.ndarray]) -> None:
        """The weight sample of a saved state (a state saved before learners kept one leaves
        the fresh sample)."""
        if SAMPLE_KEY not in arrays:
            return
        if self._weight_sample is None:
            raise ValueError("a weight sample in the state of a learner with weights='closed-form'")
        try:
            self._weight_sample = WeightSample.from_bytes(arrays[SAMPLE_KEY].tobytes())
        except WeightStateError as error:  # from_bytes raises the learner's state error
            raise ValueError(str(error)) from None

    def score_samples(self, rows: Rows) -> np.ndarray:
        """Each row's pseudo-log-likelihood under the current model (scikit-learn's name)."""
        return self.pll_terms(rows).sum(axis=1)

    def score(self, rows: Rows, y: object = None) -> float:
        """Mean pseudo-log-likelihood per row: higher is better (scikit-learn's convention;
        ``y`` is ignored)."""
        return float(self.score_samples(rows).mean())

    def snapshot_files(self) -> dict:
        """Extra files for a snapshot, by name (bytes, or a function writing the file at a
        path): e.g. ET's exact-likelihood ``model.et``. None by default."""
        return {}

    def conditionals(self) -> dict | None:
        """The variables using each kind of conditional, by kind (for the manifest and
        ``inspect``); None for a learner with one kind."""
        return None

    def drift_summary(self) -> dict | None:
        """Drift alarms and swaps for the manifest and progress lines; None for a learner that
        does not adapt to drift."""
        return None

    @property
    def batch_rows(self) -> int | None:
        """Rows a batch should hold at most to keep the run within the learner's memory
        budget: the engine reads a file's batches no longer (DTSL's
        :mod:`~streammn.trees.budget`). None (the default): any length."""
        return None

    def memory_binding(self) -> list[str]:
        """What the learner's memory budget holds back now, for the progress line; none by
        default."""
        return []
