"""Numba kernels that evaluate weighted conjunctive features on whole batches of rows.

These are the hot loops shared by dependency networks (one feature set per variable) and Markov
networks (one feature set for the model): the unnormalised log score of each row, and for a
variable ``i`` the logits of ``P(X_i = a | x_-i)`` for every value ``a``: the summed weights of
the features that mention ``X_i``, evaluated with ``x_i`` replaced by ``a``. Normalising those
logits gives the conditional distribution used by pseudo-likelihood, Gibbs sampling and DN
scoring.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba.core import cgutils, types
from numba.extending import intrinsic

from streammn.features import FeatureSet


@nb.njit(cache=True, parallel=True)
def _log_scores(rows, weights, ptr, var, val, eq):
    n = rows.shape[0]
    out = np.zeros(n)
    for r in nb.prange(n):
        total = 0.0
        for f in range(weights.shape[0]):
            ok = True
            for c in range(ptr[f], ptr[f + 1]):
                if (rows[r, var[c]] == val[c]) != eq[c]:
                    ok = False
                    break
            if ok:
                total += weights[f]
        out[r] = total
    return out


@nb.njit(cache=True)
def _add_feature_logits(row, i, card, f, weights, ptr, var, val, eq, logits, allowed):
    """Add feature f's weight to logits[a] for every value a of X_i at which f holds on row."""
    for a in range(card):
        allowed[a] = True
    for c in range(ptr[f], ptr[f + 1]):
        v = var[c]
        if v == i:
            if eq[c]:
                for a in range(card):
                    if a != val[c]:
                        allowed[a] = False
            else:
                allowed[val[c]] = False
        elif (row[v] == val[c]) != eq[c]:
            return
    w = weights[f]
    for a in range(card):
        if allowed[a]:
            logits[a] += w


@nb.njit(cache=True, parallel=True)
def _conditional_logits(rows, i, card, feats, weights, ptr, var, val, eq):
    n = rows.shape[0]
    out = np.zeros((n, card))
    for r in nb.prange(n):
        allowed = np.empty(card, dtype=np.bool_)
        for k in range(feats.shape[0]):
            _add_feature_logits(rows[r], i, card, feats[k], weights, ptr, var, val, eq,
                                out[r], allowed)
    return out


@nb.njit(cache=True, parallel=True)
def _pll_terms(rows, cards, var_ptr, var_feats, weights, ptr, var, val, eq):
    """log P(x_i | x_-i) for every row and variable: shape (n_rows, n_vars)."""
    n, n_vars = rows.shape
    max_card = 0
    for i in range(n_vars):
        max_card = max(max_card, cards[i])
    out = np.empty((n, n_vars))
    for r in nb.prange(n):
        logits = np.empty(max_card)
        allowed = np.empty(max_card, dtype=np.bool_)
        for i in range(n_vars):
            card = cards[i]
            for a in range(card):
                logits[a] = 0.0
            for k in range(var_ptr[i], var_ptr[i + 1]):
                _add_feature_logits(rows[r], i, card, var_feats[k], weights, ptr, var, val, eq,
                                    logits, allowed)
            m = logits[0]
            for a in range(1, card):
                m = max(m, logits[a])
            s = 0.0
            for a in range(card):
                s += np.exp(logits[a] - m)
            out[r, i] = logits[rows[r, i]] - m - np.log(s)
    return out


def _rows(rows: np.ndarray, fs: FeatureSet) -> np.ndarray:
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    if rows.ndim != 2 or rows.shape[1] != fs.schema.n_vars:
        raise ValueError(f"expected rows of shape (n, {fs.schema.n_vars}), got {rows.shape}")
    return rows


def log_scores(fs: FeatureSet, rows: np.ndarray) -> np.ndarray:
    """Sum of the weights of the features each row satisfies (unnormalised log probability)."""
    rows = _rows(rows, fs)
    return _log_scores(rows, fs.weights, fs.ptr, fs.var, fs.val, fs.eq)


def conditional_logits(fs: FeatureSet, rows: np.ndarray, i: int,
                       features: np.ndarray | None = None) -> np.ndarray:
    """Unnormalised ``log P(X_i = a | x_-i)`` for each row and value ``a``: shape (n, card_i).

    ``features`` restricts the sum to the given feature indices (default: every feature that
    mentions ``X_i``, which gives the same conditional as the whole model).
    """
    rows = _rows(rows, fs)
    if features is None:
        var_ptr, var_feats = fs.features_by_variable()
        features = var_feats[var_ptr[i]:var_ptr[i + 1]]
    card = int(fs.schema.cardinalities[i])
    return _conditional_logits(rows, int(i), card, np.ascontiguousarray(features, dtype=np.int64),
                               fs.weights, fs.ptr, fs.var, fs.val, fs.eq)


