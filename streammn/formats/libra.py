"""Libra's ``.mn`` (Markov network) and ``.dn`` (dependency network) text formats.

The specification is ``formats/libra-mn.md`` in the project's shared docs. Reading accepts every
factor form: single features (with an optional weight-tie id, which is ignored: each line carries
its own weight), ``features { }`` sets, ``table { }`` tables, ``tree { }`` s-expressions and ``w``
lines (ignored). Every factor becomes weighted conjunctive features with the same log score:
a set or table line is one feature, a tree leaf is one feature whose conditions are the tests on
its path (``X_i = a`` on the "equal" branch, ``X_i != a`` on the other). Conditions are put in
canonical form (sorted, redundancies dropped, never-true features dropped), as the spec asks of
readers. Keywords are case-insensitive, ``\\r\\n`` line ends are accepted, blank lines skipped.
The format has no comments: a comment line is refused at its line, as any other stray text.

A numba kernel scans the whole file and parses the plain feature lines into flat arrays (see
"reading" below), so a model of millions of features reads in seconds and in a fraction of the
memory per-line Python objects took (Libra's plants model at kappa 1, 1,667,140 features:
78 s and 2.94 GB before, 1.2 s and 0.52 GB of peak RSS; its JSON file: 7.3 s and 1.02 GB).

Writing produces one feature per line with ``%.16e`` weights: 17 significant digits, so reading
the file back gives bit-identical float64 weights. ``-inf`` (a hard zero) is the token ``-inf``.
The schema line carries only cardinalities: variable names are not stored (pass ``schema=`` to
the readers to restore them).
"""

from __future__ import annotations

import os
import re
from typing import Sequence

import numba as nb
import numpy as np

from streammn.features._canonical import canonical_flat
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
# The scan: one pass of a numba kernel over the file's bytes classifies every line as blank, a
# plain feature line (``[<tie id>] <weight> <cond> ...`` in the grammar above) or other, and
# parses the plain feature lines' conditions into flat arrays, so a model of millions of
# feature lines is never held as per-line Python objects. Weights are parsed together by
# pyarrow (correctly rounded: the same floats as Python's ``float``). The other lines (headers,
# braces, trees, ``w`` lines, anything unusual or wrong) are few and go through the token
# parser below, which also gives every error; a plain line whose variable or value is out of
# range, or whose weight is ``+inf``, is handed to it too, so errors come in file order and
# read as they always have.
_BLANK, _PLAIN, _OTHER = 0, 1, 2


@nb.njit(cache=True, inline="always")
def _after_digits(buf, j, b):
    """The first position from ``j`` (before ``b``) that holds no ASCII digit."""
    while j < b and 48 <= buf[j] <= 57:
        j += 1
    return j


@nb.njit(cache=True)
def _number_token(buf, a, b):
    """0: not a number; 1: a number; 2: ``inf`` (no sign). ``_NUMBER``'s grammar."""
    i = a
    if buf[i] == 45:  # "-"
        i += 1
    if b - i == 3 and buf[i] | 32 == 105 and buf[i + 1] | 32 == 110 and buf[i + 2] | 32 == 102:
        return 2 if i == a else 1
    j = _after_digits(buf, i, b)
    if j == i:
        return 0
    if j < b and buf[j] == 46:  # "."
        k = j + 1
        j = _after_digits(buf, k, b)
        if j == k:
            return 0
    if j < b and buf[j] | 32 == 101:  # "e" or "E"
        k = j + 1
        if k < b and (buf[k] == 43 or buf[k] == 45):
            k += 1
        j = _after_digits(buf, k, b)
        if j == k:
            return 0
    return 1 if j == b else 0


@nb.njit(cache=True)
def _int_token(buf, a, b):
    """``_INT``'s grammar: ``-?[0-9]+``."""
    i = a + 1 if buf[a] == 45 else a
    if i == b:
        return False
    for j in range(i, b):
        if not 48 <= buf[j] <= 57:
            return False
    return True


@nb.njit(cache=True)
def _digits_at(buf, i, b, stop):
    """The decimal number at ``buf[i:]`` up to byte ``stop`` (or ``b``): ``(value, end)``,
    value -1 without digits and capped at 2**40."""
    v = -1
    while i < b and buf[i] != stop:
        d = buf[i] - 48
        if d < 0 or d > 9:
            return -1, i
        v = min(max(v, 0) * 10 + d, 1 << 40)
        i += 1
    return v, i


