"""Libra's ``.mn`` (Markov network) and ``.dn`` (dependency network) text formats.

The specification is ``formats/libra-mn.md`` in the project's shared docs. Reading accepts every
factor form: single features (with an optional weight-tie id, which is ignored: each line carries
its own weight), ``features { }`` sets, ``table { }`` tables, ``tree { }`` s-expressions and ``w``
lines (ignored). Every factor becomes weighted conjunctive features with the same log score:
a set or table line is one feature, a tree leaf is one feature whose conditions are the tests on
its path (``X_i = a`` on the "equal" branch, ``X_i != a`` on the other). Conditions are put in
canonical form (sorted, redundancies dropped, never-true features dropped), as the spec asks of
readers. Keywords are case-insensitive, ``\\r\\n`` line ends are accepted, blank lines skipped.

Writing produces one feature per line with ``%.16e`` weights: 17 significant digits, so reading
the file back gives bit-identical float64 weights. ``-inf`` (a hard zero) is the token ``-inf``.
The schema line carries only cardinalities: variable names are not stored (pass ``schema=`` to
the readers to restore them).
"""

from __future__ import annotations

import os
import re
from typing import Sequence

import numpy as np

from streammn.features import Condition, FeatureSet
from streammn.formats.errors import ModelFormatError, check_weight, check_weights
from streammn.schema import Schema, SchemaError

_TOKEN = re.compile(r"[{}()]|[^\s{}()]+")
_NUMBER = re.compile(r"-?(?:[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|inf)", re.IGNORECASE)
_INT = re.compile(r"-?[0-9]+")
_COND = re.compile(r"([+-])v([0-9]+)_([0-9]+)", re.IGNORECASE)
_TEST = re.compile(r"v([0-9]+)_([0-9]+)", re.IGNORECASE)
_BLOCK = re.compile(r"v([0-9]+)", re.IGNORECASE)

Feature = tuple[float, tuple[Condition, ...]]