def log_conditional(fs: FeatureSet, rows: np.ndarray, i: int) -> np.ndarray:
    """Normalised ``log P(X_i = a | x_-i)``: shape (n, card_i)."""
    logits = conditional_logits(fs, rows, i)
    m = logits.max(axis=1, keepdims=True)
    return logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))


def pll_terms(fs: FeatureSet, rows: np.ndarray, index=None) -> np.ndarray:
    """``log P(x_i | x_-i)`` for every row and variable, shape (n_rows, n_vars).

    ``index`` is a precomputed :meth:`FeatureSet.features_by_variable` result (pass it when
    scoring many batches with one model).
    """
    rows = _rows(rows, fs)
    var_ptr, var_feats = index if index is not None else fs.features_by_variable()
    return _pll_terms(rows, fs.schema.cardinalities, var_ptr, var_feats, fs.weights, fs.ptr,
                      fs.var, fs.val, fs.eq)


def pll(fs: FeatureSet, rows: np.ndarray) -> float:
    """Pseudo-log-likelihood per example: mean over rows of ``sum_i log P(x_i | x_-i)``."""
    terms = pll_terms(fs, rows)
    return float(terms.sum(axis=1).mean()) if terms.shape[0] else float("nan")


# ---------------------------------------------------------------------------------------------
# Row-bitset kernels: all conditionals of all variables at once (PLL, its gradient).
#
# Scanning every feature for every row costs O(rows x conditions). Instead, a block of 64 rows
# becomes one bit per row: lits[(j, a)] is the set of rows with x_j = a (and its complement). A
# feature's conditions on variable j hold on the row set H_j (one AND per condition and word),
# and the feature reaches P(X_j | x_-j) exactly on the rows where every *other* variable's
# conditions hold: rows where it holds outright, plus rows where j's group is the only one that
# fails (tracked with "fails at least once / twice" words, which also end the scan of a word as
# soon as every row has failed twice). The cost is O(conditions x words), 64 times less than row
# by row; the only per-row work left is adding weights where a feature nearly holds, which is
# what the conditionals need anyway.
# ---------------------------------------------------------------------------------------------

CHUNK_WORDS = 4  # rows are processed in chunks of 64 * CHUNK_WORDS


@intrinsic
def _cttz(typingctx, x):
    """LLVM count-trailing-zeros of a uint64 (one instruction on x86-64)."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], cgutils.true_bit)

    return sig, codegen


@intrinsic
def _ctpop(typingctx, x):
    """LLVM population count of a uint64."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return sig, codegen


@nb.njit(cache=True)
def _lowest_bit(x):
    """Index of the lowest set bit of a non-zero uint64."""
    return np.int64(_cttz(x))


@nb.njit(cache=True)
def _popcount(x):
    """Number of set bits of a uint64."""
    return np.int64(_ctpop(x))


@nb.njit(cache=True)
def _chunk_literals(rows, start, n_words, offs, n_slots):
    """Row bitsets of every literal for one chunk of ``64 * n_words`` rows.

    ``lits[2 * (offs[j] + a), w]``: rows with ``x_j = a``; ``lits[2 * (offs[j] + a) + 1, w]``: rows
    with ``x_j != a``; ``valid[w]``: rows that exist (the last chunk may be partial).
    """
    lits = np.zeros((2 * n_slots, n_words), dtype=np.uint64)
    valid = np.zeros(n_words, dtype=np.uint64)
    n, n_vars = rows.shape
    for w in range(n_words):
        for b in range(64):
            r = start + 64 * w + b
            if r >= n:
                break
            m = np.uint64(1) << np.uint64(b)
            valid[w] |= m
            for j in range(n_vars):
                lits[2 * (offs[j] + rows[r, j]), w] |= m
    for s in range(n_slots):
        for w in range(n_words):
            lits[2 * s + 1, w] = valid[w] & ~lits[2 * s, w]
    return lits, valid


@nb.njit(cache=True)
def _word_status(lits, w, vw, g0, ng, g_start, g_end, code, H):
    """AND a feature's groups ``g0 .. g0 + ng`` over word ``w`` of rows.

    Fills ``H[k]`` with the rows where group k holds and returns ``(one, two)``: the rows where
    at least one / at least two groups fail. Stops early (``two == vw``) once every row of the
    word has failed twice: the feature then reaches no conditional there.
    """
    one = np.uint64(0)
    two = np.uint64(0)
    for k in range(ng):
        g = g0 + k
        h = lits[code[g_start[g]], w]
        for c in range(g_start[g] + 1, g_end[g]):
            h &= lits[code[c], w]
        H[k] = h
        fail = vw & ~h
        two |= one & fail
        one |= fail
        if two == vw:
            break
    return one, two


