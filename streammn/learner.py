"""The structure-learner contract, and parameters read from ``__init__``.

Every structure learner (DTSL, EdgeGrafting, EnsembleOfTrees, CSGS) subclasses one contract,
:class:`StructureLearner`, and the engine calls its members instead of probing for them: it
learns from validated batches (``partial_fit``) or a whole finite source (``fit``), scores rows
with its current conditionals (``pll_terms``, the prequential score), gives its current
:class:`~streammn.model.MarkovNetwork`, saves and restores its full state (``to_bytes`` /
``from_bytes``), reports its settings (``get_params``), and may add snapshot files or a drift
summary (defaults: none). ``tests/test_conformance.py`` checks every learner against it.

:class:`Estimator` derives ``get_params``, ``set_params``, ``clone`` and ``__repr__`` from the
``__init__`` signature (the idea of river's ``Base._get_params`` and scikit-learn's
``_get_param_names``): a parameter is a keyword of ``__init__`` stored under the same attribute
name, so a learner never repeats its parameter list by hand and
``type(l)(l.schema, **l.get_params())`` rebuilds it. The first positional argument, ``schema``,
is data the learner is built over, not a setting, and is shown first in the repr but left out of
the parameters (snapshot manifests store it apart). What each parameter allows, its help and its
command-line flag are declared once, in the class's ``parameters`` table
(:mod:`streammn.params`); ``__init__`` checks its arguments against it.
"""

from __future__ import annotations

import inspect
import io
import json
from zipfile import BadZipFile

import numpy as np

from streammn.errors import DataError, LearnerDefinitionError, LearnerStateError, SettingsError
from streammn.model import MarkovNetwork
from streammn.params import Param, check_params
from streammn.schema import Schema


class Estimator:
    """Mixin: ``get_params``, ``set_params``, ``clone`` and ``__repr__`` from the ``__init__``
    signature, and validation of the settings against the class's ``parameters`` table
    (:mod:`streammn.params`)."""

    parameters: dict[str, Param] = {}
    param_error: type[Exception] = SettingsError  # what a disallowed setting raises

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

    def get_params(self, deep: bool = True) -> dict:
        """Settings as passed to ``__init__`` (read from the attributes of the same names);
        ``deep`` is accepted for scikit-learn's ``clone`` (a learner holds no estimators)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """This learner, unfitted, with ``params`` changed (scikit-learn's convention: the
        settings are checked as ``__init__`` checks them, and learned state starts over)."""
        unknown = set(params) - set(self._param_names())
        if unknown:
            raise self.param_error(f"{type(self).__name__} has no parameter {sorted(unknown)[0]!r}")
        fresh = self.clone(**params)
        self.__dict__.clear()
        self.__dict__.update(fresh.__dict__)
        return self

    def clone(self, **overrides):
        """A fresh, unfitted learner with the same schema and settings (``overrides`` win)."""
        return type(self)(self.schema, **{**self.get_params(), **overrides})

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({self.schema!r}, {args})"


class StructureLearner(Estimator):
    """What the engine, the river wrappers and the conformance suite need from a learner: a
    role with fixed verbs (river's base classes), so callers call and never probe.

    Subclasses implement the methods that raise ``NotImplementedError``; the others have
    defaults a learner overrides when it has more to say.
    """

    schema: Schema
    #: ``to_markov_network`` runs on serial kernels, so a forked snapshot writer may call it
    #: (DTSL's does); otherwise the engine converts on the learning thread and the writer only
    #: writes files.
    converts_in_writer: bool = False

    def partial_fit(self, batch) -> "StructureLearner":
        """Learn from one batch (a validated ``Batch`` or a raw matrix, validated first; a
        rejected batch leaves the learner untouched)."""
        raise NotImplementedError

    def fit(self, source) -> "StructureLearner":
        """Learn from scratch from a finite source (or a row matrix)."""
        raise NotImplementedError

    def pll_terms(self, rows) -> np.ndarray:
        """``log P(x_i | x_-i)`` under the current model: shape ``(n_rows, n_vars)``."""
        raise NotImplementedError

    def to_markov_network(self) -> MarkovNetwork:
        """The current model as a Markov network."""
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        """The full state; ``type(self).from_bytes`` restores an equal learner."""
        raise NotImplementedError

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
        never a numpy or zip error."""
        if bytes(data[:2]) != b"PK":  # what numpy would read as a pickle and refuse
            raise cls.state_error(f"not a saved {cls.__name__} state (not an .npz archive)")
        try:
            meta, arrays = unpack_state(data)
            if meta.get("format") != cls.state_format:
                raise ValueError(f"state format {meta.get('format')!r}, not {cls.state_format!r}")
            learner = cls(Schema.from_dict(meta["schema"]), **meta["params"])
            learner._restore(meta, arrays)
        except cls.state_error:
            raise
        except (ValueError, TypeError, KeyError, IndexError, OSError, EOFError, BadZipFile) as exc:
            raise cls.state_error(f"not a saved {cls.__name__} state ({exc})") from exc
        return learner

    def _restore(self, meta: dict, arrays: dict[str, np.ndarray]) -> None:
        """Set the learned state of this fresh learner (built from the state's schema and
        settings) from the rest of a state's ``meta`` and ``arrays``."""
        raise NotImplementedError

    def score_samples(self, rows) -> np.ndarray:
        """Each row's pseudo-log-likelihood under the current model (scikit-learn's name)."""
        return self.pll_terms(rows).sum(axis=1)

    def score(self, rows) -> float:
        """Mean pseudo-log-likelihood per row: higher is better (scikit-learn's convention)."""
        return float(self.score_samples(rows).mean())

    def snapshot_files(self) -> dict:
        """Extra files for a snapshot, by name (bytes, or a function writing the file at a
        path): e.g. ET's exact-likelihood ``model.et``. None by default."""
        return {}

    def drift_summary(self) -> dict | None:
        """Drift alarms and swaps for the manifest and progress lines; None for a learner that
        does not adapt to drift."""
        return None


def pack_state(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """A learner's state as one ``.npz``: JSON metadata under ``__meta__`` and named arrays
    (no pickles, so a state file from anywhere is safe to load)."""
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    return buf.getvalue()


def unpack_state(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and arrays of :func:`pack_state`'s bytes; ``ValueError``, ``OSError``,
    ``KeyError`` or ``BadZipFile`` when they are not such a state (callers name the file in
    their error)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    return json.loads(arrays.pop("__meta__").tobytes().decode()), arrays
