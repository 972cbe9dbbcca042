"""Parquet files, directories and globs as a streaming source.

Record batches are streamed through ``pyarrow.parquet.ParquetFile.iter_batches``; a file is never
read whole. Seeking to a row skips whole row groups using the file footer, without decoding them.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterator, Sequence, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streammn.connectors.arrow import (
    SCHEMA_METADATA_KEY,
    record_batch_rows,
    schema_from_arrow,
    schema_to_metadata,
)
from streammn.connectors.base import DEFAULT_BATCH_SIZE, SourceError
from streammn.connectors.files import FileSource, read_errors, resolve_paths
from streammn.schema.encoding import decode_column
from streammn.schema.inference import INFER_ROWS, check_kinds, infer_variable
from streammn.schema import MAX_CARDINALITY, Schema, SchemaError

PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")


def _open(path: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except (FileNotFoundError, PermissionError):
        with read_errors(path):
            raise
    except (pa.ArrowException, OSError) as e:
        raise SourceError(f"{path}: not a readable Parquet file ({e})") from e


def _statistics_max(pf: pq.ParquetFile, names: Sequence[str], path: str) -> dict[str, int]:
    """Per-column maxima from the footer statistics; columns without statistics are read. A
    float column's maximum that is no integer (NaN, -inf: the rows holding them are refused
    when read, by number) counts as 0; ``+inf`` is refused here, as a maximum too large."""
    md = pf.metadata
    leaf_names = md.schema.names
    out: dict[str, int] = {}
    missing = []
    for name in names:
        j = pf.schema_arrow.get_field_index(name)
        if j < 0 or not (
            pa.types.is_integer(pf.schema_arrow.field(j).type)
            or pa.types.is_floating(pf.schema_arrow.field(j).type)
        ):
            continue  # booleans need no maximum; other types are refused by schema_from_arrow
        col_idx = leaf_names.index(name)
        hi = None
        for g in range(md.num_row_groups):
            st = md.row_group(g).column(col_idx).statistics
            if st is None or not st.has_min_max:
                hi = None
                missing.append(name)
                break
            hi = st.max if hi is None else max(hi, st.max)
        if hi is not None:
            out[name] = _integer_max(hi, name, path)
    for name in missing:
        col = pf.read(columns=[name]).column(0)
        hi = pc.max(col).as_py()
        out[name] = 0 if hi is None else _integer_max(hi, name, path)
    return out


def _integer_max(hi: int | float, name: str, path: str) -> int:
    if isinstance(hi, float) and not math.isfinite(hi):
        if hi == math.inf:
            most = MAX_CARDINALITY - 1
            raise SchemaError(
                f"column {name!r} has values up to inf; at most {most} is supported", source=path
            )
        return 0
    return int(hi)


def _infer_schema(pf: pq.ParquetFile, columns: list[str], path: str, kinds: dict) -> Schema:
    """The schema of ``columns``: the one stored in the file's metadata; else names or bins
    where the first rows show words, booleans or numbers, or ``kinds`` (what a schema file
    says of some) tells (:func:`streammn.schema.inference.infer_variable`), and the footer
    statistics' maximum + 1 for columns of state numbers."""
    if SCHEMA_METADATA_KEY in (pf.schema_arrow.metadata or {}) or not columns:
        return schema_from_arrow(pf.schema_arrow, columns, source=path)
    check_kinds(kinds, columns, path)
    present = [c for c in columns if pf.schema_arrow.get_field_index(c) >= 0]
    with read_errors(path):
        first, n_rows = [], 0
        for rb in pf.iter_batches(batch_size=INFER_ROWS, columns=present):
            first.append(rb.slice(0, INFER_ROWS - n_rows))
            n_rows += first[-1].num_rows
            if n_rows == INFER_ROWS:
                break
    named = {}
    for name in present if first else ():
        values = pa.chunked_array([rb.column(name) for rb in first])
        var = infer_variable(name, values, kinds.get(name))
        if var is not None:
            named[name] = var
    plain = [c for c in columns if c not in named]
    numbered = (
        schema_from_arrow(pf.schema_arrow, plain, _statistics_max(pf, plain, path), source=path)
        if plain
        else None
    )
    numbered = cast(Schema, numbered)  # None only when every column is named
    return Schema(named.get(c) or numbered[numbered.index(c)] for c in columns)