@nb.njit(cache=True)
def _chunk_pass(rows, start, n_words, offs, cards, weights, gptr, g_start, g_end, g_var, g_mask,
                g_slot, code, mode, logits, probs, grad):
    """One chunk of ``64 * n_words`` rows against every feature.

    Feature f's conditions come grouped by variable (see :func:`_group_structure`). For each
    word of 64 rows the groups are ANDed in order while tracking the rows where at least one /
    at least two groups fail; a word where every row fails twice is abandoned at once. The
    feature then reaches variable j's conditional on the rows where it holds outright and on
    the rows where j's group is the only one failing.

    mode 0: add the weight to ``logits[start + r, offs[j] + a]`` for every allowed value a.
    mode 1: add to ``grad[f]`` the PLL gradient ``[x_j allowed] - P(allowed | x_-j)`` summed over
    those rows, ``probs`` holding the conditionals. Work happens in a chunk-local slot-major
    table (adjacent rows adjacent).
    """
    n_slots = offs[-1]
    width = 64 * n_words
    n_rows = rows.shape[0]
    lits, valid = _chunk_literals(rows, start, n_words, offs, n_slots)
    local = np.zeros((n_slots, width))
    if mode == 1:
        for r in range(min(width, n_rows - start)):
            for s in range(n_slots):
                local[s, r] = probs[start + r, s]
    max_groups = 0
    for f in range(weights.shape[0]):
        max_groups = max(max_groups, gptr[f + 1] - gptr[f])
    H = np.empty(max_groups, dtype=np.uint64)
    for f in range(weights.shape[0]):
        g0 = gptr[f]
        ng = gptr[f + 1] - g0
        wt = weights[f]
        for w in range(n_words):
            vw = valid[w]
            one, two = _word_status(lits, w, vw, g0, ng, g_start, g_end, code, H)
            if two == vw:
                continue
            holds = vw & ~one
            for k in range(ng):
                g = g0 + k
                sg = g_slot[g]
                if sg == -2:
                    continue  # a dependency-network feature counts only for its own variable
                j = g_var[g]
                single = vw & ~H[k] & ~two  # rows where only this group fails
                if mode == 0:
                    if sg >= 0:
                        # one allowed value: rows where the feature holds or only j fails
                        target = local[sg]
                        x = holds | single
                        while x != 0:
                            target[64 * w + _lowest_bit(x)] += wt
                            x &= x - np.uint64(1)
                        continue
                    o = offs[j]
                    mask = g_mask[g]
                    for a in range(cards[j]):
                        if (mask >> np.uint64(a)) & np.uint64(1):
                            target = local[o + a]
                            x = holds | single
                            while x != 0:
                                target[64 * w + _lowest_bit(x)] += wt
                                x &= x - np.uint64(1)
                else:
                    # x_j is allowed exactly on `holds`
                    gsum = float(_popcount(holds))
                    o = offs[j]
                    mask = g_mask[g]
                    rest = holds | single
                    for a in range(cards[j]):
                        if (mask >> np.uint64(a)) & np.uint64(1):
                            pa = local[o + a]
                            x = rest
                            while x != 0:
                                gsum -= pa[64 * w + _lowest_bit(x)]
                                x &= x - np.uint64(1)
                    grad[f] += gsum
    if mode == 0:
        for r in range(min(width, n_rows - start)):
            for s in range(n_slots):
                logits[start + r, s] += local[s, r]


@nb.njit(cache=True)
def _literal_codes(var, val, eq, cards):
    """``(offs, code)``: value offsets of the variables, and for every condition its literal
    index ``2 * (offs[var] + val) + (0 for '=' | 1 for '!=')``."""
    offs = np.zeros(cards.shape[0] + 1, dtype=np.int64)
    for j in range(cards.shape[0]):
        offs[j + 1] = offs[j] + cards[j]
    code = np.empty(var.shape[0], dtype=np.int64)
    for c in range(var.shape[0]):
        code[c] = 2 * (offs[var[c]] + val[c]) + (0 if eq[c] else 1)
    return offs, code


@nb.njit(cache=True)
def _group_mask(c, end, var, val, eq, cards):
    """The conditions from ``c`` on that test ``var[c]`` (a feature's conditions are sorted by
    variable): returns ``(first condition after them, bit mask of the values satisfying all)``."""
    j = var[c]
    m = np.uint64(0)
    for a in range(cards[j]):
        m |= np.uint64(1) << np.uint64(a)
    while c < end and var[c] == j:
        if eq[c]:
            m &= np.uint64(1) << np.uint64(val[c])
        else:
            m &= ~(np.uint64(1) << np.uint64(val[c]))
        c += 1
    return c, m


