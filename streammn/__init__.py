"""streammn: learn Markov networks from data streams and files too large for memory."""

__version__ = "0.1.0"

from streammn.schema import Schema, SchemaError, Variable  # noqa: E402
from streammn.features import FeatureSet  # noqa: E402
from streammn.formats import ModelFormatError, read_model, write_model  # noqa: E402
from streammn.snapshot import (SnapshotError, SnapshotWriter, latest_valid_snapshot,  # noqa: E402
                               load_snapshot, read_snapshot)

__all__ = ["Schema", "SchemaError", "Variable", "FeatureSet", "ModelFormatError", "read_model",
           "write_model", "SnapshotError", "SnapshotWriter", "latest_valid_snapshot",
           "load_snapshot", "read_snapshot", "__version__"]
