"""What every sufficient-statistic store shares: input coercion, merge checks, the byte format.

Stores accept either a :class:`streammn.connectors.Batch` or anything
:meth:`~streammn.schema.Schema.validate` accepts (a ``uint8`` matrix, other integer arrays,
lists of rows). Rows are always range-checked against the store's schema, because the counting
kernels index tables with the values and an out-of-range value must be an error, not a silent
write into a neighbouring table.

Serialised form (all integers little-endian)::

    magic   8 bytes  b"SMNSTATS"
    version u16      FORMAT_VERSION
    hlen    u32      length of the JSON header
    plen    u64      length of the array payload
    crc     u32      CRC-32 of header + payload
    header  hlen     UTF-8 JSON: {"kind": <class name>, "schema": ..., "meta": {...}}
    payload plen     numpy .npz archive of the store's arrays (no pickled objects)

A byte string that is truncated, has trailing garbage, fails the checksum, holds another kind of
store, or lacks an expected array raises :class:`StatsFormatError`.
"""

from __future__ import annotations

import io
import json
import struct
import zlib

import numpy as np

from streammn.schema import Schema, SchemaError
from streammn.errors import StatsBytesError, StatsFormatError, StatsMergeError

MAGIC = b"SMNSTATS"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sHIQI")


def rows_of(data, schema: Schema) -> np.ndarray:
    """The validated C-contiguous ``uint8`` row matrix of a Batch (trusted when its source
    validated it against ``schema``) or of a raw block of rows."""
    return schema.rows_of(data)


def check_mergeable(a, b, *settings: str) -> None:
    """Raise :class:`StatsMergeError` unless ``b`` is the same kind of store as ``a``, over the
    same schema and with equal values of the named settings (attribute names)."""
    if type(a) is not type(b):
        raise StatsMergeError(f"cannot merge a {type(b).__name__} into a {type(a).__name__}")
    if a.schema != b.schema:
        raise StatsMergeError(
            f"cannot merge {type(a).__name__} stores over different schemas: "
            f"{a.schema!r} vs {b.schema!r}"
        )
    for name in settings:
        va, vb = getattr(a, name), getattr(b, name)
        if va != vb:
            raise StatsMergeError(
                f"cannot merge {type(a).__name__} stores with different {name}: {va!r} vs {vb!r}"
            )


def pack(store, meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """Serialise a store: its class name, schema, JSON-able ``meta`` and named arrays."""
    header = json.dumps(
        {"kind": type(store).__name__, "schema": store.schema.to_dict(), "meta": meta}
    ).encode("utf-8")
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub: the arrays as allow_pickle
    payload = buf.getvalue()
    crc = zlib.crc32(payload, zlib.crc32(header))
    return _PREFIX.pack(MAGIC, FORMAT_VERSION, len(header), len(payload), crc) + header + payload


def _read_frame(data, what: str) -> tuple[dict, bytes]:
    """Check the framing and checksum; return the parsed header and the raw payload."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise StatsBytesError(f"{what}.from_bytes expects bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < _PREFIX.size:
        raise StatsFormatError(f"{what}: {len(data)} bytes is too short for a serialised store")
    magic, version, hlen, plen, crc = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise StatsFormatError(f"{what}: not a serialised streammn store (bad magic {magic!r})")
    if version != FORMAT_VERSION:
        raise StatsFormatError(
            f"{what}: format version {version} is not supported "
            f"(this streammn reads version {FORMAT_VERSION})"
        )
    expected = _PREFIX.size + hlen + plen
    if len(data) != expected:
        state = "truncated" if len(data) < expected else "followed by extra bytes"
        raise StatsFormatError(
            f"{what}: serialised store is {state} ({len(data)} bytes, expected {expected})"
        )
    header = data[_PREFIX.size : _PREFIX.size + hlen]
    payload = data[_PREFIX.size + hlen :]
    if zlib.crc32(payload, zlib.crc32(header)) != crc:
        raise StatsFormatError(f"{what}: checksum mismatch, the serialised store is corrupt")
    try:
        head = json.loads(header.decode("utf-8"))
        if not (
            isinstance(head, dict)
            and isinstance(head["kind"], str)
            and isinstance(head["meta"], dict)
            and "schema" in head
        ):
            raise ValueError("kind, schema or meta missing")
    except (ValueError, KeyError, TypeError) as e:
        raise StatsFormatError(f"{what}: unreadable header ({e})") from None
    return head, payload


def store_kind(data) -> str:
    """The class name of the store serialised in ``data`` (framing and checksum checked)."""
    return _read_frame(data, "store")[0]["kind"]


def unpack(data, cls, array_names) -> tuple[Schema, dict, dict[str, np.ndarray]]:
    """Inverse of :func:`pack` for a store of class ``cls``: ``(schema, meta, arrays)``.

    Checks the framing, checksum, kind and the presence of ``array_names``; the caller checks
    shapes and values (and raises :class:`StatsFormatError` when they do not fit).
    """
    what = cls.__name__
    head, payload = _read_frame(data, what)
    if head["kind"] != what:
        raise StatsFormatError(f"bytes hold a serialised {head['kind']}, not a {what}")
    try:
        schema = Schema.from_dict(head["schema"])
    except SchemaError as e:
        raise StatsFormatError(f"{what}: bad schema in header ({e})") from None
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except Exception as e:  # numpy raises several types for a malformed archive
        raise StatsFormatError(f"{what}: unreadable array payload ({e})") from None
    missing = [name for name in array_names if name not in arrays]
    if missing:
        raise StatsFormatError(f"{what}: serialised store lacks arrays {missing}")
    return schema, head["meta"], arrays


def expect(condition: bool, cls, message: str) -> None:
    """Raise :class:`StatsFormatError` for ``cls`` when a deserialised value is inconsistent."""
    if not condition:
        raise StatsFormatError(f"{cls.__name__}: inconsistent serialised store: {message}")