@nb.njit(cache=True)
def _group_structure(ptr, var, val, eq, cards, owner):
    """Per-variable condition groups of every feature, computed once per call.

    Returns ``(gptr, g_start, g_end, g_var, g_mask, g_slot, code)``: feature f's groups are
    ``gptr[f]:gptr[f+1]``; group g covers conditions ``g_start[g]:g_end[g]`` on variable
    ``g_var[g]``; ``g_mask[g]`` has bit a set when value a satisfies them; ``g_slot[g]`` is the
    column ``offs[j] + a`` when exactly one value does, -1 when several do, -2 when the group
    does not count (``owner[f]`` is another variable); ``code[c]`` is condition c's literal row.
    """
    F = ptr.shape[0] - 1
    offs, code = _literal_codes(var, val, eq, cards)
    n_groups = 0
    for f in range(F):
        for c in range(ptr[f], ptr[f + 1]):
            if c == ptr[f] or var[c] != var[c - 1]:
                n_groups += 1
    gptr = np.zeros(F + 1, dtype=np.int64)
    g_start = np.empty(n_groups, dtype=np.int64)
    g_end = np.empty(n_groups, dtype=np.int64)
    g_var = np.empty(n_groups, dtype=np.int64)
    g_mask = np.empty(n_groups, dtype=np.uint64)
    g_slot = np.empty(n_groups, dtype=np.int64)
    g = 0
    for f in range(F):
        c = ptr[f]
        while c < ptr[f + 1]:
            j = var[c]
            g_start[g] = c
            c, m = _group_mask(c, ptr[f + 1], var, val, eq, cards)
            g_end[g] = c
            g_var[g] = j
            g_mask[g] = m
            if owner[f] >= 0 and owner[f] != j:
                g_slot[g] = -2
            elif m & (m - np.uint64(1)) == 0:
                g_slot[g] = offs[j] + _lowest_bit(m)
            else:
                g_slot[g] = -1
            g += 1
        gptr[f + 1] = g
    return gptr, g_start, g_end, g_var, g_mask, g_slot, code


@nb.njit(cache=True)
def _group_masks(ptr, var, val, eq, cards):
    """(code[c], allowed[c]): literal index of each condition, and at the first condition of
    each per-variable group the bit mask of the values satisfying the whole group."""
    _, code = _literal_codes(var, val, eq, cards)
    allowed = np.zeros(var.shape[0], dtype=np.uint64)
    for f in range(ptr.shape[0] - 1):
        c = ptr[f]
        while c < ptr[f + 1]:
            s = c
            c, allowed[s] = _group_mask(c, ptr[f + 1], var, val, eq, cards)
    return code, allowed


@nb.njit(cache=True)
def _order_groups(gptr, g_start, g_end, g_var, g_mask, g_slot, code, lit_rate):
    """Within every feature, put the groups that hold least often first (in place).

    A word of rows is abandoned once every row has failed two groups, so testing the rarest
    conditions first ends most words after two or three groups. ``lit_rate[code]`` is the
    fraction of rows satisfying each literal; a group's rate is the product of its literals'.
    """
    for f in range(gptr.shape[0] - 1):
        g0 = gptr[f]
        ng = gptr[f + 1] - g0
        rate = np.empty(ng)
        for k in range(ng):
            r = 1.0
            for c in range(g_start[g0 + k], g_end[g0 + k]):
                r *= lit_rate[code[c]]
            rate[k] = r
        for k in range(1, ng):  # insertion sort of the (few) groups by rate
            m = k
            while m > 0 and rate[m - 1] > rate[m]:
                a, b = g0 + m - 1, g0 + m
                rate[m - 1], rate[m] = rate[m], rate[m - 1]
                g_start[a], g_start[b] = g_start[b], g_start[a]
                g_end[a], g_end[b] = g_end[b], g_end[a]
                g_var[a], g_var[b] = g_var[b], g_var[a]
                g_mask[a], g_mask[b] = g_mask[b], g_mask[a]
                g_slot[a], g_slot[b] = g_slot[b], g_slot[a]
                m -= 1


def _groups_for(fs: FeatureSet, rows: np.ndarray, cards: np.ndarray, owner):
    """Group structure of ``fs`` with each feature's groups ordered rarest first on ``rows``."""
    groups = _group_structure(fs.ptr, fs.var, fs.val, fs.eq, cards, _owner(fs, owner))
    offs = value_offsets(cards)
    counts = np.bincount((rows + offs[:-1].astype(np.int64)).ravel(), minlength=offs[-1])
    rate_eq = counts / max(rows.shape[0], 1)
    lit_rate = np.empty(2 * offs[-1])
    lit_rate[0::2] = rate_eq
    lit_rate[1::2] = 1.0 - rate_eq
    _order_groups(*groups, lit_rate)
    return groups


@nb.njit(cache=True, parallel=True)
def _all_logits(rows, offs, cards, weights, groups):
    n = rows.shape[0]
    n_slots = offs[-1]
    logits = np.zeros((n, n_slots))
    chunk = 64 * CHUNK_WORDS
    n_chunks = (n + chunk - 1) // chunk
    dummy_p = np.zeros((0, n_slots))
    dummy_g = np.zeros(0)
    for k in nb.prange(n_chunks):
        _chunk_pass(rows, k * chunk, CHUNK_WORDS, offs, cards, weights, groups[0], groups[1],
                    groups[2], groups[3], groups[4], groups[5], groups[6], 0, logits, dummy_p,
                    dummy_g)
    return logits