def _check_twice(file_names: list[str], columns: list[str], path: str) -> None:
    """Refuse a file that names a column it is to read twice (Arrow allows it; a column of
    that name would be ambiguous), as a CSV header that does."""
    counts = Counter(file_names)
    for name in columns:
        if counts[name] > 1:
            where = [j for j, n in enumerate(file_names) if n == name]
            raise SchemaError(
                f"the file names two columns {name!r} (columns {where[0]} and {where[1]}); "
                f"every column needs a name of its own",
                column=where[1],
                source=path,
            )


class ParquetSource(FileSource):
    """Stream the rows of Parquet files (a file, a directory, or a glob) in batches.

    ``schema``: declared, or read from the first file (a streammn schema stored in its metadata
    by :func:`write_parquet`; otherwise booleans are two named states, words (string and
    dictionary columns) named states and numbers bins, from the first rows
    (:func:`streammn.schema.inference.infer_variable`), and columns of integer state numbers take
    their footer-statistics maximum + 1). ``columns``: names selecting and ordering the
    variables (default: the schema's names when given and present, else every column). The
    position is the file index and the row within that file.
    ``missing``: nulls become missing values (the schema's missing mode) instead of errors.
    ``kinds``: what a schema file says of some columns, for the inference of the others
    (:func:`streammn.schema.file.read_schema_file`).
    """

    def __init__(
        self,
        path,
        batch_size: int = DEFAULT_BATCH_SIZE,
        schema: Schema | None = None,
        columns: Sequence[str] | None = None,
        missing: bool = False,
        kinds: dict | None = None,
    ):
        super().__init__(resolve_paths(path, PARQUET_SUFFIXES), batch_size)
        first = _open(self.paths[0])
        file_names = first.schema_arrow.names
        if columns is None and schema is not None and set(schema.names) <= set(file_names):
            columns = schema.names
        self.columns = list(columns) if columns is not None else list(file_names)
        _check_twice(file_names, self.columns, self.paths[0])
        if schema is None:
            schema = _infer_schema(first, self.columns, self.paths[0], kinds or {})
        self.schema = schema.with_missing() if missing else schema
        self._row_groups: dict[int, np.ndarray] = {}

    def _group_starts(self, index: int, pf: pq.ParquetFile) -> np.ndarray:
        starts = self._row_groups.get(index)
        if starts is None:
            md = pf.metadata
            sizes = [md.row_group(g).num_rows for g in range(md.num_row_groups)]
            starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
            self._row_groups[index] = starts
        return starts

    def _read_file(self, index: int, start_row: int) -> Iterator[np.ndarray]:
        path = self.paths[index]
        pf = _open(path)
        missing = [c for c in self.columns if pf.schema_arrow.get_field_index(c) < 0]
        if missing:
            raise SchemaError(
                f"no column {', '.join(map(repr, missing[:8]))} (the file has "
                f"{', '.join(pf.schema_arrow.names[:8])}): files of one source "
                f"need the same columns",
                row=0,
                source=path,
            )
        _check_twice(pf.schema_arrow.names, self.columns, path)
        starts = self._group_starts(index, pf)
        if start_row >= starts[-1]:
            return
        group = int(np.searchsorted(starts, start_row, side="right") - 1)
        skip = start_row - int(starts[group])
        row = int(starts[group])
        groups = list(range(group, len(starts) - 1))
        for rb in pf.iter_batches(
            batch_size=self.batch_size, row_groups=groups, columns=self.columns, use_threads=True
        ):
            n = rb.num_rows
            if skip >= n:
                skip -= n
                row += n
                continue
            if skip:
                rb = rb.slice(skip)
                row += skip
                skip = 0
            yield from record_batch_rows(rb, self.schema, row_offset=row, source=path)
            row += rb.num_rows

    def num_rows(self) -> int:
        """Total rows of all files, from their footers."""
        return sum(_open(p).metadata.num_rows for p in self.paths)


def write_parquet(
    path, rows: np.ndarray, schema: Schema, row_group_size: int = 65536, compression: str = "snappy"
) -> None:
    """Write rows as a Parquet file with ``uint8`` columns (named variables: their names) and
    the schema in its metadata, so that :class:`ParquetSource` restores the exact schema."""
    rows = schema.validate(rows)
    table = pa.table(
        {
            v.name: pa.array(rows[:, j]) if v.state_names is None else decode_column(rows[:, j], v)
            for j, v in enumerate(schema)
        }
    )
    table = table.replace_schema_metadata(schema_to_metadata(schema))
    pq.write_table(table, path, row_group_size=row_group_size, compression=compression)
