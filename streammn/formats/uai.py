"""The UAI ``MARKOV`` format: factor tables of non-negative potentials.

Specification: ``formats/uai.md`` in the project's shared docs. Writing turns each feature with
weight ``w`` over scope ``S`` (its distinct variables, in increasing order) into a table over
``S`` holding ``exp(w)`` where the feature's conditions hold and ``1`` elsewhere; with
``merge=True`` (the default) the features sharing a scope become one table, the product of their
potentials. Entries are listed with the last variable of the scope changing fastest. A weight of
``-inf`` (hard zero) gives the potential 0; a potential ``exp(...)`` that overflows float64, or
that underflows below its smallest normal number (a finite weight sum below -708, which would be
written as 0, a hard zero, or as a subnormal number without its digits), is refused. Features
without conditions (constants) only scale
the model: their summed weight multiplies the first table (or, without any, becomes one factor
over variable 0 whose entries all equal ``exp(sum)``), so the written model's partition
function equals ours, and no reader has to accept an empty scope.

Written for every reader, not only ours:

- potentials are plain decimals, never exponent notation (``0.0000061442``, not
  ``6.1442e-06``): pgmpy's UAI grammar (digits, an optional point and digits) rejects an
  exponent mid-file and silently misreads one as the last token;
- every variable is in some table over two or more variables. Readers that build the graph from
  the tables' scopes (pgmpy) cannot place a variable that has only a one-variable table (a
  constant column, a variable independent of the rest) or none; such a variable's table is
  written over it and a neighbour (the next variable, or the previous for the last), constant
  along the neighbour, which leaves the distribution unchanged.

Reading gives one feature per table entry whose potential is not 1: the entry's full
assignment of the scope, weight ``log(potential)`` (``-inf`` for 0). The log score of every
state is the same as the file's; variable names are not stored (pass ``schema=``).
"""

from __future__ import annotations

import math
import os
import re

import numba as nb
import numpy as np

from streammn.features import FeatureSet, distinct_sorted
from streammn.formats.errors import ModelFormatError, check_weights
from streammn.features.grouping import group_keys
from streammn.schema import Schema, SchemaError

# The one limit on the entries of a UAI file's tables, for snapshots and ``convert`` alike: 4M
# entries are about 32 MB of text. A conjunction over k variables needs a table over all of
# them, so a model of long features (plants: 590M entries) is refused, and .mn / .json hold it.
UAI_MAX_ENTRIES = 1 << 22
_MAX_LOG = math.log(np.finfo(np.float64).max)
_MIN_LOG = math.log(np.finfo(np.float64).tiny)  # below: a subnormal potential, or 0


@nb.njit(cache=True)
def _log_tables(
    scope_ptr, scope_var, fac_ptr, fac_feat, tab_ptr, cards, weights, ptr, var, val, eq
):
    """Summed weights of each factor's features at every joint assignment of its scope.

    A factor's features test only variables of its scope, so each one holds on the product of
    the values its conditions allow per scope variable: those entries are enumerated directly
    (one entry for a feature that fixes every variable) and get its weight added, features in
    factor order, so every entry sums its weights in the same order as a scan would."""
    out = np.zeros(tab_ptr[-1])
    position = np.full(cards.shape[0], -1, dtype=np.int64)
    max_scope = 1
    for g in range(scope_ptr.shape[0] - 1):
        max_scope = max(max_scope, scope_ptr[g + 1] - scope_ptr[g])
    allowed = np.empty((max_scope, cards.max()), dtype=np.bool_)
    choices = np.empty((max_scope, cards.max()), dtype=np.int64)
    n_choices = np.empty(max_scope, dtype=np.int64)
    digit = np.empty(max_scope, dtype=np.int64)
    stride = np.empty(max_scope, dtype=np.int64)
    for g in range(scope_ptr.shape[0] - 1):
        s0, s1 = scope_ptr[g], scope_ptr[g + 1]
        k = s1 - s0
        step = 1
        for j in range(k - 1, -1, -1):  # last variable changes fastest
            position[scope_var[s0 + j]] = j
            stride[j] = step
            step *= cards[scope_var[s0 + j]]
        for t in range(fac_ptr[g], fac_ptr[g + 1]):
            f = fac_feat[t]
            for j in range(k):
                allowed[j, : cards[scope_var[s0 + j]]] = True
            for c in range(ptr[f], ptr[f + 1]):
                j = position[var[c]]
                if eq[c]:
                    for b in range(cards[var[c]]):
                        if b != val[c]:
                            allowed[j, b] = False
                else:
                    allowed[j, val[c]] = False
            empty = False
            for j in range(k):
                n = 0
                for b in range(cards[scope_var[s0 + j]]):
                    if allowed[j, b]:
                        choices[j, n] = b
                        n += 1
                n_choices[j] = n
                digit[j] = 0
                empty = empty or n == 0
            while not empty:  # an odometer over the allowed values, last variable fastest
                e = 0
                for j in range(k):
                    e += choices[j, digit[j]] * stride[j]
                out[tab_ptr[g] + e] += weights[f]
                j = k - 1
                while j >= 0:
                    digit[j] += 1
                    if digit[j] < n_choices[j]:
                        break
                    digit[j] = 0
                    j -= 1
                empty = j < 0
        for j in range(s0, s1):
            position[scope_var[j]] = -1
    return out


