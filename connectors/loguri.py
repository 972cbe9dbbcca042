"""``kafka://`` and ``redis://`` source URIs: host, stream name and typed query options."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from streammn.schema import Schema
from streammn.errors import SettingsError

_BOOL = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}

#: query options of every log source (the settings of
#: :class:`~streammn.connectors.logsource.MessageLogSource`), in the order errors list them
LOG_OPTIONS = {
    "batch_size": int,
    "poll_timeout": float,
    "max_wait": float,
    "broker_timeout": float,
    "stop_at_end": "bool",
    "dead_letter": str,
    "start": str,
}


def parse_log_uri(
    uri: str, scheme: str, types: dict, client_settings: bool = False
) -> tuple[str, str, dict]:
    """Split ``scheme://host:port/name?key=value&...`` into (host, name, typed options).

    ``types`` maps each allowed option to ``str``/``int``/``float``, ``"bool"``, ``"ints"``
    (comma-separated) or ``"schema"`` (a Libra ``.schema`` file or a streammn schema JSON file,
    loaded). With ``client_settings``, dotted keys (``session.timeout.ms=6000``) are collected
    as strings into ``options["config"]`` for the client library. Unknown options and
    malformed values are :class:`ValueError`.
    """
    parsed = urlparse(uri)
    if parsed.scheme.lower() != scheme:
        raise SettingsError(f"{uri}: not a {scheme}:// URI")
    name = unquote(parsed.path.lstrip("/"))
    if not parsed.netloc or not name:
        raise SettingsError(f"{uri}: expected {scheme}://host:port/<name>?options")
    options: dict[str, Any] = {}
    for key, values in parse_qs(parsed.query, keep_blank_values=True).items():
        if client_settings and "." in key:
            options.setdefault("config", {})[key] = values[-1]
            continue
        if key not in types:
            raise SettingsError(f"{uri}: unknown option {key!r} (known: {', '.join(types)})")
        raw = values[-1]
        kind = types[key]
        try:
            if kind == "bool":
                options[key] = _BOOL[raw.lower()]
            elif kind == "ints":
                options[key] = [int(p) for p in raw.split(",") if p.strip()]
            elif kind == "schema":
                options[key] = load_schema_file(raw)
            else:
                options[key] = kind(raw)
        except (KeyError, ValueError, OSError) as e:
            raise SettingsError(f"{uri}: bad value {raw!r} for option {key!r} ({e})") from None
    return parsed.netloc, name, options


def source_options(
    uri: str, uri_options: dict, options: dict, schema: Schema | None, what: str
) -> tuple[str, dict]:
    """``(group, keyword arguments)`` of a log source: the URI's options overridden by
    ``options`` and ``schema``, the ``group`` (default ``streammn``) taken out. Without a
    schema a :class:`SettingsError` says that ``what`` (e.g. "a Kafka source") needs one."""
    uri_options.update(options)
    if schema is not None:
        uri_options["schema"] = schema
    if uri_options.get("schema") is None:
        raise SettingsError(f"{uri}: {what} needs a schema (schema=<file> or --schema)")
    group = uri_options.pop("group", "streammn")
    return group, uri_options


def load_schema_file(path: str) -> Schema:
    """A schema from a Libra ``.schema`` file (one line of cardinalities) or streammn JSON."""
    with open(path) as f:
        text = f.read()
    if text.lstrip().startswith("{"):
        return Schema.from_dict(json.loads(text))
    return Schema.from_libra_line(text.strip(), source=path)