@nb.njit(cache=True, parallel=True)
def _normalise(logits, rows, offs, cards):
    """Turn logits into conditionals in place; return log P(x_j | x_-j) per row and variable."""
    n, n_vars = rows.shape
    terms = np.empty((n, n_vars))
    for r in nb.prange(n):
        for j in range(n_vars):
            o = offs[j]
            m = logits[r, o]
            for a in range(1, cards[j]):
                m = max(m, logits[r, o + a])
            lx = logits[r, o + rows[r, j]] - m
            s = 0.0
            for a in range(cards[j]):
                e = np.exp(logits[r, o + a] - m)
                logits[r, o + a] = e
                s += e
            terms[r, j] = lx - np.log(s)  # finite even where the exponential underflows
            for a in range(cards[j]):
                logits[r, o + a] /= s
    return terms


@nb.njit(cache=True, parallel=True)
def _pll_gradient(rows, probs, offs, cards, weights, groups, n_blocks):
    n = rows.shape[0]
    chunk = 64 * CHUNK_WORDS
    n_chunks = (n + chunk - 1) // chunk
    grads = np.zeros((n_blocks, weights.shape[0]))
    dummy_l = np.zeros((0, probs.shape[1]))
    for blk in nb.prange(n_blocks):
        for k in range(blk, n_chunks, n_blocks):
            _chunk_pass(rows, k * chunk, CHUNK_WORDS, offs, cards, weights, groups[0], groups[1],
                        groups[2], groups[3], groups[4], groups[5], groups[6], 1, dummy_l, probs,
                        grads[blk])
    out = np.zeros(weights.shape[0])
    for blk in range(n_blocks):
        out += grads[blk]
    return out


# Row-by-row fallbacks for variables with more than 64 values (the bitset kernels keep a
# variable's allowed values in one 64-bit mask).
MASK_VALUES = 64


@nb.njit(cache=True)
def _feature_counts_for(f, j, owner):
    return owner[f] < 0 or owner[f] == j


@nb.njit(cache=True, parallel=True)
def _logits_rows(rows, cards, offs, var_ptr, var_feats, owner, weights, ptr, var, val, eq):
    n, n_vars = rows.shape
    max_card = 0
    for j in range(n_vars):
        max_card = max(max_card, cards[j])
    out = np.zeros((n, offs[-1]))
    for r in nb.prange(n):
        allowed = np.empty(max_card, dtype=np.bool_)
        for j in range(n_vars):
            for k in range(var_ptr[j], var_ptr[j + 1]):
                f = var_feats[k]
                if _feature_counts_for(f, j, owner):
                    _add_feature_logits(rows[r], j, cards[j], f, weights, ptr, var, val, eq,
                                        out[r, offs[j]:offs[j + 1]], allowed)
    return out


@nb.njit(cache=True, parallel=True)
def _gradient_rows(rows, probs, cards, offs, var_ptr, var_feats, owner, weights, ptr, var, val,
                   eq, n_blocks):
    n, n_vars = rows.shape
    max_card = 0
    for j in range(n_vars):
        max_card = max(max_card, cards[j])
    grads = np.zeros((n_blocks, weights.shape[0]))
    unit = np.ones(weights.shape[0])
    for blk in nb.prange(n_blocks):
        ind = np.zeros(max_card)
        allowed = np.empty(max_card, dtype=np.bool_)
        for r in range(blk, n, n_blocks):
            for j in range(n_vars):
                for k in range(var_ptr[j], var_ptr[j + 1]):
                    f = var_feats[k]
                    if not _feature_counts_for(f, j, owner):
                        continue
                    for a in range(cards[j]):
                        ind[a] = 0.0
                    # ind[a] = 1 where feature f holds with x_j replaced by a
                    _add_feature_logits(rows[r], j, cards[j], f, unit, ptr, var, val, eq, ind,
                                        allowed)
                    d = ind[rows[r, j]]
                    for a in range(cards[j]):
                        d -= ind[a] * probs[r, offs[j] + a]
                    grads[blk, f] += d
    out = np.zeros(weights.shape[0])
    for blk in range(n_blocks):
        out += grads[blk]
    return out


def value_offsets(cardinalities) -> np.ndarray:
    """``offs[j]``: the first column of variable j's values in a (rows, sum of cards) table."""
    return np.concatenate([[0], np.cumsum(cardinalities)]).astype(np.int64)


def _owner(fs: FeatureSet, owner) -> np.ndarray:
    if owner is None:
        return np.full(fs.n_features, -1, dtype=np.int64)
    return np.ascontiguousarray(owner, dtype=np.int64)