def _scope_groups(bounds, scope_var, merge):
    """Factor of every feature (-1 without conditions) and the number of factors: features
    whose scopes (``scope_var`` between ``bounds``) are equal share one with ``merge``
    (:func:`~streammn.features.grouping.group_keys`). Factors are numbered in order of first
    appearance."""
    scoped = np.flatnonzero(np.diff(bounds) > 0)
    group = np.full(bounds.shape[0] - 1, -1, dtype=np.int64)
    if not merge:
        group[scoped] = np.arange(scoped.shape[0])
        return group, int(scoped.shape[0])
    # the scoped features' scopes lie one after the other: the others have empty ones
    scoped_group, first = group_keys(np.append(bounds[scoped], bounds[-1]), scope_var)
    group[scoped] = scoped_group
    return group, int(first.shape[0])


class UaiFactors:
    """The factor tables of a feature set, as flat arrays: each factor's scope (its distinct
    variables, increasing) in ``scope_ptr``/``scope_var``, its features in ``fac_ptr``/
    ``fac_feat`` (in feature order), and its table size (entries) in ``sizes``."""

    def __init__(self, schema: Schema, features: FeatureSet, merge: bool):
        n_vars = schema.n_vars
        f_of_cond = np.repeat(np.arange(features.n_features, dtype=np.int64), features.lengths())
        keys = distinct_sorted(f_of_cond * n_vars + features.var)  # each feature's sorted scope
        scope_var = keys % n_vars
        bounds = np.searchsorted(keys // n_vars, np.arange(features.n_features + 1))
        group, n_groups = _scope_groups(bounds, scope_var, merge)
        members = np.argsort(group, kind="stable")[int((group < 0).sum()) :]
        first = members[np.searchsorted(group[members], np.arange(n_groups))]
        lengths = bounds[first + 1] - bounds[first]
        self.scope_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        take = np.repeat(bounds[first] - self.scope_ptr[:-1], lengths) + np.arange(
            int(self.scope_ptr[-1])
        )
        self.scope_var = scope_var[take].astype(np.int64)
        self.fac_ptr = np.concatenate(
            [[0], np.cumsum(np.bincount(group[members], minlength=n_groups))]
        )
        self.fac_feat = members.astype(np.int64)
        cards = schema.cardinalities.astype(np.float64)
        sizes = (
            np.multiply.reduceat(cards[self.scope_var], self.scope_ptr[:-1])
            if n_groups
            else np.zeros(0)
        )
        self.total = float(sizes.sum())  # a float: products of many cardinalities are huge
        self.sizes = sizes.astype(np.int64) if self.total <= 2.0**62 else None

    @property
    def n_factors(self) -> int:
        return self.scope_ptr.size - 1


def _checked_log_tables(
    schema: Schema,
    features: FeatureSet,
    merge: bool,
    max_entries: int,
    path,
    factors: UaiFactors | None,
):
    """Group the features into factors and sum their weights into log tables, refusing more
    than ``max_entries`` entries or potentials that overflow float64. Returns the factors, the
    tables' offsets, the log tables and the weight of the features without conditions."""
    check_weights(features.weights, path=path)
    cards = schema.cardinalities.astype(np.int64)
    if factors is None:
        factors = UaiFactors(schema, features, merge)
    if factors.total > max_entries:
        raise ModelFormatError(
            f"the UAI tables would hold {int(factors.total):,} entries, more than the limit "
            f"of {max_entries:,} (the largest table is over "
            f"{int(np.diff(factors.scope_ptr).max())} variables). The .mn (Libra) and .json "
            f"formats hold the features without tables; or raise the limit (max_entries=, "
            f"streammn convert --uai-max-entries N)",
            path=path,
        )
    constant = float(features.weights[features.lengths() == 0].sum())
    tab_ptr = np.concatenate([[0], np.cumsum(factors.sizes)]).astype(np.int64)
    log_tables = _log_tables(
        factors.scope_ptr,
        factors.scope_var,
        factors.fac_ptr,
        factors.fac_feat,
        tab_ptr,
        cards,
        features.weights,
        features.ptr,
        features.var,
        features.val,
        features.eq,
    )
    if max(log_tables.max(initial=-np.inf), constant) > _MAX_LOG:
        raise ModelFormatError(
            "a potential exp(sum of weights) overflows float64: weights "
            "this large cannot be written as potentials",
            path=path,
        )
    return factors, tab_ptr, log_tables, constant


def log_factor_tables(
    schema: Schema,
    features: FeatureSet,
    merge: bool = True,
    max_entries: int = UAI_MAX_ENTRIES,
    path=None,
):
    """The model as factor tables: ``(scopes, sizes, log_tables, constant)``.

    ``scopes[k]`` are the sorted variables of table ``k``, ``sizes[k]`` its number of entries,
    and ``log_tables`` all tables' summed feature weights one after the other (last variable
    of a scope fastest); ``constant`` is the summed weight of the features without conditions.
    Refuses (``ModelFormatError``) more than ``max_entries`` entries in total or potentials
    ``exp(...)`` that overflow float64.
    """
    factors, tab_ptr, log_tables, constant = _checked_log_tables(
        schema, features, merge, max_entries, path, None
    )
    ptr = factors.scope_ptr
    scopes = [factors.scope_var[a:b].tolist() for a, b in zip(ptr[:-1], ptr[1:])]
    return scopes, np.diff(tab_ptr).tolist(), log_tables, constant


def write_uai(
    path: str | os.PathLike,
    schema: Schema,
    features: FeatureSet,
    merge: bool = True,
    max_entries: int = UAI_MAX_ENTRIES,
    factors: UaiFactors | None = None,
) -> None:
    """Write the model as a UAI ``MARKOV`` file.

    ``merge``: one table per distinct scope (default) instead of one per feature.
    ``max_entries``: refuse (``ModelFormatError``) to write more table entries than this in
    total, since a feature over k variables needs a table of the product of their cardinalities.
    ``factors``: these features' :class:`UaiFactors` (with the same ``merge``), when the caller
    already grouped them to check the table size.
    """
    cards = schema.cardinalities.astype(np.int64)
    factors, tab_ptr, log_tables, constant = _checked_log_tables(
        schema, features, merge, max_entries, path, factors
    )
    ptr = factors.scope_ptr
    scopes = [tuple(factors.scope_var[a:b].tolist()) for a, b in zip(ptr[:-1], ptr[1:])]
    tables = np.split(log_tables, tab_ptr[1:-1]) if scopes else []
    scopes, tables = _placed(scopes, tables, cards)
    if not scopes and (features.lengths() == 0).any():  # constants only: a table over X_0
        scopes, tables = [(0,)], [np.zeros(int(cards[0]))]
    if scopes:
        tables[0] = tables[0] + constant
    log_potentials = np.concatenate(tables) if tables else np.zeros(0)
    if log_potentials.max(initial=-np.inf) > _MAX_LOG:
        raise ModelFormatError(
            "a potential exp(sum of weights) overflows float64: weights "
            "this large cannot be written as UAI potentials",
            path=path,
        )
    finite = log_potentials[np.isfinite(log_potentials)]
    if finite.min(initial=0.0) < _MIN_LOG:
        raise ModelFormatError(
            f"a potential exp({finite.min():.6g}) underflows float64 (below "
            f"{np.finfo(np.float64).tiny:.3g}): it would be written as 0, a hard zero, or "
            f"lose its digits; weights this negative cannot be written as UAI potentials "
            f"(-inf is the hard zero)",
            path=path,
        )
    head = ["MARKOV", str(schema.n_vars), " ".join(str(c) for c in cards), str(len(scopes))]
    scope_lines = "".join(f"\n{len(sc)} " + " ".join(map(str, sc)) for sc in scopes)
    table_ptr = np.concatenate([[0], np.cumsum([t.size for t in tables])]).astype(np.int64)
    with open(path, "wb") as f:
        f.write(("\n".join(head) + scope_lines).encode("ascii"))
        f.write(_table_text(np.exp(log_potentials), table_ptr).tobytes())
        f.write(b"\n")


def _table_text(potentials: np.ndarray, tab_ptr: np.ndarray) -> np.ndarray:
    """Every table as ``"\\n<size>\\n p p p..."`` (ASCII bytes), potentials in plain decimals
    (:func:`_decimal`). Most entries of a model's tables are exactly 1 (no feature holds
    there): only the others are formatted, in Python, and a kernel lays out the text."""
    other = potentials[potentials != 1.0]
    numbers = [_decimal(p) for p in other.tolist()]
    number_ptr = np.concatenate([[0], np.cumsum([len(t) for t in numbers])]).astype(np.int64)
    text = np.frombuffer("".join(numbers).encode("ascii"), dtype=np.uint8)
    return _lay_out_tables(tab_ptr, potentials == 1.0, text, number_ptr)


@nb.njit(cache=True)
def _digits(x):
    n = 1
    while x >= 10:
        x //= 10
        n += 1
    return n


@nb.njit(cache=True)
def _put_int(out, at, x):
    """Write the decimal digits of ``x >= 0`` at ``out[at:]``; returns the end."""
    end = at + _digits(x)
    for k in range(end - 1, at - 1, -1):
        out[k] = 48 + x % 10
        x //= 10
    return end


@nb.njit(cache=True)
def _lay_out_tables(tab_ptr, is_one, text, number_ptr):
    n_tables = tab_ptr.shape[0] - 1
    size = 0
    for g in range(n_tables):
        size += 2 + _digits(tab_ptr[g + 1] - tab_ptr[g])
    n_other = number_ptr.shape[0] - 1
    size += 2 * (is_one.shape[0] - n_other) + n_other + number_ptr[n_other]
    out = np.empty(size, dtype=np.uint8)
    at = 0
    k = 0  # next preformatted number
    for g in range(n_tables):
        out[at] = 10  # "\n"
        at = _put_int(out, at + 1, tab_ptr[g + 1] - tab_ptr[g])
        out[at] = 10
        at += 1
        for e in range(tab_ptr[g], tab_ptr[g + 1]):
            out[at] = 32  # " "
            at += 1
            if is_one[e]:
                out[at] = 49  # "1"
                at += 1
            else:
                for c in range(number_ptr[k], number_ptr[k + 1]):
                    out[at] = text[c]
                    at += 1
                k += 1
    return out


def _decimal(p: float) -> str:
    """A potential in plain decimal notation that reads back to the same float."""
    text = "%.17g" % p
    return text if "e" not in text else np.format_float_positional(p, unique=True, trim="-")


def _placed(scopes: list[tuple[int, ...]], tables: list[np.ndarray], cards: np.ndarray):
    """The tables with every variable in some scope of two or more (see the module notes):
    a variable with only one-variable log tables, or none, gets their sum as a table over it and
    a neighbour, constant along the neighbour."""
    n_vars = cards.shape[0]
    if n_vars < 2:
        return scopes, tables
    placed = np.zeros(n_vars, dtype=bool)
    unary = [np.zeros(int(c)) for c in cards]
    keep_scopes, keep_tables = [], []
    for scope, table in zip(scopes, tables):
        if len(scope) == 1:
            unary[scope[0]] = unary[scope[0]] + table
            continue
        placed[list(scope)] = True
        keep_scopes.append(scope)
        keep_tables.append(table)
    for i in range(n_vars):
        if placed[i]:
            continue
        j = i + 1 if i + 1 < n_vars else i - 1
        c_j = int(cards[j])  # last variable of the scope changes fastest
        keep_scopes.append((i, j) if i < j else (j, i))
        keep_tables.append(np.repeat(unary[i], c_j) if i < j else np.tile(unary[i], c_j))
        unary[i] = None
        placed[[i, j]] = True
    for i in range(n_vars):  # placed variables keep their one-variable tables
        if unary[i] is not None and placed[i] and (unary[i] != 0).any():
            keep_scopes.append((i,))
            keep_tables.append(unary[i])
    return keep_scopes, keep_tables


class _Tokens:
    """Whitespace-separated tokens with their line numbers."""

    def __init__(self, path):
        self.path = path
        with open(path, encoding="ascii", errors="replace") as f:
            self._toks = [(n + 1, t) for n, line in enumerate(f) for t in line.split()]
        self._pos = 0

    def take(self, what: str) -> tuple[int, str]:
        if self._pos >= len(self._toks):
            line = self._toks[-1][0] if self._toks else 1
            raise ModelFormatError(
                f"unexpected end of file, expected {what}", path=self.path, line=line
            )
        self._pos += 1
        return self._toks[self._pos - 1]

    def int(self, what: str, lo: int = 0, hi: int | None = None) -> int:
        line, tok = self.take(what)
        if not re.fullmatch(r"[0-9]+", tok) or int(tok) < lo or (hi is not None and int(tok) > hi):
            bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            raise ModelFormatError(
                f"expected {what} (an integer {bound}), got {tok!r}", path=self.path, line=line
            )
        return int(tok)

    def potential(self) -> float:
        line, tok = self.take("a potential")
        try:
            p = float(tok)
        except ValueError:
            p = math.nan
        if not (0.0 <= p < math.inf):
            raise ModelFormatError(
                f"expected a finite non-negative potential, got {tok!r}", path=self.path, line=line
            )
        return p

    def at_end(self) -> bool:
        return self._pos >= len(self._toks)

    def line(self) -> int:
        """Line of the next token (of the last one at the end of the file)."""
        if not self._toks:
            return 1
        return self._toks[min(self._pos, len(self._toks) - 1)][0]


def read_uai(path: str | os.PathLike, schema: Schema | None = None) -> tuple[Schema, FeatureSet]:
    """Read a UAI ``MARKOV`` file as one feature per table entry whose potential is not 1."""
    toks = _Tokens(path)
    line, kind = toks.take("MARKOV")
    if kind.upper() != "MARKOV":
        raise ModelFormatError(f"expected a MARKOV network, got {kind!r}", path=path, line=line)
    n = toks.int("the number of variables", lo=1)
    line = toks.line()
    cards = [toks.int(f"the cardinality of variable {i}") for i in range(n)]
    try:
        file_schema = Schema.from_cardinalities(cards)
    except SchemaError as e:
        raise ModelFormatError(str(e), path=path, line=line) from None
    if schema is not None and list(schema.cardinalities) != cards:
        raise ModelFormatError(
            f"cardinalities {cards[:10]} do not match the given schema", path=path, line=line
        )
    schema = schema if schema is not None else file_schema
    scopes = []
    for k in range(toks.int("the number of factors")):
        size = toks.int(f"the scope size of factor {k}")
        line = toks.line()
        scopes.append([toks.int(f"a variable of factor {k}", hi=n - 1) for _ in range(size)])
        if len(set(scopes[-1])) != size:
            raise ModelFormatError(f"factor {k} lists a variable twice", path=path, line=line)
    feats = []
    for k, scope in enumerate(scopes):
        line = toks.line()
        expected = math.prod(cards[v] for v in scope)
        if toks.int(f"the number of entries of factor {k}") != expected:
            raise ModelFormatError(f"factor {k} needs {expected} entries", path=path, line=line)
        mass = 0.0
        for assignment in np.ndindex(*[cards[v] for v in scope]):
            p = toks.potential()
            mass += p
            if p != 1.0:
                w = math.log(p) if p > 0 else -math.inf
                feats.append((w, [(v, int(a), True) for v, a in zip(scope, assignment)]))
        if mass == 0.0:  # every state would have probability 0: no distribution at all
            raise ModelFormatError(
                f"factor {k}'s table is all zeros, so every state would have probability 0",
                path=path,
                line=line,
            )
    if not toks.at_end():
        line, tok = toks.take("end of file")
        raise ModelFormatError(f"unexpected {tok!r} after the last table", path=path, line=line)
    return schema, FeatureSet.from_features(schema, feats)
