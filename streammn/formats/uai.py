"""The UAI ``MARKOV`` format: factor tables of non-negative potentials.

Specification: ``formats/uai.md`` in the project's shared docs. Writing turns each feature with
weight ``w`` over scope ``S`` (its distinct variables, in increasing order) into a table over
``S`` holding ``exp(w)`` where the feature's conditions hold and ``1`` elsewhere; with
``merge=True`` (the default) the features sharing a scope become one table, the product of their
potentials. Entries are listed with the last variable of the scope changing fastest. A weight of
``-inf`` (hard zero) gives the potential 0. Features without conditions (constants) only scale
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
from streammn.schema import Schema, SchemaError

DEFAULT_MAX_ENTRIES = 1 << 24
_MAX_LOG = math.log(np.finfo(np.float64).max)


@nb.njit(cache=True)
def _log_tables(scope_ptr, scope_var, fac_ptr, fac_feat, tab_ptr, cards,
                weights, ptr, var, val, eq):
    """Summed weights of each factor's features at every joint assignment of its scope."""
    out = np.zeros(tab_ptr[-1])
    position = np.full(cards.shape[0], -1, dtype=np.int64)
    assign = np.empty(cards.shape[0], dtype=np.int64)
    for g in range(scope_ptr.shape[0] - 1):
        s0, s1 = scope_ptr[g], scope_ptr[g + 1]
        for j in range(s0, s1):
            position[scope_var[j]] = j - s0
        for e in range(tab_ptr[g + 1] - tab_ptr[g]):
            rem = e
            for j in range(s1 - 1, s0 - 1, -1):  # last variable changes fastest
                c = cards[scope_var[j]]
                assign[j - s0] = rem % c
                rem //= c
            total = 0.0
            for t in range(fac_ptr[g], fac_ptr[g + 1]):
                f = fac_feat[t]
                ok = True
                for c in range(ptr[f], ptr[f + 1]):
                    if (assign[position[var[c]]] == val[c]) != eq[c]:
                        ok = False
                        break
                if ok:
                    total += weights[f]
            out[tab_ptr[g] + e] = total
        for j in range(s0, s1):
            position[scope_var[j]] = -1
    return out


def _factors(features: FeatureSet, merge: bool) -> tuple[list[tuple[int, ...]], list[list[int]]]:
    """Scopes and the features of each factor, in order of first appearance."""
    n_vars = features.schema.n_vars
    f_of_cond = np.repeat(np.arange(features.n_features, dtype=np.int64), features.lengths())
    keys = distinct_sorted(f_of_cond * n_vars + features.var)  # each feature's sorted scope
    scope_vars = (keys % n_vars).tolist()
    bounds = np.searchsorted(keys // n_vars, np.arange(features.n_features + 1)).tolist()
    scopes: list[tuple[int, ...]] = []
    members: list[list[int]] = []
    index: dict[tuple[int, ...], int] = {}
    for f in range(features.n_features):
        if bounds[f] == bounds[f + 1]:
            continue
        scope = tuple(scope_vars[bounds[f]:bounds[f + 1]])
        g = index.get(scope) if merge else None
        if g is None:
            g = len(scopes)
            scopes.append(scope)
            members.append([])
            if merge:
                index[scope] = g
        members[g].append(f)
    return scopes, members


def uai_table_entries(schema: Schema, features: FeatureSet, merge: bool = True) -> int:
    """How many potentials the UAI tables of these features hold (before writing them)."""
    cards = schema.cardinalities.astype(np.int64)
    scopes, _ = _factors(features, merge)
    return sum(math.prod(int(cards[v]) for v in s) for s in scopes)


def write_uai(path: str | os.PathLike, schema: Schema, features: FeatureSet, merge: bool = True,
              max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
    """Write the model as a UAI ``MARKOV`` file.

    ``merge``: one table per distinct scope (default) instead of one per feature.
    ``max_entries``: refuse (``ModelFormatError``) to write more table entries than this in
    total, since a feature over k variables needs a table of the product of their cardinalities.
    """
    check_weights(features.weights, path=path)
    cards = schema.cardinalities.astype(np.int64)
    scopes, members = _factors(features, merge)
    sizes = [math.prod(int(cards[v]) for v in s) for s in scopes]
    if sum(sizes) > max_entries:
        raise ModelFormatError(f"the UAI tables would hold {sum(sizes)} entries "
                               f"(max_entries={max_entries}); the largest scope has "
                               f"{max(len(s) for s in scopes)} variables", path=path)
    constant = float(features.weights[features.lengths() == 0].sum())
    log_tables = _log_tables(
        np.cumsum([0] + [len(s) for s in scopes]).astype(np.int64),
        np.array([v for s in scopes for v in s], dtype=np.int64),
        np.cumsum([0] + [len(m) for m in members]).astype(np.int64),
        np.array([f for m in members for f in m], dtype=np.int64),
        np.cumsum([0] + sizes).astype(np.int64), cards,
        features.weights, features.ptr, features.var, features.val, features.eq)
    bounds = np.cumsum([0] + sizes)
    tables = [log_tables[bounds[g]:bounds[g + 1]] for g in range(len(scopes))]
    scopes, tables = _placed(scopes, tables, cards)
    if not scopes and (features.lengths() == 0).any():  # constants only: a table over X_0
        scopes, tables = [(0,)], [np.zeros(int(cards[0]))]
    if scopes:
        tables[0] = tables[0] + constant
    if max([t.max(initial=-np.inf) for t in tables] + [constant]) > _MAX_LOG:
        raise ModelFormatError("a potential exp(sum of weights) overflows float64: weights "
                               "this large cannot be written as UAI potentials", path=path)
    out = ["MARKOV", str(schema.n_vars), " ".join(str(c) for c in cards), str(len(scopes))]
    out += [f"{len(s)} " + " ".join(map(str, s)) for s in scopes]
    for table in tables:
        out += [str(table.size), " " + " ".join(map(_decimal, np.exp(table).tolist()))]
    with open(path, "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(out) + "\n")


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
            raise ModelFormatError(f"unexpected end of file, expected {what}", path=self.path,
                                   line=line)
        self._pos += 1
        return self._toks[self._pos - 1]

    def int(self, what: str, lo: int = 0, hi: int | None = None) -> int:
        line, tok = self.take(what)
        if not re.fullmatch(r"[0-9]+", tok) or int(tok) < lo or (hi is not None and int(tok) > hi):
            bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            raise ModelFormatError(f"expected {what} (an integer {bound}), got {tok!r}",
                                   path=self.path, line=line)
        return int(tok)

    def potential(self) -> float:
        line, tok = self.take("a potential")
        try:
            p = float(tok)
        except ValueError:
            p = math.nan
        if not (0.0 <= p < math.inf):
            raise ModelFormatError(f"expected a finite non-negative potential, got {tok!r}",
                                   path=self.path, line=line)
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
        raise ModelFormatError(f"cardinalities {cards[:10]} do not match the given schema",
                               path=path, line=line)
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
        for assignment in np.ndindex(*[cards[v] for v in scope]):
            p = toks.potential()
            if p != 1.0:
                w = math.log(p) if p > 0 else -math.inf
                feats.append((w, [(v, int(a), True) for v, a in zip(scope, assignment)]))
    if not toks.at_end():
        line, tok = toks.take("end of file")
        raise ModelFormatError(f"unexpected {tok!r} after the last table", path=path, line=line)
    return schema, FeatureSet.from_features(schema, feats)
