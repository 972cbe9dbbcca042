"""streammn: learn Markov networks from data streams and files too large for memory."""

__version__ = "0.1.0"

from streammn.schema import Schema, SchemaError, Variable  # noqa: E402
from streammn.features import FeatureSet  # noqa: E402
from streammn.model import EnumerationTooLarge, MarkovNetwork  # noqa: E402
from streammn.dn import DependencyNetwork  # noqa: E402
from streammn.dtsl import DTSL, DTSLError  # noqa: E402
from streammn.dn2mn import DN2MNError, dn2mn, marginals_from_rows  # noqa: E402
from streammn.weights import StochasticPLL, WeightLearningError, fit_weights  # noqa: E402
from streammn.formats import ModelFormatError, read_model, write_model  # noqa: E402
from streammn.snapshot import (SnapshotError, SnapshotWriter, latest_valid_snapshot,  # noqa: E402
                               load_snapshot, read_snapshot)
from streammn.engine import EngineError, StreamLearner  # noqa: E402

__all__ = ["Schema", "SchemaError", "Variable", "FeatureSet", "MarkovNetwork",
           "EnumerationTooLarge", "DependencyNetwork", "DTSL", "DTSLError", "dn2mn",
           "DN2MNError", "marginals_from_rows", "fit_weights", "StochasticPLL",
           "WeightLearningError", "ModelFormatError", "read_model", "write_model",
           "SnapshotError", "SnapshotWriter", "latest_valid_snapshot", "load_snapshot",
           "read_snapshot", "StreamLearner", "EngineError", "__version__"]
