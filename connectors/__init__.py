"""Data sources for streammn: everything that turns storage into :class:`Batch` streams."""

from connectors.base import DEFAULT_BATCH_SIZE, Batch, Source, SourceError, SourceUnavailable
from connectors.array import ArraySource
from connectors.csv import CsvSource
from connectors.ndjson import JsonLinesSource
from connectors.parquet import ParquetSource, write_parquet
from connectors.resolve import open_source
from connectors.synthetic import SyntheticSource

__all__ = [
    "Batch",
    "Source",
    "SourceError",
    "SourceUnavailable",
    "ArraySource",
    "CsvSource",
    "JsonLinesSource",
    "ParquetSource",
    "write_parquet",
    "open_source",
    "SyntheticSource",
    "DEFAULT_BATCH_SIZE",
]
