"""The UAI ``MARKOV`` format: factor tables of non-negative potentials.

Specification: ``formats/uai.md`` in the project's shared docs. Writing turns each feature with
weight ``w`` over scope ``S`` (its distinct variables, in increasing order) into potentials
``exp(w)`` where the feature's conditions hold and ``1`` elsewhere, in a table whose scope holds
``S``. With ``merge=True`` (the default) the tables' scopes are covering scopes: every feature
is folded into the table of a maximal scope that holds its own (a feature over ``{0, 1}`` into
the table over ``{0, 1, 2}``), the product of the potentials of all features folded there; and
where the maximal scopes of a connected set of variables would hold at least as many entries
as one table over all of them, that one table is written instead. So no table is larger than
the joint table of its variables, and a model over 16 binary variables needs at most 2**16
entries, however many scopes its features have (Libra's nltcs model, 38,076 features: 437,848
entries in one table per distinct scope, 44,032 in covering tables). With ``merge=False``
each feature gets its own table over its scope. Entries are listed with the last variable of
the scope changing fastest. A weight of
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

import builtins
import math
import os
import re

import numba as nb
import numpy as np

from streammn.features import FeatureSet, distinct_sorted
from streammn.formats.errors import ModelFormatError, check_weights
from streammn.features.grouping import group_keys
from streammn.kernel_sorts import largest_first
from streammn.schema import Schema, SchemaError

# The one limit on the entries of a UAI file's tables, for snapshots and ``convert`` alike: 4M
# entries are about 32 MB of text. A conjunction over k variables needs a table over all of
# them, so a model of long features over many variables (plants' snapshot, 69 variables: 69M
# entries in covering tables, 590M in one table per scope) is refused, and .mn / .json hold it.
UAI_MAX_ENTRIES = 1 << 22
_MAX_LOG = math.log(np.finfo(np.float64).max)
_MIN_LOG = math.log(np.finfo(np.float64).tiny)  # below: a subnormal potential, or 0


@nb.njit(cache=True)
def _tests(f, v, ptr, var):
    """Whether feature ``f`` has a condition on variable ``v``."""
    for c in range(ptr[f], ptr[f + 1]):
        if var[c] == v:
            return True
    return False


@nb.njit(cache=True)
def _allows(f, v, a, ptr, var, val, eq):
    """Whether ``X_v = a`` meets every condition of feature ``f`` on ``v``."""
    for c in range(ptr[f], ptr[f + 1]):
        if var[c] == v and (val[c] == a) != eq[c]:
            return False
    return True


@nb.njit(cache=True)
def _add_weights(out, base, feats, scope, cards, sizes, scratch, at, weights, ptr, var, val, eq):
    """Add to ``out[base:base + sizes[0]]``, the table over ``scope`` (last variable fastest),
    the summed weights of the features ``feats`` wherever their conditions hold.

    A depth-first walk over the scope's variables (an explicit stack: numba cannot cache a
    recursive function). At depth ``d`` the features that test ``scope[d]`` go down the branch
    of each value they allow, into that value's block of the table; the others do not depend
    on ``scope[d]``, so their table over the remaining variables is summed once, in
    ``scratch[at[d]:]``, and added under every value. A feature over few of a large table's
    variables so costs the tables over the variables it does not test, never an enumeration of
    the entries it holds on: Libra's accidents model, 104,400 features folded into tables of
    up to 2**18 entries, 0.1 s instead of 20 s. ``sizes[d]`` is the table size over
    ``scope[d:]``; the features of a node lie in ``pool[start[d]:end[d]]``, those that test
    its variable first."""
    k = scope.shape[0]
    pool = np.empty(max(16, 2 * feats.shape[0]), dtype=np.int64)
    pool[: feats.shape[0]] = feats
    top = feats.shape[0]
    start = np.zeros(k + 1, dtype=np.int64)
    end = np.zeros(k + 1, dtype=np.int64)
    n_tests = np.zeros(k + 1, dtype=np.int64)
    stage = np.zeros(k + 1, dtype=np.int64)  # 0 new, 1 + a: branch a next, then free, then add
    copied = np.zeros(k + 1, dtype=np.int64)  # pool entries the current branch's copy holds
    in_scratch = np.zeros(k + 1, dtype=np.bool_)  # the node's block is in scratch, not out
    off = np.zeros(k + 1, dtype=np.int64)
    end[0], off[0] = top, base
    d = 0
    while d >= 0:
        s, e = start[d], end[d]
        if stage[d] == 0:
            if s == e:
                d -= 1
                continue
            if d == k:  # every condition met: one entry
                total = 0.0
                for t in range(s, e):
                    total += weights[pool[t]]
                if in_scratch[d]:
                    scratch[off[d]] += total
                else:
                    out[off[d]] += total
                d -= 1
                continue
            i = s
            for t in range(s, e):  # those that test scope[d] first
                f = pool[t]
                if _tests(f, scope[d], ptr, var):
                    pool[t] = pool[i]
                    pool[i] = f
                    i += 1
            n_tests[d] = i - s
            stage[d] = 1 if i > s else cards[scope[d]] + 1
            copied[d] = 0
            continue
        v, step = scope[d], sizes[d + 1]
        top -= copied[d]  # the last branch is done
        copied[d] = 0
        if stage[d] <= cards[v]:  # branch a: a copy of the features that allow X_v = a
            a = stage[d] - 1
            stage[d] += 1
            if top + n_tests[d] > pool.shape[0]:
                grown = np.empty(2 * (top + n_tests[d]), dtype=np.int64)
                grown[:top] = pool[:top]
                pool = grown
            m = 0
            for t in range(s, s + n_tests[d]):
                if _allows(pool[t], v, a, ptr, var, val, eq):
                    pool[top + m] = pool[t]
                    m += 1
            copied[d] = m
            start[d + 1], end[d + 1] = top, top + m
            top += m
            in_scratch[d + 1], off[d + 1] = in_scratch[d], off[d] + a * step
        elif stage[d] == cards[v] + 1:  # the features free of X_v, summed once in scratch
            stage[d] += 1
            if s + n_tests[d] == e:
                d -= 1
                continue
            scratch[at[d] : at[d] + step] = 0.0
            start[d + 1], end[d + 1] = s + n_tests[d], e
            in_scratch[d + 1], off[d + 1] = True, at[d]
        else:  # ... and added under every value of X_v
            for a in range(cards[v]):
                o = off[d] + a * step
                if in_scratch[d]:
                    scratch[o : o + step] += scratch[at[d] : at[d] + step]
                else:
                    out[o : o + step] += scratch[at[d] : at[d] + step]
            d -= 1
            continue
        d += 1
        stage[d] = 0


@nb.njit(cache=True)
def _log_tables(
    scope_ptr, scope_var, fac_ptr, fac_feat, tab_ptr, cards, weights, ptr, var, val, eq
):
    """Summed weights of each factor's features at every joint assignment of its scope (last
    variable fastest), by :func:`_add_weights`."""
    out = np.zeros(tab_ptr[-1])
    n_factors = scope_ptr.shape[0] - 1
    scratch = np.zeros(0)
    for g in range(n_factors):
        scope = scope_var[scope_ptr[g] : scope_ptr[g + 1]]
        k = scope.shape[0]
        sizes = np.ones(k + 1, dtype=np.int64)  # table size over scope[d:]
        for d in range(k - 1, -1, -1):
            sizes[d] = sizes[d + 1] * cards[scope[d]]
        at = np.zeros(k + 1, dtype=np.int64)  # depth d's scratch: sizes[d + 1] entries
        for d in range(1, k + 1):
            at[d] = at[d - 1] + sizes[d]
        if at[k] > scratch.shape[0]:
            scratch = np.zeros(at[k])
        feats = fac_feat[fac_ptr[g] : fac_ptr[g + 1]]
        _add_weights(
            out, tab_ptr[g], feats, scope, cards, sizes, scratch, at, weights, ptr, var, val, eq
        )
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


@nb.njit(cache=True)
def _maximal_scopes(ptr, var, n_vars, max_bit_words=1 << 23):
    """For the distinct scopes ``var[ptr[g]:ptr[g + 1]]``, a maximal scope holding each:
    ``cover[g] = h`` with scope ``g`` a subset of scope ``h`` and ``h`` a subset of no other
    (``cover[h] = h``).

    Scopes are taken longest first (ties in their order), so every superset of a scope is
    placed before it; a scope that no maximal scope placed so far holds is maximal. The
    candidates are the longer maximal scopes holding the scope's rarest variable among them (a
    list per variable, largest first: the likeliest to hold it), each tested on the words of a
    bitset of its variables that the scope's variables fall in (or, where the bitsets of every
    scope would take more than ``max_bit_words``, 64 MB, by counting its variables that the
    scope marks)."""
    n = ptr.shape[0] - 1
    order = largest_first(np.arange(n), ptr[1:] - ptr[:-1])
    cover = np.empty(n, dtype=np.int64)
    head = np.full(n_vars, -1, dtype=np.int64)  # per variable, a list of maximal scopes
    tail = np.full(n_vars, -1, dtype=np.int64)
    count = np.zeros(n_vars, dtype=np.int64)
    owner = np.empty(ptr[-1], dtype=np.int64)
    after = np.empty(ptr[-1], dtype=np.int64)
    n_words = (n_vars + 63) // 64
    use_bits = n * n_words <= max_bit_words
    bits = np.zeros((n if use_bits else 0, n_words), dtype=np.uint64)
    scope_bits = np.zeros(n_words, dtype=np.uint64)
    mark = np.full(0 if use_bits else n_vars, -1, dtype=np.int64)
    one = np.uint64(1)
    n_entries = 0
    for g in order:
        s0, s1 = ptr[g], ptr[g + 1]
        rarest = var[s0]
        lo, hi = n_words, 0
        for j in range(s0, s1):
            v = var[j]
            if use_bits:
                scope_bits[v >> 6] |= one << np.uint64(v & 63)
                lo, hi = min(lo, v >> 6), max(hi, v >> 6)
            else:
                mark[v] = g
            if count[v] < count[rarest]:
                rarest = v
        found = -1
        e = head[rarest]
        while e >= 0 and found < 0:
            h = owner[e]
            e = after[e]
            if ptr[h + 1] - ptr[h] <= s1 - s0:  # no longer: not a superset
                continue
            if use_bits:
                held = True
                for w in range(lo, hi + 1):
                    if scope_bits[w] & ~bits[h, w]:
                        held = False
                        break
            else:
                n_held = 0
                for j in range(ptr[h], ptr[h + 1]):
                    if mark[var[j]] == g:
                        n_held += 1
                held = n_held == s1 - s0
            if held:
                found = h
        if use_bits:
            if found < 0:
                bits[g, lo : hi + 1] = scope_bits[lo : hi + 1]
            scope_bits[lo : hi + 1] = 0
        if found >= 0:
            cover[g] = found
            continue
        cover[g] = g
        for j in range(s0, s1):
            v = var[j]
            owner[n_entries] = g
            after[n_entries] = -1
            if tail[v] >= 0:
                after[tail[v]] = n_entries
            else:
                head[v] = n_entries
            tail[v] = n_entries
            count[v] += 1
            n_entries += 1
    return cover


@nb.njit(cache=True)
def _components(ptr, var, maximal, n_vars):
    """Component (a root variable) of every variable, joining the variables of each maximal
    scope (union-find with path halving); variables in no scope are their own."""
    parent = np.arange(n_vars)
    for g in maximal:
        a = var[ptr[g]]
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        for j in range(ptr[g] + 1, ptr[g + 1]):
            b = var[j]
            while parent[b] != b:
                parent[b] = parent[parent[b]]
                b = parent[b]
            if a != b:
                parent[b] = a
    for v in range(n_vars):
        r = v
        while parent[r] != r:
            r = parent[r]
        parent[v] = r
    return parent


def _covering_scopes(ptr, var, cards):
    """Fold the distinct scopes ``var[ptr[g]:ptr[g + 1]]`` (never empty) into covering ones:
    ``(factor of each scope, factors' scope ptr, factors' scope variables)``, factors numbered
    in order of their first scope.

    Every scope goes into a maximal scope that holds it (:func:`_maximal_scopes`): its features
    test only variables of the larger table, so they add their weights there and need no table
    of their own. Then, per connected component of the maximal scopes, when their tables hold
    at least as many entries as one table over all the component's variables, that one table
    replaces them: a model over 16 binary variables never needs more than 2**16 entries."""
    n_vars, n_scopes = cards.shape[0], ptr.shape[0] - 1
    cover = _maximal_scopes(ptr, var, n_vars)
    maximal = np.flatnonzero(cover == np.arange(n_scopes))
    root = _components(ptr, var, maximal, n_vars)
    c = cards.astype(np.float64)
    in_scope = np.zeros(n_vars, dtype=bool)
    in_scope[var] = True
    size = np.multiply.reduceat(c[var], ptr[:-1])
    tables = np.bincount(root[var[ptr[maximal]]], weights=size[maximal], minlength=n_vars)
    whole = np.ones(n_vars)
    with np.errstate(over="ignore"):  # past float64: inf, never one table
        np.multiply.at(whole, root[in_scope], c[in_scope])
    one_table = tables >= whole
    # each scope's table: its maximal scope g < n_scopes, or its component n_scopes + root
    comp = root[var[ptr[:-1]]]
    table = np.where(one_table[comp], n_scopes + comp, cover)
    used, factor = np.unique(table, return_inverse=True)
    first = np.full(used.shape[0], n_scopes, dtype=np.int64)
    np.minimum.at(first, factor, np.arange(n_scopes))
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    used = used[order]
    # the factors' scopes, gathered from the scopes' variables and, for a component, from the
    # variables grouped by component (increasing within one)
    by_comp = np.flatnonzero(in_scope)
    by_comp = by_comp[np.argsort(root[by_comp], kind="stable")]
    comp_n = np.bincount(root[by_comp], minlength=n_vars)
    comp_start = np.concatenate([[0], np.cumsum(comp_n)[:-1]])
    is_comp = used >= n_scopes
    r = np.where(is_comp, used - n_scopes, 0)
    g = np.where(is_comp, 0, used)
    lengths = np.where(is_comp, comp_n[r], ptr[g + 1] - ptr[g])
    start = np.where(is_comp, var.shape[0] + comp_start[r], ptr[g])
    out_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    take = np.repeat(start - out_ptr[:-1], lengths) + np.arange(out_ptr[-1])
    out_var = np.concatenate([var, by_comp])[take].astype(np.int64)
    return rank[factor].astype(np.int64), out_ptr, out_var


class UaiFactors:
    """The factor tables of a feature set, as flat arrays: each factor's scope (variables,
    increasing) in ``scope_ptr``/``scope_var``, its features in ``fac_ptr``/``fac_feat`` (in
    feature order), and its table size (entries) in ``sizes``.

    With ``merge`` the scopes cover the features' (:func:`_covering_scopes`): every feature
    is folded into a table whose scope holds its own; without, one table per feature over its
    scope."""

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
        if merge and n_groups:
            factor, self.scope_ptr, self.scope_var = _covering_scopes(
                self.scope_ptr, self.scope_var, schema.cardinalities.astype(np.int64)
            )
            n_groups = self.scope_ptr.size - 1
            group = np.where(group >= 0, factor[np.maximum(group, 0)], -1)
            members = np.argsort(group, kind="stable")[int((group < 0).sum()) :]
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
    if factors.sizes is None:  # a limit raised past 2**62 entries: no file holds them
        raise ModelFormatError(
            f"the UAI tables would hold {factors.total:.3g} entries, more than 2**62: no "
            f"file can hold them. The .mn (Libra) and .json formats hold the features "
            f"without tables",
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

    ``merge``: covering tables (default; see the module notes) instead of one per feature.
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
        unary[i] = None  # type: ignore[call-overload]  # its table is placed: dropped
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

    def line(self) -> builtins.int:  # (int here is the method above)
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