def all_conditionals(fs: FeatureSet, rows: np.ndarray, owner=None) -> tuple[np.ndarray, np.ndarray]:
    """Every conditional of every row at once, by the row-bitset kernel (row by row when a
    variable has more than 64 values), computed once per distinct row.

    Returns ``(probs, terms)``: ``probs[r, offs[j] + a] = P(X_j = a | x_-j)`` (columns laid out
    by :func:`value_offsets`) and ``terms[r, j] = log P(x_j | x_-j)``. ``owner[f] = j`` makes
    feature f count only for variable j's conditional (dependency networks); ``-1`` or no
    ``owner`` means every variable it mentions (Markov networks).
    """
    rows = _rows(rows, fs)
    cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
    offs = value_offsets(cards)
    patterns, inverse = distinct_rows(rows)  # equal rows have equal conditionals
    if cards.max() > MASK_VALUES:
        var_ptr, var_feats = fs.features_by_variable()
        logits = _logits_rows(patterns, cards, offs, var_ptr, var_feats, _owner(fs, owner),
                              fs.weights, fs.ptr, fs.var, fs.val, fs.eq)
    else:
        logits = _all_logits(patterns, offs, cards, fs.weights,
                             _groups_for(fs, patterns, cards, owner))
    terms = _normalise(logits, patterns, offs, cards)
    if inverse is None:
        return logits, terms
    return logits[inverse], terms[inverse]


def distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """``(patterns, inverse)`` with ``rows == patterns[inverse]``, or ``(rows, None)`` when the
    rows are all distinct. Per-row results computed on the patterns and gathered back are the
    same numbers as computed on the rows."""
    if rows.shape[0] < 2:
        return rows, None
    keys = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    if first.shape[0] == rows.shape[0]:
        return rows, None
    return np.ascontiguousarray(rows[first]), inverse.ravel()


# ---------------------------------------------------------------------------------------------
# Near-hit cache for weight learning. Across the evaluations of one fit the rows and the
# features' conditions stay fixed; only the weights change. So the bitset scan above runs once,
# and every (feature, group, word of 64 rows) where the feature reaches the group's conditional
# on some row becomes a *unit*: those rows (``rest``: the feature holds there, or only this
# group fails) and how many of them it holds on. An evaluation is then two sparse passes over
# the units: weights into logits (chunks of rows in parallel), conditionals into the gradient.
# Units are kept in the order the scan meets them (chunk, feature, word, group), which is the
# order in which the uncached kernel adds, so cached and uncached sums agree bit for bit.
# ---------------------------------------------------------------------------------------------

# Each feature's gradient is summed in this many interleaved sequences of chunks (chunk k into
# sequence k mod GRADIENT_BLOCKS), then the sequences in order: a fixed order, so the gradient
# does not depend on the thread count (it equals the earlier two-thread kernel's sums).
GRADIENT_BLOCKS = 2
MAX_UNITS = 2 ** 24  # largest cache (17 bytes a unit); beyond it every evaluation rescans


@nb.njit(cache=True)
def _chunk_units(rows, start, offs, gptr, g_start, g_end, g_slot, code, at, u_group, u_word,
                 u_pop, u_rest):
    """Scan one chunk of rows against every feature and write its units from index ``at``
    (only count them when ``u_group`` is empty); return the index after the last one."""
    lits, valid = _chunk_literals(rows, start, CHUNK_WORDS, offs, offs[-1])
    emit = u_group.shape[0] > 0
    max_groups = 0
    for f in range(gptr.shape[0] - 1):
        max_groups = max(max_groups, gptr[f + 1] - gptr[f])
    H = np.empty(max_groups, dtype=np.uint64)
    word0 = start // 64
    for f in range(gptr.shape[0] - 1):
        g0 = gptr[f]
        ng = gptr[f + 1] - g0
        for w in range(CHUNK_WORDS):
            vw = valid[w]
            one, two = _word_status(lits, w, vw, g0, ng, g_start, g_end, code, H)
            if two == vw:
                continue
            holds = vw & ~one
            for k in range(ng):
                g = g0 + k
                if g_slot[g] == -2:
                    continue
                rest = holds | (vw & ~H[k] & ~two)
                if rest == 0:
                    continue
                if emit:
                    u_group[at] = g
                    u_word[at] = word0 + w
                    u_pop[at] = _popcount(holds)
                    u_rest[at] = rest
                at += 1
    return at


@nb.njit(cache=True, parallel=True)
def _count_units(rows, offs, groups):
    """``chunk_ptr``: the units of chunk k will be ``chunk_ptr[k]:chunk_ptr[k+1]``."""
    chunk = 64 * CHUNK_WORDS
    n_chunks = (rows.shape[0] + chunk - 1) // chunk
    ptr = np.zeros(n_chunks + 1, dtype=np.int64)
    none_i = np.zeros(0, dtype=np.int32)
    for k in nb.prange(n_chunks):
        ptr[k + 1] = _chunk_units(rows, k * chunk, offs, groups[0], groups[1], groups[2],
                                  groups[5], groups[6], 0, none_i, none_i,
                                  np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.uint64))
    for k in range(n_chunks):
        ptr[k + 1] += ptr[k]
    return ptr


