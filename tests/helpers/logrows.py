"""Rows for log-source tests that carry their own provenance.

Column ``part`` is the partition (Kafka) or stream (Redis) a row was produced to and columns
``s0..s9`` the bits of its sequence number there, so tests check per-partition order,
completeness and replay points from the rows alone.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from streammn.schema import Schema

N_PARTS = 3
SEQ_BITS = 10
SCHEMA = Schema.from_cardinalities(
    [N_PARTS] + [2] * SEQ_BITS + [3, 2, 5],
    ["part"] + [f"s{i}" for i in range(SEQ_BITS)] + ["a", "b", "c"],
)


def make_rows(n_per_part: int, seed: int) -> list[np.ndarray]:
    """Rows for each partition: partition id, sequence bits, random payload columns."""
    rng = np.random.default_rng(seed)
    out = []
    for p in range(N_PARTS):
        seq = np.arange(n_per_part)
        bits = (seq[:, None] >> np.arange(SEQ_BITS)[None, :]) & 1
        payload = np.stack(
            [
                rng.integers(0, 3, n_per_part),
                rng.integers(0, 2, n_per_part),
                rng.integers(0, 5, n_per_part),
            ],
            axis=1,
        )
        out.append(
            np.ascontiguousarray(
                np.concatenate([np.full((n_per_part, 1), p), bits, payload], axis=1).astype(
                    np.uint8
                )
            )
        )
    return out


def encode(rows: np.ndarray, format: str, rows_per_message: int = 1) -> list[bytes]:
    if format == "csv":
        return [",".join(map(str, r)).encode() for r in rows.tolist()]
    if format == "json":
        return [json.dumps(dict(zip(SCHEMA.names, r))).encode() for r in rows.tolist()]
    out = []
    for i in range(0, rows.shape[0], rows_per_message):
        chunk = rows[i : i + rows_per_message]
        table = pa.table({n: pa.array(chunk[:, j], pa.int16()) for j, n in enumerate(SCHEMA.names)})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        out.append(sink.getvalue().to_pybytes())
    return out


def seq_of(rows: np.ndarray) -> np.ndarray:
    return (rows[:, 1 : 1 + SEQ_BITS].astype(np.int64) << np.arange(SEQ_BITS)).sum(axis=1)


def split_by_partition(rows: np.ndarray) -> list[np.ndarray]:
    return [rows[rows[:, 0] == p] for p in range(N_PARTS)]


def read(src) -> tuple[np.ndarray, list]:
    batches = list(src)
    rows = (
        np.concatenate([b.rows for b in batches])
        if batches
        else np.empty((0, SCHEMA.n_vars), np.uint8)
    )
    return rows, batches
