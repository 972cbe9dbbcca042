"""Deprecated: moved to :mod:`connectors.distributed` (Dask passes read Parquet datasets, so they
belong with the connectors, which build on the core; the core does not import them)."""

import warnings

from connectors.distributed import *  # noqa: F403
from connectors.distributed import __all__  # noqa: F401

warnings.warn(
    "streammn.distributed moved to connectors.distributed",
    DeprecationWarning,
    stacklevel=2,
)