# reading ------------------------------------------------------------------------------------
class _Lines:
    """The non-blank lines of a file as token lists, with a cursor and error helper."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            data = f.read()
        try:
            text = _lines_of(data.decode("ascii"))
        except UnicodeDecodeError as e:
            line = _lines_of(data[: e.start].decode("ascii")).count("\n") + 1
            raise ModelFormatError(
                f"byte 0x{data[e.start]:02x} is not ASCII text", path=path, line=line
            ) from None
        self._lines = [(i + 1, _TOKEN.findall(line)) for i, line in enumerate(text.split("\n"))]
        self._lines = [(n, toks) for n, toks in self._lines if toks]
        self._pos = 0

    def next(self, expected: str) -> tuple[int, list[str]]:
        if self._pos >= len(self._lines):
            last = self._lines[-1][0] if self._lines else 1
            raise self.error(last, f"unexpected end of file, expected {expected}")
        item = self._lines[self._pos]
        self._pos += 1
        return item

    def at_end(self) -> bool:
        return self._pos >= len(self._lines)

    def error(self, line: int, message: str) -> ModelFormatError:
        return ModelFormatError(message, path=self.path, line=line)


def _lines_of(text: str) -> str:
    """``text`` with ``\\r\\n`` and ``\\r`` line ends made ``\\n`` (Python's universal newlines)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _number(lines: _Lines, line: int, tok: str) -> float:
    if not _NUMBER.fullmatch(tok):
        raise lines.error(line, f"expected a number, got {tok!r}")
    return check_weight(float(tok), path=lines.path, line=line)


def _var_value(lines: _Lines, line: int, schema: Schema, v: str, a: str) -> tuple[int, int]:
    v, a = int(v), int(a)
    if v >= schema.n_vars:
        raise lines.error(line, f"variable v{v} does not exist (the schema has {schema.n_vars})")
    if a >= schema.cardinalities[v]:
        raise lines.error(
            line, f"value {a} out of range for v{v} (cardinality {schema.cardinalities[v]})"
        )
    return v, a


def _feature(lines: _Lines, line: int, toks: list[str], schema: Schema) -> Feature:
    """``[<tie id>] <weight> <cond> ...``"""
    if len(toks) >= 2 and _INT.fullmatch(toks[0]) and _NUMBER.fullmatch(toks[1]):
        toks = toks[1:]  # weight-tie id: each line still carries its own weight
    w = _number(lines, line, toks[0])
    conds = []
    for tok in toks[1:]:
        m = _COND.fullmatch(tok)
        if not m:
            raise lines.error(line, f"expected a condition like +v3_1 or -v3_1, got {tok!r}")
        v, a = _var_value(lines, line, schema, m.group(2), m.group(3))
        conds.append((v, a, m.group(1) == "+"))
    return w, tuple(conds)


def _tree(lines: _Lines, schema: Schema, out: list[Feature]) -> None:
    """The body of ``tree {``: an s-expression over one or more lines, then ``}``."""
    toks: list[tuple[int, str]] = []
    while True:
        line, line_toks = lines.next("the tree's closing }")
        if "}" in line_toks:
            k = line_toks.index("}")
            if k != len(line_toks) - 1:
                raise lines.error(line, "unexpected text after the tree's closing }")
            toks.extend((line, t) for t in line_toks[:k])
            break
        toks.extend((line, t) for t in line_toks)
    if not toks:
        raise lines.error(line, "empty tree")
    pos = _subtree(lines, schema, toks, 0, (), out)
    if pos != len(toks):
        raise lines.error(toks[pos][0], f"unexpected {toks[pos][1]!r} after the end of the tree")


def _subtree(lines, schema, toks, pos, path, out) -> int:
    """Parse ``T := number | ( v<i>_<a> T T )`` at ``pos``; return the position after it."""

    def take(expected):
        nonlocal pos
        if pos >= len(toks):
            raise lines.error(toks[-1][0], f"tree ends early, expected {expected}")
        pos += 1
        return toks[pos - 1]

    line, tok = take("a number or (")
    if tok != "(":
        out.append((_number(lines, line, tok), path))
        return pos
    line, tok = take("a test like v3_1")
    m = _TEST.fullmatch(tok)
    if not m:
        raise lines.error(line, f"expected a test like v3_1, got {tok!r}")
    v, a = _var_value(lines, line, schema, m.group(1), m.group(2))
    pos = _subtree(lines, schema, toks, pos, path + ((v, a, True),), out)
    pos = _subtree(lines, schema, toks, pos, path + ((v, a, False),), out)
    line, tok = take(")")
    if tok != ")":
        raise lines.error(line, f"expected ), got {tok!r}")
    return pos


def _factors(lines: _Lines, schema: Schema) -> list[Feature]:
    """Factors up to and including the ``}`` that closes the enclosing block."""
    out: list[Feature] = []
    while True:
        line, toks = lines.next("a factor or }")
        head = toks[0].lower()
        if toks == ["}"]:
            return out
        if head in ("features", "table") and toks[1:] == ["{"]:
            while True:
                line, toks = lines.next(f"a feature or the {head} block's closing }}")
                if toks == ["}"]:
                    break
                out.append(_feature(lines, line, toks, schema))
        elif head == "tree" and toks[1:] == ["{"]:
            _tree(lines, schema, out)
        elif head == "w":
            if len(toks) != 3 or not _INT.fullmatch(toks[1]) or not _NUMBER.fullmatch(toks[2]):
                raise lines.error(line, "a w line is 'w <int> <float>'")
        elif _NUMBER.fullmatch(toks[0]):
            out.append(_feature(lines, line, toks, schema))
        else:
            raise lines.error(
                line,
                f"expected a feature, 'features {{', 'table {{', "
                f"'tree {{' or }}, got {' '.join(toks)[:60]!r}",
            )


def _header(lines: _Lines, keyword: str, schema: Schema | None) -> Schema:
    """Schema line and ``<keyword> {``; checks a caller-given schema against the file."""
    line, toks = lines.next("the schema line")
    schema_line = "".join(toks)
    try:
        file_schema = Schema.from_libra_line(schema_line)
    except SchemaError as e:
        raise lines.error(line, f"bad schema line: {e}") from None
    if schema is not None and list(schema.cardinalities) != list(file_schema.cardinalities):
        raise lines.error(
            line,
            f"schema line {schema_line!r} does not match the given schema {schema.libra_line()!r}",
        )
    line, toks = lines.next(f"'{keyword} {{'")
    if [t.lower() for t in toks] != [keyword.lower(), "{"]:
        raise lines.error(line, f"expected '{keyword} {{', got {' '.join(toks)[:60]!r}")
    return schema if schema is not None else file_schema


def _end(lines: _Lines) -> None:
    if not lines.at_end():
        line, toks = lines.next("end of file")
        if [t.lower() for t in toks] != ["eof"] or not lines.at_end():
            raise lines.error(line, "unexpected text after the model's closing }")


def read_libra_mn(
    path: str | os.PathLike, schema: Schema | None = None
) -> tuple[Schema, FeatureSet]:
    """Read a Libra ``.mn`` file as a schema and one feature set with the same log score.

    ``schema`` (optional) supplies variable names; its cardinalities must match the file's.
    """
    lines = _Lines(path)
    schema = _header(lines, "MN", schema)
    feats = _factors(lines, schema)
    _end(lines)
    features = FeatureSet.from_features(schema, feats)
    check_weights(features.weights, path=path)
    return schema, features


def read_libra_dn(
    path: str | os.PathLike, schema: Schema | None = None
) -> tuple[Schema, list[FeatureSet]]:
    """Read a Libra ``.dn`` file as a schema and one CPD feature set per variable.

    The result feeds :class:`streammn.dn.DependencyNetwork` directly: block ``v<i>``'s factors
    are CPD ``i``'s features. Every variable needs exactly one block.
    """
    lines = _Lines(path)
    schema = _header(lines, "DN", schema)
    cpds: dict[int, FeatureSet] = {}
    while True:
        line, toks = lines.next("a block 'v<i> {' or }")
        if toks == ["}"]:
            break
        m = _BLOCK.fullmatch(toks[0])
        if not m or toks[1:] != ["{"]:
            raise lines.error(line, f"expected a block 'v<i> {{', got {' '.join(toks)[:60]!r}")
        i = int(m.group(1))
        if i >= schema.n_vars:
            raise lines.error(line, f"block v{i}: the schema has {schema.n_vars} variables")
        if i in cpds:
            raise lines.error(line, f"second block for v{i}")
        cpds[i] = FeatureSet.from_features(schema, _factors(lines, schema))
        check_weights(cpds[i].weights, path=path)
    _end(lines)
    missing = [i for i in range(schema.n_vars) if i not in cpds]
    if missing:
        raise ModelFormatError(f"no block for variable(s) {missing[:10]}", path=path)
    return schema, [cpds[i] for i in range(schema.n_vars)]


# writing ------------------------------------------------------------------------------------
def _feature_lines(features: FeatureSet) -> list[str]:
    """``weight [+|-]v<var>_<value> ...`` per feature, as one string of lines (in a list, empty
    without features), built without a Python loop over conditions: each condition's text
    comes from a table of every (var, value, sign), and the pieces are laid out in file order
    and joined once."""
    n, ptr = features.n_features, features.ptr
    if n == 0:
        return []
    cards = features.schema.cardinalities.astype(np.int64)
    start = np.concatenate([[0], np.cumsum(cards)[:-1]])
    tokens = np.array(
        [f" {sign}v{v}_{a}" for v in range(cards.size) for a in range(cards[v]) for sign in "-+"],
        dtype=object,
    )
    codes = 2 * (start[features.var] + features.val) + features.eq.astype(np.int64)
    pieces = np.empty(n + codes.size, dtype=object)
    first = ptr[:-1] + np.arange(n)  # feature f's weight, then its conditions
    pieces[first] = ["\n%.16e" % w for w in features.weights.tolist()]
    is_cond = np.ones(pieces.size, dtype=bool)
    is_cond[first] = False
    pieces[is_cond] = tokens[codes]
    return ["".join(pieces.tolist())[1:]]


def _write(path, text_lines: list[str]) -> None:
    with open(path, "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(text_lines) + "\n")


def write_libra_mn(path: str | os.PathLike, schema: Schema, features: FeatureSet) -> None:
    """Write ``features`` as a Libra ``.mn`` file, one feature per line."""
    check_weights(features.weights, path=path)
    _write(path, [schema.libra_line(), "MN {", *_feature_lines(features), "}"])


def write_libra_dn(path: str | os.PathLike, schema: Schema, cpds: Sequence[FeatureSet]) -> None:
    """Write one ``v<i> { ... }`` block of single-feature lines per CPD as a Libra ``.dn``."""
    if len(cpds) != schema.n_vars:
        raise ModelFormatError(f"expected {schema.n_vars} CPDs, got {len(cpds)}", path=path)
    lines = [schema.libra_line(), "DN {"]
    for i, cpd in enumerate(cpds):
        check_weights(cpd.weights, path=path)
        lines += [f"v{i} {{", *_feature_lines(cpd), "}"]
    _write(path, lines + ["}"])
