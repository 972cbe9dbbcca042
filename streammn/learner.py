"""The structure-learner contract, and parameters read from ``__init__``.

Every structure learner (DTSL, EdgeGrafting, and the ones to come) meets one contract,
:class:`StructureLearner`, and the engine relies on it instead of probing for methods: it learns
from validated batches (``partial_fit``) or a whole finite source (``fit``), scores rows with
its current conditionals (``pll_terms``, the prequential score), gives its current
:class:`~streammn.model.MarkovNetwork`, saves and restores its full state (``to_bytes`` /
``from_bytes``), and reports its settings (``get_params``). ``tests/test_conformance.py``
checks every learner against it.

:class:`Estimator` derives ``get_params``, ``clone`` and ``__repr__`` from the ``__init__``
signature (the idea of river's ``Base._get_params`` and scikit-learn's ``_get_param_names``):
a parameter is a keyword of ``__init__`` stored under the same attribute name, so a learner
never repeats its parameter list by hand and ``type(l)(l.schema, **l.get_params())`` rebuilds
it. The first positional argument, ``schema``, is data the learner is built over, not a setting,
and is shown first in the repr but left out of the parameters (snapshot manifests store it
apart).
"""

from __future__ import annotations

import inspect
import io
import json
from typing import Protocol, runtime_checkable

import numpy as np

from streammn.model import MarkovNetwork
from streammn.schema import Schema


@runtime_checkable
class StructureLearner(Protocol):
    """What the engine, the river wrappers and the conformance suite need from a learner.

    Optional: a class attribute ``converts_in_writer = True`` says that ``to_markov_network``
    runs on serial kernels in a forked snapshot writer (DTSL's does); without it the engine
    converts on the learning thread and the writer only writes files.
    """

    schema: Schema

    def partial_fit(self, batch) -> "StructureLearner":
        """Learn from one batch (a validated ``Batch`` or a raw matrix, validated first; a
        rejected batch leaves the learner untouched)."""

    def fit(self, source) -> "StructureLearner":
        """Learn from scratch from a finite source (or a row matrix)."""

    def pll_terms(self, rows) -> np.ndarray:
        """``log P(x_i | x_-i)`` under the current model: shape ``(n_rows, n_vars)``."""

    def to_markov_network(self) -> MarkovNetwork:
        """The current model as a Markov network."""

    def to_bytes(self) -> bytes:
        """The full state; ``type(self).from_bytes`` restores an equal learner."""

    @classmethod
    def from_bytes(cls, data: bytes) -> "StructureLearner":
        """The learner saved by :meth:`to_bytes`."""

    def get_params(self) -> dict:
        """The ``__init__`` keywords (without ``schema``) that rebuild an unfitted copy."""


def pack_state(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """A learner's state as one ``.npz``: JSON metadata under ``__meta__`` and named arrays
    (no pickles, so a state file from anywhere is safe to load)."""
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    return buf.getvalue()


def unpack_state(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and arrays of :func:`pack_state`'s bytes; ``ValueError``, ``OSError`` or
    ``KeyError`` when they are not such a state (callers name the file in their error)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    return json.loads(arrays.pop("__meta__").tobytes().decode()), arrays


class Estimator:
    """Mixin: ``get_params``, ``clone`` and ``__repr__`` from the ``__init__`` signature."""

    @classmethod
    def _param_names(cls) -> list[str]:
        names = []
        for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"{cls.__name__}.__init__ takes *args/**kwargs: parameters "
                                "must be named")
            if p.name != "schema":
                names.append(p.name)
        return names

    def get_params(self) -> dict:
        """Settings as passed to ``__init__`` (read from the attributes of the same names)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def clone(self, **overrides):
        """A fresh, unfitted learner with the same schema and settings (``overrides`` win)."""
        return type(self)(self.schema, **{**self.get_params(), **overrides})

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({self.schema!r}, {args})"
