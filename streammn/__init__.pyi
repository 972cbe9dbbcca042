"""What type checkers see of ``streammn/__init__.py``, whose names load on first use (its
``__getattr__``, which they cannot follow): the same names, imported."""

from streammn.dn import DependencyNetwork as DependencyNetwork
from streammn.dn.conversion import DN2MNError as DN2MNError
from streammn.dn.conversion import dn2mn as dn2mn
from streammn.dn.conversion import marginals_from_rows as marginals_from_rows
from streammn.dtsl import DTSL as DTSL
from streammn.dtsl import DTSLError as DTSLError
from streammn.features import FeatureSet as FeatureSet
from streammn.formats import ModelFormatError as ModelFormatError
from streammn.formats import read_model as read_model
from streammn.formats import write_model as write_model
from streammn.learner import StructureLearner as StructureLearner
from streammn.network.model import EnumerationTooLarge as EnumerationTooLarge
from streammn.network.model import MarkovNetwork as MarkovNetwork
from streammn.network.weights import StochasticPLL as StochasticPLL
from streammn.network.weights import WeightLearningError as WeightLearningError
from streammn.network.weights import fit_weights as fit_weights
from streammn.schema import Schema as Schema
from streammn.schema import SchemaError as SchemaError
from streammn.schema import Variable as Variable
from streammn.stream.engine import EngineError as EngineError
from streammn.stream.engine import StreamLearner as StreamLearner
from streammn.stream.snapshot import SnapshotError as SnapshotError
from streammn.stream.snapshot import SnapshotWriter as SnapshotWriter
from streammn.stream.snapshot import latest_valid_snapshot as latest_valid_snapshot
from streammn.stream.snapshot import load_snapshot as load_snapshot
from streammn.stream.snapshot import read_snapshot as read_snapshot

__version__: str