@nb.njit(cache=True, parallel=True)
def _fill_units(rows, offs, groups, chunk_ptr):
    n = chunk_ptr[-1]
    u_group = np.empty(n, dtype=np.int32)
    u_word = np.empty(n, dtype=np.int32)
    u_pop = np.empty(n, dtype=np.uint8)
    u_rest = np.empty(n, dtype=np.uint64)
    chunk = 64 * CHUNK_WORDS
    for k in nb.prange(chunk_ptr.shape[0] - 1):
        _chunk_units(rows, k * chunk, offs, groups[0], groups[1], groups[2], groups[5],
                     groups[6], chunk_ptr[k], u_group, u_word, u_pop, u_rest)
    return u_group, u_word, u_pop, u_rest


@nb.njit(cache=True, parallel=True)
def _unit_logits(n_rows, offs, cards, weights, g_feat, g_var, g_mask, g_slot, chunk_ptr,
                 u_group, u_word, u_rest):
    """Every conditional's logits from the units (row chunks in parallel), accumulated in a
    chunk-local slot-major table so that a unit's rows are adjacent."""
    n_slots = offs[-1]
    chunk = 64 * CHUNK_WORDS
    logits = np.zeros((n_rows, n_slots))
    for k in nb.prange(chunk_ptr.shape[0] - 1):
        local = np.zeros((n_slots, chunk))
        start = k * chunk
        for u in range(chunk_ptr[k], chunk_ptr[k + 1]):
            g = u_group[u]
            wt = weights[g_feat[g]]
            r0 = 64 * np.int64(u_word[u]) - start
            sg = g_slot[g]
            if sg >= 0:
                target = local[sg]
                x = u_rest[u]
                while x != 0:
                    target[r0 + _lowest_bit(x)] += wt
                    x &= x - np.uint64(1)
                continue
            o = offs[g_var[g]]
            for a in range(cards[g_var[g]]):
                if (g_mask[g] >> np.uint64(a)) & np.uint64(1):
                    target = local[o + a]
                    x = u_rest[u]
                    while x != 0:
                        target[r0 + _lowest_bit(x)] += wt
                        x &= x - np.uint64(1)
        for r in range(min(chunk, n_rows - start)):
            for s in range(n_slots):
                logits[start + r, s] += local[s, r]
    return logits


@nb.njit(cache=True, parallel=True)
def _unit_gradient(probs, offs, cards, n_features, g_feat, g_var, g_mask, g_slot, chunk_ptr,
                   u_group, u_word, u_pop, u_rest):
    """PLL gradient from the units: per unit ``[x_j allowed] - P(allowed | x_-j)`` summed over
    its rows, in the order fixed by ``GRADIENT_BLOCKS``; each chunk's conditionals are read
    from a slot-major copy."""
    n_rows, n_slots = probs.shape
    chunk = 64 * CHUNK_WORDS
    n_chunks = chunk_ptr.shape[0] - 1
    grads = np.zeros((GRADIENT_BLOCKS, n_features))
    for blk in nb.prange(GRADIENT_BLOCKS):
        local = np.empty((n_slots, chunk))
        for k in range(blk, n_chunks, GRADIENT_BLOCKS):
            start = k * chunk
            for r in range(min(chunk, n_rows - start)):
                for s in range(n_slots):
                    local[s, r] = probs[start + r, s]
            for u in range(chunk_ptr[k], chunk_ptr[k + 1]):
                g = u_group[u]
                r0 = 64 * np.int64(u_word[u]) - start
                gsum = float(u_pop[u])
                sg = g_slot[g]
                if sg >= 0:  # one allowed value (every group on a binary variable)
                    pa = local[sg]
                    x = u_rest[u]
                    while x != 0:
                        gsum -= pa[r0 + _lowest_bit(x)]
                        x &= x - np.uint64(1)
                    grads[blk, g_feat[g]] += gsum
                    continue
                j = g_var[g]
                o = offs[j]
                for a in range(cards[j]):
                    if (g_mask[g] >> np.uint64(a)) & np.uint64(1):
                        pa = local[o + a]
                        x = u_rest[u]
                        while x != 0:
                            gsum -= pa[r0 + _lowest_bit(x)]
                            x &= x - np.uint64(1)
                grads[blk, g_feat[g]] += gsum
    out = np.zeros(n_features)
    for blk in range(GRADIENT_BLOCKS):
        out += grads[blk]
    return out


