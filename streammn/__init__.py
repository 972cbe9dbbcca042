"""streammn: learn Markov networks from data streams and files too large for memory.

The names below are imported on first use, so that ``import streammn`` stays cheap and the
``connectors`` package (which needs :mod:`streammn.schema`) can be imported first.
"""

from importlib import import_module

from streammn.schema import Schema, SchemaError, Variable

__version__ = "0.1.0"

_LAZY = {
    "FeatureSet": "streammn.features",
    "MarkovNetwork": "streammn.model", "EnumerationTooLarge": "streammn.model",
    "DependencyNetwork": "streammn.dn",
    "DTSL": "streammn.dtsl", "DTSLError": "streammn.dtsl",
    "dn2mn": "streammn.dn2mn", "DN2MNError": "streammn.dn2mn",
    "marginals_from_rows": "streammn.dn2mn",
    "fit_weights": "streammn.weights", "StochasticPLL": "streammn.weights",
    "WeightLearningError": "streammn.weights",
    "ModelFormatError": "streammn.formats", "read_model": "streammn.formats",
    "write_model": "streammn.formats",
    "SnapshotError": "streammn.snapshot", "SnapshotWriter": "streammn.snapshot",
    "latest_valid_snapshot": "streammn.snapshot", "load_snapshot": "streammn.snapshot",
    "read_snapshot": "streammn.snapshot",
    "StreamLearner": "streammn.engine", "EngineError": "streammn.engine",
    "StructureLearner": "streammn.learner",
}

__all__ = ["Schema", "SchemaError", "Variable", "__version__", *_LAZY]


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'streammn' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
