"""streammn's own model format: versioned JSON, lossless for every FeatureSet.

::

    {"format": "streammn-mn", "version": 1,
     "schema": {"variables": [{"name": "x0", "cardinality": 2}, ...]},
     "features": {"weights": [...], "ptr": [...], "var": [...], "val": [...], "eq": [0/1 ...]}}

The features are stored column-wise, exactly as :class:`~streammn.features.FeatureSet` holds
them (no canonicalisation on read, order kept), so a round trip gives an identical model.
Weights are JSON numbers written with Python's shortest round-tripping ``repr``; the hard-zero
weight ``-inf``, which strict JSON cannot express, is the string ``"-inf"``. The writer prints
the integer columns (millions of entries in a large model) with a numba kernel, byte for byte
what ``json.dumps`` would write.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numba as nb
import numpy as np

from streammn.features import FeatureSet
from streammn.formats.errors import ModelFormatError, check_weight, check_weights
from streammn.schema import Schema, SchemaError

FORMAT = "streammn-mn"
VERSION = 1
_COLUMNS = ("weights", "ptr", "var", "val", "eq")


def to_dict(schema: Schema, features: FeatureSet) -> dict:
    """The JSON-ready description of a model."""
    check_weights(features.weights)
    weights = ["-inf" if w == -math.inf else w for w in features.weights.tolist()]
    return {
        "format": FORMAT,
        "version": VERSION,
        "schema": schema.to_dict(),
        "features": {
            "weights": weights,
            "ptr": features.ptr.tolist(),
            "var": features.var.tolist(),
            "val": features.val.tolist(),
            "eq": features.eq.astype(np.int8).tolist(),
        },
    }


def from_dict(d, *, path=None) -> tuple[Schema, FeatureSet]:
    """Inverse of :func:`to_dict`; raises :class:`ModelFormatError` on anything malformed."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ModelFormatError(f'not a streammn model (expected "format": "{FORMAT}")', path=path)
    if d.get("version") != VERSION:
        raise ModelFormatError(
            f"unsupported {FORMAT} version {d.get('version')!r} "
            f"(this streammn reads version {VERSION})",
            path=path,
        )
    try:
        schema = Schema.from_dict(d["schema"])
    except (KeyError, SchemaError) as e:
        raise ModelFormatError(f"bad schema: {e}", path=path) from None
    cols = d.get("features")
    if not isinstance(cols, dict) or any(not isinstance(cols.get(k), list) for k in _COLUMNS):
        raise ModelFormatError(f'"features" must hold the lists {", ".join(_COLUMNS)}', path=path)
    try:
        weights = np.array([_weight(w) for w in cols["weights"]], dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ModelFormatError(f"bad feature column: {e}", path=path) from None
    ptr, var, val, eq = (_integers(cols[k], k, path) for k in ("ptr", "var", "val", "eq"))
    if (
        np.any((var < 0) | (var >= schema.n_vars))
        or np.any((val < 0) | (val > 255))
        or not np.isin(eq, (0, 1)).all()
    ):
        raise ModelFormatError(
            f"conditions need variables 0..{schema.n_vars - 1}, values 0..255 and eq flags 0 or 1",
            path=path,
        )
    for w in weights:
        check_weight(float(w), path=path)
    check_weights(weights, path=path)
    if ptr.size and np.any(np.diff(ptr) < 0):
        raise ModelFormatError('"ptr" must be non-decreasing', path=path)
    try:
        return schema, FeatureSet(schema, weights, ptr, var, val, eq.astype(bool))
    except ValueError as e:
        raise ModelFormatError(f"inconsistent features: {e}", path=path) from None


def _integers(column: list, name: str, path) -> np.ndarray:
    """A column of JSON integers as ``int64``. Anything else is refused, naming the column and
    the entry: a float (``1.5`` or ``-Infinity``, which a cast would truncate or overflow on),
    a bool, a string, a list, an integer beyond ``int64``."""
    for x in column:
        if type(x) is not int or not -(2**63) <= x < 2**63:
            raise ModelFormatError(
                f'bad feature column "{name}": entry {x!r} is not an integer', path=path
            )
    return np.array(column, dtype=np.int64)


def _weight(w) -> float:
    if w == "-inf":
        return -math.inf
    if isinstance(w, bool) or not isinstance(w, (int, float)):
        raise ValueError(f"weight {w!r} is not a number")
    return float(w)


@nb.njit(cache=True)
def _ascii_ints(values):
    """Non-negative integers as comma-separated decimal ASCII."""
    n = values.shape[0]
    size = max(n - 1, 0)
    for i in range(n):
        v = values[i]
        size += 1
        while v >= 10:
            v //= 10
            size += 1
    out = np.empty(size, dtype=np.uint8)
    end = size
    for i in range(n - 1, -1, -1):
        v = values[i]
        while True:
            end -= 1
            out[end] = 48 + v % 10
            v //= 10
            if v == 0:
                break
        if i:
            end -= 1
            out[end] = 44  # ","
    return out


def write_json(path: str | os.PathLike, schema: Schema, features: FeatureSet) -> None:
    """Write the model to ``path`` in the native JSON format."""
    check_weights(features.weights)
    compact: dict[str, Any] = {"allow_nan": False, "separators": (",", ":")}
    head = json.dumps({"format": FORMAT, "version": VERSION, "schema": schema.to_dict()}, **compact)
    weights = ["-inf" if w == -math.inf else w for w in features.weights.tolist()]
    with open(path, "wb") as f:
        f.write(f'{head[:-1]},"features":{{"weights":{json.dumps(weights, **compact)}'.encode())
        for name in ("ptr", "var", "val", "eq"):
            f.write(f',"{name}":['.encode())
            f.write(_ascii_ints(getattr(features, name).astype(np.int64)).tobytes())
            f.write(b"]")
        f.write(b"}}\n")


def read_json(path: str | os.PathLike) -> tuple[Schema, FeatureSet]:
    """Read a model written by :func:`write_json`."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except json.JSONDecodeError as e:
        raise ModelFormatError(f"invalid JSON: {e.msg}", path=path, line=e.lineno) from None
    except UnicodeDecodeError:
        raise ModelFormatError("not a UTF-8 text file", path=path) from None
    return from_dict(d, path=path)