class NearHits:
    """Where the features of ``fs`` reach the conditionals of a fixed block of rows.

    Built once (two scans of the rows: count, then fill); :meth:`pll_and_gradient` then costs
    two sparse passes for any weights. ``n_units`` is its size; :func:`pll_evaluator` decides
    whether to build one.
    """

    def __init__(self, fs: FeatureSet, rows: np.ndarray, owner=None, groups=None,
                 chunk_ptr=None):
        self.rows = _rows(rows, fs)
        self.cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
        if self.cards.max() > MASK_VALUES:
            raise ValueError(f"the near-hit cache needs variables of at most {MASK_VALUES} "
                             "values")
        self.offs = value_offsets(self.cards)
        self.n_features = fs.n_features
        self.groups = groups if groups is not None else _groups_for(fs, self.rows, self.cards,
                                                                    owner)
        if chunk_ptr is None:
            chunk_ptr = _count_units(self.rows, self.offs, self.groups)
        self.chunk_ptr = chunk_ptr
        self.units = _fill_units(self.rows, self.offs, self.groups, chunk_ptr)
        gptr = self.groups[0]
        self.g_feat = np.repeat(np.arange(fs.n_features, dtype=np.int64), np.diff(gptr))

    @property
    def n_units(self) -> int:
        return int(self.chunk_ptr[-1])

    def conditionals(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(probs, terms)`` as :func:`all_conditionals` returns them, for ``weights``."""
        u_group, u_word, _, u_rest = self.units
        logits = _unit_logits(self.rows.shape[0], self.offs, self.cards, weights, self.g_feat,
                              self.groups[3], self.groups[4], self.groups[5], self.chunk_ptr,
                              u_group, u_word, u_rest)
        terms = _normalise(logits, self.rows, self.offs, self.cards)
        return logits, terms

    def pll_and_gradient(self, weights: np.ndarray) -> tuple[float, np.ndarray]:
        """Summed PLL of the rows and its gradient at ``weights`` (see :func:`pll_and_gradient`)."""
        weights = np.ascontiguousarray(weights, dtype=np.float64)
        probs, terms = self.conditionals(weights)
        u_group, u_word, u_pop, u_rest = self.units
        grad = _unit_gradient(probs, self.offs, self.cards, self.n_features, self.g_feat,
                              self.groups[3], self.groups[4], self.groups[5], self.chunk_ptr,
                              u_group, u_word, u_pop, u_rest)
        return float(terms.sum()), grad


def pll_evaluator(fs: FeatureSet, rows: np.ndarray, owner=None):
    """A function ``weights -> (summed PLL, gradient)`` of the features of ``fs`` on ``rows``.

    It reads a :class:`NearHits` cache when the variables have at most 64 values and the cache
    has at most ``MAX_UNITS`` units, and rescans the rows at every call otherwise. Both give the
    same numbers bit for bit.
    """
    rows = _rows(rows, fs)
    cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
    if cards.max() <= MASK_VALUES:
        groups = _groups_for(fs, rows, cards, owner)
        offs = value_offsets(cards)
        chunk = 64 * CHUNK_WORDS
        first = _count_units(rows[:chunk], offs, groups)[-1]  # a cheap look before counting all
        if first * (rows.shape[0] / chunk) <= 2 * MAX_UNITS:
            chunk_ptr = _count_units(rows, offs, groups)
            if chunk_ptr[-1] <= MAX_UNITS:
                return NearHits(fs, rows, owner, groups, chunk_ptr).pll_and_gradient
    return lambda weights: _scan_pll_and_gradient(fs.with_weights(weights), rows, owner)


def pll_and_gradient(fs: FeatureSet, rows: np.ndarray, owner=None) -> tuple[float, np.ndarray]:
    """Summed (not mean) PLL of ``rows`` and its gradient with respect to ``fs.weights``
    (one evaluation of :func:`pll_evaluator`: building the cache and reading it once costs
    about what one scan for the conditionals and one for the gradient do)."""
    return pll_evaluator(fs, rows, owner)(fs.weights)


def _scan_pll_and_gradient(fs: FeatureSet, rows: np.ndarray, owner) -> tuple[float, np.ndarray]:
    """:func:`pll_and_gradient` by scanning the rows (no cache)."""
    rows = _rows(rows, fs)
    probs, terms = all_conditionals(fs, rows, owner)
    cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
    n_blocks = GRADIENT_BLOCKS
    if cards.max() > MASK_VALUES:
        var_ptr, var_feats = fs.features_by_variable()
        grad = _gradient_rows(rows, probs, cards, value_offsets(cards), var_ptr, var_feats,
                              _owner(fs, owner), fs.weights, fs.ptr, fs.var, fs.val, fs.eq,
                              n_blocks)
    else:
        grad = _pll_gradient(rows, probs, value_offsets(cards), cards, fs.weights,
                             _groups_for(fs, rows, cards, owner), n_blocks)
    return float(terms.sum()), grad