@nb.njit(cache=True)
def _scan(buf, n_lines, max_conds):
    """Every line's start and kind; each plain feature line's line, weight token and
    conditions (variable, value, sign) in CSR form."""
    n = buf.shape[0]
    starts = np.empty(n_lines + 1, dtype=np.int64)
    kind = np.empty(n_lines, dtype=np.int8)
    f_line = np.empty(n_lines, dtype=np.int64)
    w_start = np.empty(n_lines, dtype=np.int64)
    w_end = np.empty(n_lines, dtype=np.int64)
    c_ptr = np.empty(n_lines + 1, dtype=np.int64)
    c_var = np.empty(max_conds, dtype=np.int32)
    c_val = np.empty(max_conds, dtype=np.uint8)
    c_eq = np.empty(max_conds, dtype=np.bool_)
    c_ptr[0] = 0
    nf = 0
    nc = 0
    pos = 0
    for line in range(n_lines):
        starts[line] = pos
        end = pos
        while end < n and buf[end] != 10:
            end += 1
        k = _BLANK
        n_tok = 0
        first_int = False
        i = pos
        while i < end:
            c = buf[i]
            if c == 32 or c == 9:
                i += 1
                continue
            if c == 11 or c == 12 or 28 <= c <= 31:  # other whitespace: the token parser's
                k = _OTHER
                break
            a = i
            while i < end and buf[i] != 32 and buf[i] != 9:
                i += 1
            b = i
            if n_tok == 0:
                number = _number_token(buf, a, b)
                if number == 0:
                    k = _OTHER
                    break
                k = _PLAIN if number == 1 else _OTHER  # a weight of +inf: the parser's error
                first_int = _int_token(buf, a, b)
                w_start[nf], w_end[nf] = a, b
            elif n_tok == 1 and first_int and _number_token(buf, a, b) != 0:
                # a weight-tie id, then the weight
                k = _PLAIN if _number_token(buf, a, b) == 1 else _OTHER
                w_start[nf], w_end[nf] = a, b
            else:  # a condition [+-]v<i>_<a>
                if b - a < 5 or not (buf[a] == 43 or buf[a] == 45) or buf[a + 1] | 32 != 118:
                    k = _OTHER
                    break
                v, j = _digits_at(buf, a + 2, b, 95)  # up to "_"
                if v < 0 or j >= b or v > 2**31 - 1:
                    k = _OTHER
                    break
                value, j = _digits_at(buf, j + 1, b, 32)
                if value < 0 or j != b or value > 255:
                    k = _OTHER
                    break
                c_var[nc], c_val[nc], c_eq[nc] = v, value, buf[a] == 43
                nc += 1
            if k == _OTHER:
                break
            n_tok += 1
        kind[line] = k
        if k == _PLAIN:
            f_line[nf] = line
            nf += 1
            c_ptr[nf] = nc
        else:
            nc = c_ptr[nf]
        pos = end + 1
    starts[n_lines] = pos
    return (
        starts,
        kind,
        f_line[:nf].copy(),
        w_start[:nf].copy(),
        w_end[:nf].copy(),
        c_ptr[: nf + 1].copy(),
        c_var[:nc].copy(),
        c_val[:nc].copy(),
        c_eq[:nc].copy(),
    )


@nb.njit(cache=True)
def _gather(buf, starts, ends):
    """The byte ranges ``buf[starts[k]:ends[k]]`` one after the other, and their offsets."""
    offsets = np.empty(starts.shape[0] + 1, dtype=np.int64)
    offsets[0] = 0
    for k in range(starts.shape[0]):
        offsets[k + 1] = offsets[k] + ends[k] - starts[k]
    out = np.empty(offsets[-1], dtype=np.uint8)
    for k in range(starts.shape[0]):
        out[offsets[k] : offsets[k + 1]] = buf[starts[k] : ends[k]]
    return out, offsets


