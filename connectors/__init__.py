"""Data sources for streammn: everything that turns storage into :class:`Batch` streams."""

from connectors.base import DEFAULT_BATCH_SIZE, Batch, Source, SourceError, SourceUnavailable
from connectors.array import ArraySource

__all__ = ["Batch", "Source", "SourceError", "SourceUnavailable", "ArraySource",
           "DEFAULT_BATCH_SIZE"]
