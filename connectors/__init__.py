"""Data sources for streammn: everything that turns storage into :class:`Batch` streams.

The folder ``connectors/`` at the repository's root installs as ``streammn.connectors``. Its
old top-level name ``connectors`` still imports, for one release, as an alias of the same
modules with a ``DeprecationWarning`` (:func:`streammn.moved.alias_package`).
"""

if __name__ == "connectors":  # the old name: the same modules as streammn.connectors
    from streammn.moved import alias_package

    alias_package("connectors", "streammn.connectors")
else:
    from streammn.connectors.base import (
        DEFAULT_BATCH_SIZE,
        Batch,
        Source,
        SourceError,
        SourceUnavailable,
    )
    from streammn.connectors.array import ArraySource
    from streammn.connectors.csv import CsvSource
    from streammn.connectors.ndjson import JsonLinesSource
    from streammn.connectors.parquet import ParquetSource, write_parquet
    from streammn.connectors.resolve import open_source
    from streammn.connectors.synthetic import SyntheticSource

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