def _parse_floats(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The number tokens ``buf[starts[k]:ends[k]]`` (``_NUMBER``'s grammar) as float64, by
    pyarrow's parser: correctly rounded, so each equals Python's ``float`` of its text (an
    overflow gives an infinity, as there)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if starts.shape[0] == 0:
        return np.zeros(0)
    text, offsets = _gather(buf, starts, ends)
    strings = pa.Array.from_buffers(
        pa.large_string(), starts.shape[0], [None, pa.py_buffer(offsets), pa.py_buffer(text)]
    )
    return pc.cast(strings, pa.float64()).to_numpy(zero_copy_only=False)


@nb.njit(cache=True)
def _out_of_range(c_ptr, c_var, c_val, weights, cards):
    """Scanned features with a variable or value out of range, or the weight ``+inf``."""
    bad = weights == np.inf
    for f in range(weights.shape[0]):
        for c in range(c_ptr[f], c_ptr[f + 1]):
            if c_var[c] >= cards.shape[0] or c_val[c] >= cards[c_var[c]]:
                bad[f] = True
    return bad


@nb.njit(cache=True)
def _already_canonical(ptr, var, val, eq, cards):
    """True when every conjunction is as :func:`~streammn.features._canonical.canonical_flat`
    would leave it (as every file streammn writes): variables increasing, each with one
    ``=`` or with increasing ``!=`` values that leave two or more values allowed."""
    for f in range(ptr.shape[0] - 1):
        c = ptr[f]
        while c < ptr[f + 1]:
            v = var[c]
            if c > ptr[f] and var[c - 1] >= v:
                return False
            if eq[c]:
                c += 1
                continue
            k = c + 1
            while k < ptr[f + 1] and var[k] == v:
                if eq[k] or val[k] <= val[k - 1]:
                    return False
                k += 1
            if cards[v] - (k - c) < 2:
                return False
            c = k
    return True


class _Lines:
    """The non-blank lines of a file, with a cursor and error helper: a line's tokens on
    demand, and runs of plain feature lines taken whole (:meth:`take_plain`)."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            data = f.read()
        if not data.isascii():
            start = int(np.argmax(np.frombuffer(data, dtype=np.uint8) >= 128))
            line = _lines_of(data[:start].decode("ascii")).count("\n") + 1
            raise ModelFormatError(
                f"byte 0x{data[start]:02x} is not ASCII text", path=path, line=line
            )
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        self._buf = np.frombuffer(data, dtype=np.uint8)
        scan = _scan(self._buf, data.count(b"\n") + 1, data.count(b"_"))
        self._starts, kind, f_line, w_start, w_end, self._c_ptr = scan[:6]
        self._c_var, self._c_val, self._c_eq = scan[6:]
        self.weights = _parse_floats(self._buf, w_start, w_end)
        self._tokens = {}  # the other lines' tokens; those without any are blank
        for i in np.flatnonzero(kind == _OTHER).tolist():
            self._tokens[i] = _TOKEN.findall(self._text(i))
            if not self._tokens[i]:
                kind[i] = _BLANK
        self._f_line = f_line
        self._index = np.flatnonzero(kind != _BLANK)  # line index (from 0) of each position
        self._kind = kind[self._index]
        self._feature = np.full(self._index.shape[0], -1, dtype=np.int64)
        self._feature[np.searchsorted(self._index, f_line)] = np.arange(f_line.shape[0])
        self._stops = np.flatnonzero(self._kind != _PLAIN)
        self._pos = 0

    def _text(self, i: int) -> str:
        return self._buf[self._starts[i] : self._starts[i + 1] - 1].tobytes().decode("ascii")

    def check_ranges(self, schema: Schema) -> None:
        """Hand the plain lines whose variable or value is out of ``schema``'s range, or whose
        weight is ``+inf`` (a number too large for float64), to the token parser: its
        errors name them."""
        bad = _out_of_range(
            self._c_ptr,
            self._c_var,
            self._c_val,
            self.weights,
            schema.cardinalities.astype(np.int64),
        )
        if bad.any():
            at = np.searchsorted(self._index, self._f_line[bad])
            self._kind[at] = _OTHER
            self._stops = np.flatnonzero(self._kind != _PLAIN)

    def next(self, expected: str) -> tuple[int, list[str]]:
        if self._pos >= self._index.shape[0]:
            last = int(self._index[-1]) + 1 if self._index.shape[0] else 1
            raise self.error(last, f"unexpected end of file, expected {expected}")
        i = int(self._index[self._pos])
        self._pos += 1
        toks = self._tokens.get(i)
        return i + 1, toks if toks is not None else _TOKEN.findall(self._text(i))

    def take_plain(self) -> tuple[int, int] | None:
        """The scanned features ``[a, b)`` of the run of plain feature lines at the cursor
        (moved past them), or None when the next line is not one."""
        pos = self._pos
        if pos >= self._kind.shape[0] or self._kind[pos] != _PLAIN:
            return None
        k = np.searchsorted(self._stops, pos)
        end = int(self._stops[k]) if k < self._stops.shape[0] else self._kind.shape[0]
        self._pos = end
        return int(self._feature[pos]), int(self._feature[end - 1]) + 1

    def conditions(self, a: int, b: int):
        """Weights and raw conditions (CSR) of scanned features ``[a, b)``."""
        c0, c1 = self._c_ptr[a], self._c_ptr[b]
        return (
            self.weights[a:b],
            self._c_ptr[a : b + 1] - c0,
            self._c_var[c0:c1],
            self._c_val[c0:c1],
            self._c_eq[c0:c1],
        )

    def at_end(self) -> bool:
        return self._pos >= self._index.shape[0]

    def error(self, line: int, message: str) -> ModelFormatError:
        return ModelFormatError(message, path=self.path, line=line)


class _Features:
    """A block's features in file order: runs of scanned lines and features parsed one by one
    (trees, lines the scan left to the parser), put in canonical form together."""

    def __init__(self, lines: _Lines):
        self.lines = lines
        self.pieces: list = []  # (a, b) runs of scanned features, or lists of Feature

    def run(self, span: tuple[int, int]) -> None:
        self.pieces.append(span)

    def append(self, feature: Feature) -> None:
        if not self.pieces or not isinstance(self.pieces[-1], list):
            self.pieces.append([])
        self.pieces[-1].append(feature)

    def extend(self, features: list[Feature]) -> None:
        for feature in features:
            self.append(feature)

    def feature_set(self, schema: Schema) -> FeatureSet:
        """What ``FeatureSet.from_features`` gives for these features: each conjunction
        canonical (:func:`~streammn.features._canonical.canonical_flat`, the same rules),
        those that never hold dropped."""
        parts = [
            self.lines.conditions(*piece) if isinstance(piece, tuple) else _flat(piece)
            for piece in self.pieces
        ]
        if not parts:
            return FeatureSet.empty(schema)
        if len(parts) == 1:
            weights, ptr, var, val, eq = parts[0]
        else:
            offsets = np.cumsum([0] + [p[2].shape[0] for p in parts[:-1]])
            weights = np.concatenate([p[0] for p in parts])
            ptr = np.concatenate([[0]] + [p[1][1:] + o for p, o in zip(parts, offsets)])
            var, val, eq = (np.concatenate([p[k] for p in parts]) for k in (2, 3, 4))
        cards = schema.cardinalities.astype(np.int64)
        if _already_canonical(ptr, var, val, eq, cards):
            return FeatureSet(schema, weights, ptr, var, val, eq, validate=False)
        keep, ptr, var, val, eq = canonical_flat(ptr, var, val, eq, cards)
        return FeatureSet(schema, weights[keep], ptr, var, val, eq, validate=False)


def _flat(features: list[Feature]):
    """Features parsed one by one as ``(weights, ptr, var, val, eq)``."""
    conds = [c for _, cs in features for c in cs]
    return (
        np.array([w for w, _ in features], dtype=np.float64),
        np.concatenate([[0], np.cumsum([len(cs) for _, cs in features])]).astype(np.int64),
        np.array([v for v, _, _ in conds], dtype=np.int32),
        np.array([a for _, a, _ in conds], dtype=np.uint8),
        np.array([e for _, _, e in conds], dtype=np.bool_),
    )


def _lines_of(text: str) -> str:
    """``text`` with ``\\r\\n`` and ``\\r`` line ends made ``\\n`` (Python's universal newlines)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _number(lines: _Lines, line: int, tok: str) -> float:
    if not _NUMBER.fullmatch(tok):
        raise lines.error(line, f"expected a number, got {tok!r}")
    return check_weight(float(tok), path=lines.path, line=line)


def _var_value(
    lines: _Lines, line: int, schema: Schema, v_text: str, a_text: str
) -> tuple[int, int]:
    v, a = int(v_text), int(a_text)
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


def _tree(lines: _Lines, schema: Schema, out: _Features) -> None:
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


def _factors(lines: _Lines, schema: Schema) -> _Features:
    """Factors up to and including the ``}`` that closes the enclosing block."""
    out = _Features(lines)
    while True:
        span = lines.take_plain()
        if span is not None:
            out.run(span)
            continue
        line, toks = lines.next("a factor or }")
        head = toks[0].lower()
        if toks == ["}"]:
            return out
        if head in ("features", "table") and toks[1:] == ["{"]:
            while True:
                span = lines.take_plain()
                if span is not None:
                    out.run(span)
                    continue
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
    lines.check_ranges(schema)
    factors = _factors(lines, schema)
    _end(lines)
    features = factors.feature_set(schema)
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
    lines.check_ranges(schema)
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
        cpds[i] = _factors(lines, schema).feature_set(schema)
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
