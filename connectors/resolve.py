"""``open_source``: pick a source from a path, a directory's contents, or a URI scheme."""

from __future__ import annotations

import glob
import os
from typing import cast
from urllib.parse import parse_qs, urlparse

from streammn.connectors.base import DEFAULT_BATCH_SIZE, Source, SourceError
from streammn.connectors.csv import CSV_SUFFIXES, CsvSource
from streammn.connectors.files import resolve_paths
from streammn.connectors.ndjson import JSON_LINES_SUFFIXES, JsonLinesSource
from streammn.connectors.parquet import PARQUET_SUFFIXES, ParquetSource
from streammn.errors import StreamMNError
from streammn.schema import Schema

FILE_SCHEMES = ("", "file")
LOG_SCHEMES = ("kafka", "redis")


def _open_log(scheme: str, uri: str, batch_size: int, schema, options) -> Source:
    """A log source; its client library is imported only now (optional extras)."""
    try:
        if scheme == "kafka":
            from streammn.connectors.kafka import open_kafka as opener
        else:
            from streammn.connectors.redis import open_redis as opener
    except ImportError as e:
        raise SourceError(f"{uri}: {e}") from None
    if "batch_size" not in parse_qs(urlparse(uri).query):  # the URI's own setting wins
        options = dict(options, batch_size=batch_size)
    try:
        return opener(uri, schema=schema, **options)
    except StreamMNError:  # a bad URI option or a missing schema: the error says its kind
        raise
    except ValueError as e:
        raise SourceError(str(e)) from None


KINDS = {"parquet": PARQUET_SUFFIXES, "csv": CSV_SUFFIXES, "ndjson": JSON_LINES_SUFFIXES}
SUFFIXES = PARQUET_SUFFIXES + CSV_SUFFIXES + JSON_LINES_SUFFIXES


def _kind_of(paths: list[str]) -> str:
    kinds = {
        next((kind for kind, suffixes in KINDS.items() if p.endswith(suffixes)), None)
        for p in paths
    }
    if None in kinds:
        bad = next(p for p in paths if not p.endswith(SUFFIXES))
        raise SourceError(f"{bad}: unknown file type (expected {', '.join(SUFFIXES)})")
    known = cast("set[str]", kinds)  # None refused above
    if len(known) > 1:
        raise SourceError(f"input mixes {' and '.join(sorted(known))} files; give one kind")
    return known.pop()


def _sibling_libra_schema(path: str) -> Schema | None:
    """``name.schema`` next to ``name.train.data`` / ``name.data`` (Libra's convention)."""
    base = os.path.basename(path)
    stem = base.split(".")[0]
    candidate = os.path.join(os.path.dirname(path), stem + ".schema")
    return Schema.from_libra(candidate) if os.path.isfile(candidate) else None


def open_source(
    uri_or_path, batch_size: int = DEFAULT_BATCH_SIZE, schema: Schema | None = None, **options
) -> Source:
    """Open a file, directory, glob or URI as a :class:`Source`.

    - ``*.parquet`` files, directories or globs of them: :class:`ParquetSource`;
    - ``*.data`` / ``*.csv`` files, directories or globs: :class:`CsvSource` (a Libra
      ``<name>.schema`` beside a ``.data`` file is used when no schema is given);
    - ``*.ndjson`` / ``*.jsonl`` files, directories or globs: :class:`~streammn.connectors.ndjson.
      JsonLinesSource` (one flat JSON object a line);
    - ``file://`` URIs as plain paths;
    - ``kafka://host:port/topic?...`` (:func:`streammn.connectors.kafka.open_kafka`, extra
      ``kafka``) and ``redis://host:port/stream?...`` (:func:`streammn.connectors.redis.open_redis`,
      extra ``redis``); these need a schema (``schema`` or ``?schema=<file>``).

    Extra keyword ``options`` go to the source's constructor.

    An unknown scheme raises :class:`SourceError`; a missing file :class:`SourceUnavailable`.

    Examples
    --------
    >>> import os, tempfile
    >>> from streammn.connectors import open_source
    >>> path = os.path.join(tempfile.mkdtemp(), "rows.csv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("rain,wet\\n1,1\\n0,0\\n1,1\\n0,1\\n")
    >>> with open_source(path, batch_size=3) as source:
    ...     print(source.schema, [batch.rows.tolist() for batch in source])
    Schema(rain:2, wet:2) [[[1, 1], [0, 0], [1, 1]], [[0, 1]]]
    """
    spec = os.fspath(uri_or_path)
    parsed = urlparse(spec)
    scheme = parsed.scheme.lower() if len(parsed.scheme) > 1 else ""  # C:\ is not a scheme
    if scheme in LOG_SCHEMES:
        return _open_log(scheme, spec, batch_size, schema, options)
    if scheme == "file":
        spec = parsed.path
    elif scheme not in FILE_SCHEMES:
        raise SourceError(
            f"{spec}: unsupported source scheme {scheme!r} "
            f"(supported: plain paths, file://, kafka://, redis://)"
        )
    if os.path.isdir(spec):
        kind = next(
            (
                kind
                for kind in ("parquet", "ndjson")
                if any(
                    glob.glob(os.path.join(spec, "**", "*" + s), recursive=True)
                    for s in KINDS[kind]
                )
            ),
            "csv",
        )
    else:
        kind = _kind_of(resolve_paths(spec, SUFFIXES))
    if kind == "parquet":
        return ParquetSource(spec, batch_size=batch_size, schema=schema, **options)
    if kind == "ndjson":
        return JsonLinesSource(spec, batch_size=batch_size, schema=schema, **options)
    if schema is None and os.path.isfile(spec):
        schema = _sibling_libra_schema(spec)
    return CsvSource(spec, batch_size=batch_size, schema=schema, **options)
