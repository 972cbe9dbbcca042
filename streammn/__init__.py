"""streammn: learn Markov networks from data streams and files too large for memory.

The names below are imported on first use, so that ``import streammn`` stays cheap (the
learners and the model load numba kernels); type checkers, which cannot follow the module's
``__getattr__``, read them from the stub ``__init__.pyi`` (``tests/test_public_api.py`` keeps
the two lists equal). The package ships ``py.typed``: its public API is annotated.
"""

import importlib.util
import os
import sys
from importlib import import_module

# numba's OpenMP workers sleep instead of spinning while they wait between parallel steps
# (unless the user chose otherwise): on a machine shared with other work, spinning workers take
# the cores the others need; PLL weight learning on plants under load took 10.6 CPU s spinning,
# 4.5 CPU s passive. Read by OpenMP when numba first runs a parallel kernel.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _arrow_has_jemalloc() -> bool:
    """Whether the pyarrow installed was built with jemalloc (its build configuration header
    says so), found without importing it."""
    spec = importlib.util.find_spec("pyarrow")
    if spec is None or spec.origin is None:
        return False
    header = os.path.join(os.path.dirname(spec.origin), "include", "arrow", "util", "config.h")
    try:
        with open(header, encoding="utf-8") as f:
            return "#define ARROW_JEMALLOC\n" in f.read()
    except OSError:
        return False


# Arrow decodes Parquet and CSV into its default memory pool, chosen from this variable when
# pyarrow loads (so only where streammn is imported first, as in the `streammn` command, and
# unless the user chose a pool). jemalloc, against the mimalloc Arrow picks otherwise, keeps
# less of what it has freed and decodes no slower: 1M rows x 100 binary variables read at 2.9M
# rows/s instead of 2.5M, `streammn learn` of them peaked at 440 MB instead of 510 MB, and the
# floor of --memory-mb at 300 variables is 298-300 MB instead of 304-306 (benchmarks/results/
# memory_budget.md). A pyarrow without jemalloc would warn about the variable: left alone.
if "pyarrow" not in sys.modules and sys.platform.startswith("linux") and _arrow_has_jemalloc():
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")

# (after the environment above is set: these load numba and pyarrow)
from streammn.schema import Schema, SchemaError, Variable  # noqa: E402
from streammn import moved  # noqa: E402

moved.install()  # the old paths of modules that moved into packages still import, with a warning

__version__ = "0.1.0"

_LAZY = {
    "FeatureSet": "streammn.features",
    "MarkovNetwork": "streammn.network.model",
    "EnumerationTooLarge": "streammn.network.model",
    "DependencyNetwork": "streammn.dn",
    "DTSL": "streammn.dtsl",
    "DTSLError": "streammn.dtsl",
    "dn2mn": "streammn.dn.conversion",
    "DN2MNError": "streammn.dn.conversion",
    "marginals_from_rows": "streammn.dn.conversion",
    "fit_weights": "streammn.network.weights",
    "StochasticPLL": "streammn.network.weights",
    "WeightLearningError": "streammn.network.weights",
    "ModelFormatError": "streammn.formats",
    "read_model": "streammn.formats",
    "write_model": "streammn.formats",
    "SnapshotError": "streammn.stream.snapshot",
    "SnapshotWriter": "streammn.stream.snapshot",
    "latest_valid_snapshot": "streammn.stream.snapshot",
    "load_snapshot": "streammn.stream.snapshot",
    "read_snapshot": "streammn.stream.snapshot",
    "StreamLearner": "streammn.stream.engine",
    "EngineError": "streammn.stream.engine",
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
