"""Schema files: what ``streammn learn --schema FILE`` reads.

A Libra ``.schema`` file is one line of cardinalities. A ``.json`` file lists the variables::

    {"variables": [
        {"name": "country", "states": ["US", "DE", "FR"]},
        {"name": "clicked", "states": [false, true]},
        {"name": "latency", "bins": [12.5, 40]},
        {"name": "n", "cardinality": 3},
        {"name": "zip", "kind": "category"},
        {"name": "age", "kind": "number", "bins": 5}
    ], "missing": true}

A variable with ``states``, a list of ``bins`` edges or a ``cardinality`` is declared whole
(:meth:`Variable.from_dict <streammn.schema.Variable.from_dict>`). One with only a ``kind``
(:data:`KINDS`: ``category``, ``boolean``, ``number`` with an optional count of ``bins`` (a
count alone says ``number``), or ``code``, state numbers) has its states read from the first
rows like an undeclared column, but as that kind
(:func:`streammn.schema.inference.infer_variable`): a column of zip codes is words, not
numbers. A file that declares every variable whole is the schema; otherwise the kinds go to
the source, which infers the rest.
"""

from __future__ import annotations

import json
import os

from streammn.errors import SchemaError, SchemaFileUnavailable
from streammn.schema.variables import Schema, Variable

KINDS = ("category", "boolean", "number", "code")
WHOLE = ("states", "cardinality")  # with a list of bins, what declares a variable whole


def read_schema_file(path: str | os.PathLike) -> tuple[Schema | None, dict[str, Variable | dict]]:
    """The schema ``path`` declares, or None and what it says of the variables it names: a
    name to its :class:`Variable` when declared whole, else to its entry (``kind`` and, for
    numbers, the count of ``bins``), for a source to infer the rest (``kinds=``)."""
    if not os.fspath(path).lower().endswith(".json"):
        return Schema.from_libra(path), {}
    try:
        with open(path, "rb") as f:
            described = json.loads(f.read().decode("utf-8"))
        variables = described["variables"]
        if not isinstance(variables, list) or not all(isinstance(v, dict) for v in variables):
            raise TypeError("'variables' must be a list of objects")
    except OSError as e:
        raise SchemaFileUnavailable(f"{path}: cannot read the schema file ({e.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise SchemaError(f"not a JSON schema file ({type(e).__name__}: {e})", source=str(path))
    for v in variables:
        _check_kind(v, str(path))
    if all(_whole(v) for v in variables):
        try:
            return Schema.from_dict(described), {}
        except SchemaError as e:
            raise SchemaError(e.reason, source=str(path)) from None
    try:
        return None, {v["name"]: Variable.from_dict(v) if _whole(v) else v for v in variables}
    except SchemaError as e:
        raise SchemaError(e.reason, source=str(path)) from None


def _whole(entry: dict) -> bool:
    return any(k in entry for k in WHOLE) or isinstance(entry.get("bins"), list)


def _check_kind(entry: dict, path: str) -> None:
    """Refuse an entry without a name, or with a kind that is not one of :data:`KINDS`, or
    that is neither declared whole nor given a kind."""
    if not isinstance(entry.get("name"), str):
        raise SchemaError(f"a variable without a name: {entry!r}", source=path)
    kind = entry.get("kind")
    if kind is not None and kind not in KINDS:
        raise SchemaError(
            f"variable {entry['name']!r}: kind {kind!r} is not one of {', '.join(KINDS)}",
            source=path,
        )
    if kind is None and not _whole(entry) and "bins" not in entry:
        raise SchemaError(
            f"variable {entry['name']!r}: give its states, bins, cardinality or kind",
            source=path,
        )
    bins = entry.get("bins")
    if bins is not None and not isinstance(bins, list):
        if isinstance(bins, bool) or not isinstance(bins, int) or not 2 <= bins <= 255:
            raise SchemaError(
                f"variable {entry['name']!r}: bins is a list of edges or a count in 2..255, "
                f"got {bins!r}",
                source=path,
            )
