"""The source contract, from the core: :mod:`streammn.stream.source` defines :class:`Batch`,
:class:`Source`, :class:`NumberedRows` and the source errors; every connector builds on them."""

from streammn.stream.source import (
    DEFAULT_BATCH_SIZE,
    Batch,
    NumberedRows,
    Source,
    SourceError,
    SourceUnavailable,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "Batch",
    "NumberedRows",
    "Source",
    "SourceError",
    "SourceUnavailable",
]
