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
from llvmlite import ir
from numba.extending import intrinsic
from numba.typed import Dict

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
# fails (tracked with "fails at least once / twice" words, which also end the scan of a feature
# as soon as every row of the chunk has failed twice). The cost is O(conditions x words), 64
# times less than row by row; the only per-row work left is adding weights where a feature
# nearly holds, which is what the conditionals need anyway.
# ---------------------------------------------------------------------------------------------

CHUNK_WORDS = 4  # rows are processed in chunks of 64 * CHUNK_WORDS


@intrinsic
def _cttz(typingctx, x):
    """LLVM count-trailing-zeros of a uint64 (one instruction on x86-64)."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], cgutils.true_bit)

    return sig, codegen


@nb.njit(cache=True)
def _lowest_bit(x):
    """Index of the lowest set bit of a non-zero uint64."""
    return np.int64(_cttz(x))


@nb.njit(cache=True)
def _chunk_group_bits(rows, start, offs, lit_var, lit_mask):
    """Row bitsets of every distinct group for one chunk of ``64 * CHUNK_WORDS`` rows.

    ``bits[k, w]``: the rows of word w whose value of variable ``lit_var[k]`` is one of the
    values in ``lit_mask[k]``; ``valid[w]``: rows that exist (the last chunk may be partial).
    """
    eq = np.zeros((offs[-1], CHUNK_WORDS), dtype=np.uint64)
    valid = np.zeros(CHUNK_WORDS, dtype=np.uint64)
    n, n_vars = rows.shape
    for w in range(CHUNK_WORDS):
        for b in range(64):
            r = start + 64 * w + b
            if r >= n:
                break
            m = np.uint64(1) << np.uint64(b)
            valid[w] |= m
            for j in range(n_vars):
                eq[offs[j] + rows[r, j], w] |= m
    bits = np.zeros((lit_var.shape[0], CHUNK_WORDS), dtype=np.uint64)
    for k in range(lit_var.shape[0]):
        j = lit_var[k]
        for a in range(offs[j + 1] - offs[j]):
            if (lit_mask[k] >> np.uint64(a)) & np.uint64(1):
                for w in range(CHUNK_WORDS):
                    bits[k, w] |= eq[offs[j] + a, w]
    return bits, valid


@nb.njit(cache=True)
def _feature_status(bits, valid, g0, ng, g_lit, one, two):
    """AND a feature's groups ``g0 .. g0 + ng`` over every word of a chunk of rows.

    Fills ``one[w]`` / ``two[w]`` with the rows of word w where at least one / at least two
    groups fail (group k holds on ``bits[g_lit[g0 + k]]``). Returns False, having stopped
    early, once every row has failed twice: the feature then reaches no conditional in the
    chunk. All words at once, so the inner loops run over ``CHUNK_WORDS`` adjacent words.
    """
    for w in range(CHUNK_WORDS):
        one[w] = 0
        two[w] = 0
    for k in range(ng):
        held = bits[g_lit[g0 + k]]
        done = True
        for w in range(CHUNK_WORDS):
            fail = valid[w] & ~held[w]
            two[w] |= one[w] & fail
            one[w] |= fail
            done = done and two[w] == valid[w]
        if done:
            return False
    return True


def _lane_block(builder, data, base, x, q):
    """Block ``q`` of eight doubles from ``data[base]``: the 8-lane mask of bits 8q..8q+7 of
    ``x`` and a pointer to ``data[base + 8q]`` as an 8-lane vector (for the two kernels below)."""
    byte = builder.trunc(builder.lshr(x, ir.Constant(ir.IntType(64), 8 * q)), ir.IntType(8))
    mask = builder.bitcast(byte, ir.VectorType(ir.IntType(1), 8))
    at = builder.gep(data, [builder.add(base, ir.Constant(ir.IntType(64), 8 * q))])
    return mask, builder.bitcast(at, ir.VectorType(ir.DoubleType(), 8).as_pointer())


@intrinsic
def _add_at_bits(typingctx, target, base, x, wt):
    """``target[base + b] += wt`` for the set bits b of x: eight 8-lane adds, branch-free (a
    lane whose bit is clear adds zero, which changes nothing)."""
    sig = types.void(target, types.int64, types.uint64, types.float64)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        lanes = ir.VectorType(ir.DoubleType(), 8)
        splat = builder.insert_element(ir.Constant(lanes, ir.Undefined), args[3],
                                       ir.Constant(ir.IntType(32), 0))
        splat = builder.shuffle_vector(splat, splat,
                                       ir.Constant(ir.VectorType(ir.IntType(32), 8), [0] * 8))
        zero = ir.Constant(lanes, [0.0] * 8)
        for q in range(8):
            mask, at = _lane_block(builder, data, args[1], args[2], q)
            builder.store(builder.fadd(builder.load(at, align=8),
                                       builder.select(mask, splat, zero)), at, align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _sum_at_bits(typingctx, target, base, x):
    """The sum of ``target[base + b]`` over the set bits b of x: eight 8-lane adds of the
    selected lanes, then the eight partial sums added pairwise (a fixed order)."""
    sig = types.float64(target, types.int64, types.uint64)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        lanes = ir.VectorType(ir.DoubleType(), 8)
        total = ir.Constant(lanes, [0.0] * 8)
        for q in range(8):
            mask, at = _lane_block(builder, data, args[1], args[2], q)
            total = builder.fadd(total, builder.select(mask, builder.load(at, align=8),
                                                       ir.Constant(lanes, [0.0] * 8)))
        width = 8
        while width > 1:  # pairwise: lanes i and i + width / 2
            width //= 2
            ity = ir.VectorType(ir.IntType(32), width)
            low = builder.shuffle_vector(total, total, ir.Constant(ity, list(range(width))))
            high = builder.shuffle_vector(total, total,
                                          ir.Constant(ity, list(range(width, 2 * width))))
            total = builder.fadd(low, high)
        return builder.extract_element(total, ir.Constant(ir.IntType(32), 0))

    return sig, codegen


@nb.njit(cache=True)
def _chunk_logits(rows, start, offs, cards, groups, weights, table, words, keep):
    """Every feature against one chunk of ``64 * CHUNK_WORDS`` rows: adds its weight to the
    logits in ``table`` where it reaches a conditional, and with ``keep`` lists where as the
    chunk's *word list* (the same for any weights) for :func:`_gather_words` (the gradient).
    ``table[offs[j] + a, r]`` is slot-major (adjacent rows adjacent), seen flat.

    Feature f's conditions come grouped by variable (see :func:`_group_structure`). Over the
    chunk's words of 64 rows the groups are ANDed in order while tracking the rows where at
    least one / at least two groups fail; a feature is abandoned as soon as every row has
    failed twice (:func:`_feature_status`). It reaches variable j's conditional on the rows
    where it holds outright and on the rows where j's group is the only one failing, at every
    value a the group allows: one *entry* per such (value, word), ``xs[e]`` the rows of the
    word and ``at[e]`` the table position of its first row (``table`` has fewer than 2**31
    cells). ``words = (feats, ends, xs, at)`` are buffers, grown as needed; returns them and
    ``nf``: the chunk's reaching features are ``feats[:nf]``, feature ``feats[i]``'s entries
    end at ``ends[i]``, in the order (word, group, value). Each feature's entries are added
    to ``table`` as soon as they are written, while they are in cache (without ``keep`` they
    are then overwritten by the next feature's); an empty ``table``: the list only.
    """
    gptr, g_slot, g_lit, lit_var, lit_mask = groups
    feats, ends, xs, at = words
    chunk = 64 * CHUNK_WORDS
    bits, valid = _chunk_group_bits(rows, start, offs, lit_var, lit_mask)
    one = np.empty(CHUNK_WORDS, dtype=np.uint64)
    two = np.empty(CHUNK_WORDS, dtype=np.uint64)
    max_card = cards.max()
    nf = 0
    ne = 0
    for f in range(gptr.shape[0] - 1):
        g0 = gptr[f]
        ng = gptr[f + 1] - g0
        if not _feature_status(bits, valid, g0, ng, g_lit, one, two):
            continue
        if ne + CHUNK_WORDS * ng * max_card > xs.shape[0]:  # room for f's entries
            xs = _grown(xs, ne + CHUNK_WORDS * ng * max_card)
            at = _grown(at, xs.shape[0])
        first = ne
        for w in range(CHUNK_WORDS):
            vw = valid[w]
            if two[w] == vw:
                continue
            holds = vw & ~one[w]
            near = vw & ~two[w]  # rows where at most one group fails
            for k in range(ng):
                g = g0 + k
                sg = g_slot[g]
                if sg == -2:
                    continue  # a dependency-network feature counts only for its own variable
                x = holds | (near & ~bits[g_lit[g], w])  # holds, or only this group fails
                if x == 0:
                    continue
                if sg >= 0:  # one allowed value
                    xs[ne] = x
                    at[ne] = sg * chunk + 64 * w
                    ne += 1
                    continue
                j = lit_var[g_lit[g]]
                for a in range(cards[j]):
                    if (lit_mask[g_lit[g]] >> np.uint64(a)) & np.uint64(1):
                        xs[ne] = x
                        at[ne] = (offs[j] + a) * chunk + 64 * w
                        ne += 1
        if table.shape[0]:
            wt = weights[f]
            for e in range(first, ne):
                _add_at_bits(table, at[e], xs[e], wt)
        if not keep:
            ne = first
        elif ne > first:
            feats[nf] = f
            ends[nf] = ne
            nf += 1
    return (feats, ends, xs, at), nf


@nb.njit(cache=True)
def _grown(a, n):
    """A copy of ``a`` with room for at least ``n`` items (and half as many again)."""
    b = np.empty(n + n // 2, dtype=a.dtype)
    b[:a.shape[0]] = a
    return b


@nb.njit(cache=True)
def _new_words(n_features):
    """Empty word-list buffers for :func:`_chunk_logits`."""
    return (np.empty(n_features, dtype=np.int32), np.empty(n_features, dtype=np.int64),
            np.empty(4 * n_features, dtype=np.uint64), np.empty(4 * n_features, dtype=np.int32))


@nb.njit(cache=True)
def _add_words(words, f0, f1, e0, weights, table):
    """Add listed features ``f0:f1``'s weights to the flat ``table`` at their entries' rows
    (from entry ``e0``; see :func:`_chunk_logits`), in the order the list was made."""
    feats, ends, xs, at = words
    e = e0
    for i in range(f0, f1):
        wt = weights[feats[i]]
        while e < ends[i]:
            _add_at_bits(table, at[e], xs[e], wt)
            e += 1


@nb.njit(cache=True)
def _gather_words(words, f0, f1, e0, table, grad):
    """Subtract from ``grad[f]`` the sum of the flat ``table`` at listed feature f's entries'
    rows, for listed features ``f0:f1`` (from entry ``e0``; see :func:`_chunk_logits`)."""
    feats, ends, xs, at = words
    e = e0
    for i in range(f0, f1):
        total = 0.0
        while e < ends[i]:
            total += _sum_at_bits(table, at[e], xs[e])
            e += 1
        grad[feats[i]] -= total


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
    """The bitset kernels' view of ``fs``, each feature's groups ordered rarest first on
    ``rows``: ``(gptr, g_slot, g_lit, lit_var, lit_mask)`` (see :func:`_group_structure` and
    :func:`_distinct_groups`)."""
    groups = _group_structure(fs.ptr, fs.var, fs.val, fs.eq, cards, _owner(fs, owner))
    offs = value_offsets(cards)
    counts = np.bincount((rows + offs[:-1].astype(np.int64)).ravel(), minlength=offs[-1])
    rate_eq = counts / max(rows.shape[0], 1)
    lit_rate = np.empty(2 * offs[-1])
    lit_rate[0::2] = rate_eq
    lit_rate[1::2] = 1.0 - rate_eq
    _order_groups(*groups, lit_rate)
    gptr, _, _, g_var, g_mask, g_slot, _ = groups
    return (gptr, g_slot) + _distinct_groups(g_var, g_mask)


_LIT_KEY = types.UniTuple(types.uint64, 2)  # (variable, allowed values) of a group


@nb.njit(cache=True)
def _distinct_groups(g_var, g_mask):
    """``(g_lit, lit_var, lit_mask)``: the distinct (variable, allowed values) pairs among the
    groups, and for every group its index among them. A chunk's row bitset of each distinct
    group is built once (:func:`_chunk_group_bits`), so testing a group is one load per word
    whatever its number of conditions, and the groups' data stays small."""
    index = Dict.empty(key_type=_LIT_KEY, value_type=types.int64)
    g_lit = np.empty(g_var.shape[0], dtype=np.int64)
    lit_var = np.empty(g_var.shape[0], dtype=np.int64)
    lit_mask = np.empty(g_var.shape[0], dtype=np.uint64)
    n = 0
    for g in range(g_var.shape[0]):
        key = (np.uint64(g_var[g]), g_mask[g])
        if key in index:
            k = index[key]
        else:
            k = n
            index[key] = k
            lit_var[k] = g_var[g]
            lit_mask[k] = g_mask[g]
            n += 1
        g_lit[g] = k
    return g_lit, lit_var[:n].copy(), lit_mask[:n].copy()


@nb.njit(cache=True, parallel=True)
def _all_logits(rows, offs, cards, weights, groups):
    n = rows.shape[0]
    n_slots = offs[-1]
    logits = np.empty((n, n_slots))
    chunk = 64 * CHUNK_WORDS
    n_chunks = (n + chunk - 1) // chunk
    for b in nb.prange(PARTIAL_SUMS):  # chunk sequences, each reusing its buffers
        table = np.empty((n_slots, chunk))
        words = _new_words(weights.shape[0])
        for k in range(b, n_chunks, PARTIAL_SUMS):
            table[:] = 0.0
            _chunk_logits(rows, k * chunk, offs, cards, groups, weights, table.reshape(-1),
                          words, False)
            for r in range(min(chunk, n - k * chunk)):
                for s in range(n_slots):
                    logits[k * chunk + r, s] = table[s, r]
    return logits


@nb.njit(cache=True, parallel=True)
def _normalise(logits, rows, offs, cards):
    """Turn logits into conditionals in place; return log P(x_j | x_-j) per row and variable."""
    n, n_vars = rows.shape
    terms = np.empty((n, n_vars))
    for r in nb.prange(n):
        for j in range(n_vars):
            terms[r, j] = _normalise_variable(logits[r], offs[j], cards[j], rows[r, j])
    return terms


@nb.njit(cache=True)
def _normalise_variable(logits, o, card, x):
    """Turn ``logits[o:o + card]`` into probabilities in place; return the log probability of
    value ``x`` (finite even where the exponential underflows)."""
    if card == 2:
        z, e = _binary_conditional(logits, o, x)
        return -max(z, 0.0) - np.log1p(e)
    m = logits[o]
    for a in range(1, card):
        m = max(m, logits[o + a])
    lx = logits[o + x] - m
    s = 0.0
    for a in range(card):
        e = np.exp(logits[o + a] - m)
        logits[o + a] = e
        s += e
    for a in range(card):
        logits[o + a] /= s
    return lx - np.log(s)


@nb.njit(cache=True)
def _binary_conditional(logits, o, x):
    """The two logits of a binary variable at ``o`` become probabilities in place, with one
    exponential. Returns ``(z, e)``: z is the other value's logit minus x's, ``e = exp(-|z|)``,
    and ``log P(x) = -max(z, 0) - log1p(e)``."""
    z = logits[o + 1 - x] - logits[o + x]
    e = np.exp(-abs(z))
    large = 1.0 / (1.0 + e)
    small = e * large
    logits[o + x] = small if z > 0 else large
    logits[o + 1 - x] = large if z > 0 else small
    return z, e


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
def _gradient_rows(rows, counts, probs, cards, offs, var_ptr, var_feats, owner, weights, ptr,
                   var, val, eq, n_blocks):
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
                    grads[blk, f] += counts[r] * d
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
# Pseudo-likelihood and its gradient for weight learning: reach lists.
#
# Across the evaluations of one fit the rows and the features' conditions stay fixed; only the
# weights change. Feature f reaches the conditional of variable j on row r when f holds on r
# (it then reaches every variable it tests, at the values its group on that variable allows, x_j
# among them), or when f fails on r through its conditions on j alone (it then reaches j's
# conditional at the values its group on j allows, x_j not among them). The bitset scan above
# finds both, 64 rows at a time, and lists them per row and value column ``offs[j] + a``: the
# *entries* of (row, column) are the features (int32) whose weights its logit sums.
#
# An evaluation then reads the entries row by row and does everything for the row while they
# and its logits are in cache: each logit as one sum of gathered weights, the conditionals and
# the row's PLL, and the gradient, which scatters ``P(a | x_-j) - [a = x_j]`` of each column to
# its features (summed over a group's values, that is ``P(allowed | x_-j) - [x_j allowed]``).
# Column by column, the sums stay in registers and a feature appears at most once per column.
# Equal rows are listed once, with their count as a weight. Chunks of rows are spread over
# ``PARTIAL_SUMS`` fixed sequences (chunk k in sequence k mod PARTIAL_SUMS), each summing its
# own value and gradient; the sequences are then added in order, so results do not depend on
# the thread count.
#
# Memory: 4 bytes per entry plus 8 per (row, column), kept when they all fit in ``LIST_BYTES``.
# Plants (69 binary variables, 8,258 distinct training rows): the 13,189 DN leaf features of
# LW make about 1,200 entries per row (49 MB, kept); DN2MN's 178,651 features about 70,000
# (2.3 GB). Past the budget an evaluation works chunk by chunk on a slot-major table of the
# chunk's logits instead, from the chunk's *word list* (:func:`_chunk_logits`: per reaching
# feature, its rows word by word, 12 bytes an entry; 64 rows to an entry rather than one):
# adding the weights gives the logits, and after they become ``count * (P - [own value])`` the
# gradient is gathered from the same list. The word lists of the first chunks of each sequence
# are kept across evaluations while they fit in the budget (made by the first evaluation);
# the other chunks' are made by a scan each time, in a buffer per sequence. Plants' DN2MN
# model: 43.6M entries (520 MB), 13 of its 33 chunks kept, and one evaluation at one thread
# from 1.6 CPU s (two scans per chunk) to about 0.95. Kept or scanned, a chunk gives the same
# bits; entries and word lists add in different orders, so those two ways agree to rounding.
# ---------------------------------------------------------------------------------------------

PARTIAL_SUMS = 4  # fixed number of partial sums of value and gradient (see above)
LIST_BYTES = 2 ** 28  # entries or word lists kept across evaluations, at most (256 MiB)
ENTRY_BYTES = 4  # an entry: an int32 feature
ENTRY_WORD_BYTES = 12  # a word-list entry (uint64 rows, int32 position) or listed feature


@nb.njit(cache=True)
def _scan_reach(rows, start, offs, cards, groups, fill, at, feat):
    """Scan one chunk of ``64 * CHUNK_WORDS`` rows (from ``start``) against every feature, by
    its word list (:func:`_chunk_logits`), entry after entry.

    ``at[(r - start) * n_slots + s]`` is row r's column s. ``fill`` false: count, adding the
    number of entries there. ``fill`` true: ``at`` holds the write positions in ``feat`` and
    advances as the entries are written (in feature order).
    """
    n_slots = offs[-1]
    chunk = 64 * CHUNK_WORDS
    none = np.zeros(0)
    words, nf = _chunk_logits(rows, start, offs, cards, groups, none, none,
                              _new_words(groups[0].shape[0] - 1), True)
    feats, ends, xs, pos = words
    e = 0
    for i in range(nf):
        while e < ends[i]:
            _reach_column(xs[e], pos[e] % chunk, n_slots, pos[e] // chunk, feats[i], fill, at,
                          feat)
            e += 1


@nb.njit(cache=True)
def _reach_column(x, base, n_slots, column, f, fill, at, feat):
    """Count or write feature f as an entry of ``column`` for the rows ``base + b``, b the set
    bits of ``x`` (see :func:`_scan_reach`)."""
    while x != 0:
        i = (base + _lowest_bit(x)) * n_slots + column
        if fill:
            feat[at[i]] = f
        at[i] += 1
        x &= x - np.uint64(1)


@nb.njit(cache=True, parallel=True)
def _count_reach(rows, offs, cards, groups):
    """``ptr``: the entries of row r, column s will be ``ptr[r * n_slots + s]`` to the next."""
    n = rows.shape[0]
    n_slots = offs[-1]
    chunk = 64 * CHUNK_WORDS
    ptr = np.zeros(n * n_slots + 1, dtype=np.int64)
    none = np.zeros(0, dtype=np.int32)
    for k in nb.prange((n + chunk - 1) // chunk):
        s = k * chunk * n_slots
        e = min(k * chunk + chunk, n) * n_slots
        _scan_reach(rows, k * chunk, offs, cards, groups, False, ptr[s + 1:e + 1], none)
    for i in range(n * n_slots):
        ptr[i + 1] += ptr[i]
    return ptr


@nb.njit(cache=True, parallel=True)
def _fill_reach(rows, offs, cards, groups, ptr):
    """The entries of every row, chunks of rows in parallel."""
    n = rows.shape[0]
    n_slots = offs[-1]
    chunk = 64 * CHUNK_WORDS
    feat = np.empty(ptr[-1], dtype=np.int32)
    for k in nb.prange((n + chunk - 1) // chunk):
        at = ptr[k * chunk * n_slots:min(k * chunk + chunk, n) * n_slots].copy()
        _scan_reach(rows, k * chunk, offs, cards, groups, True, at, feat)
    return feat


@nb.njit(cache=True)
def _row_conditionals(probs, row, offs, cards):
    """Turn a row's logits into its conditionals in place; return ``sum_j log P(x_j | x_-j)``.

    Binary variables take one exponential each, and their probabilities are multiplied
    together and logged once the product falls below 1e-150 (a factor below 1e-150 is added as
    its own log instead, so the product never leaves the normal range): about one logarithm a
    row rather than one a variable.
    """
    total = 0.0
    product = 1.0
    for j in range(cards.shape[0]):
        if cards[j] != 2:
            total += _normalise_variable(probs, offs[j], cards[j], row[j])
            continue
        z, e = _binary_conditional(probs, offs[j], row[j])
        p = probs[offs[j] + row[j]]
        if p < 1e-150:
            total += -max(z, 0.0) - np.log1p(e)
            continue
        product *= p
        if product < 1e-150:
            total += np.log(product)
            product = 1.0
    return total + np.log(product)


@nb.njit(cache=True)
def _chunk_pll(rows, counts, start, stop, offs, cards, weights, ptr, feat, probs, grad):
    """Summed PLL of rows ``start:stop`` (each weighted by its count) from their entries,
    adding their gradient to ``grad``; ``probs`` is scratch."""
    n_slots = offs[-1]
    value = 0.0
    for r in range(start, stop):
        base = r * n_slots
        for s in range(n_slots):
            total = 0.0
            for i in range(ptr[base + s], ptr[base + s + 1]):
                total += weights[feat[i]]
            probs[s] = total
        value += counts[r] * _row_conditionals(probs, rows[r], offs, cards)
        for j in range(cards.shape[0]):  # probs becomes P(a | x_-j) - [a = x_j]
            probs[offs[j] + rows[r, j]] -= 1.0
        for s in range(n_slots):
            d = counts[r] * probs[s]
            for i in range(ptr[base + s], ptr[base + s + 1]):
                grad[feat[i]] -= d
    return value


@nb.njit(cache=True)
def _table_pll(rows, counts, start, offs, cards, table, probs):
    """Summed PLL of a chunk's rows from their logits in the slot-major ``table``, which then
    holds ``count * (P(a | x_-j) - [a = x_j])`` per row for the gradient; ``probs`` is
    scratch."""
    value = 0.0
    for r in range(min(table.shape[1], rows.shape[0] - start)):
        for s in range(offs[-1]):
            probs[s] = table[s, r]
        value += counts[start + r] * _row_conditionals(probs, rows[start + r], offs, cards)
        for j in range(cards.shape[0]):
            probs[offs[j] + rows[start + r, j]] -= 1.0
        for s in range(offs[-1]):
            table[s, r] = counts[start + r] * probs[s]
    return value


@nb.njit(cache=True)
def _chunk_scan_pll(rows, counts, start, offs, cards, weights, groups, table, probs, grad,
                    words, kept, b, i):
    """:func:`_chunk_pll` without entries, for chunk ``i`` of sequence ``b``: from its word
    list when ``kept`` holds it, else from a scan (:func:`_chunk_logits`, into the ``words``
    buffers), whose list ``kept`` then keeps if it is filling and the list fits. Returns
    ``(value, words)``."""
    k_feats, k_ends, k_xs, k_at, k_bounds, k_state = kept
    listed = (k_feats[b], k_ends[b], k_xs[b], k_at[b])
    f0, e0 = (0, 0) if i == 0 else (k_bounds[b, i - 1, 0], k_bounds[b, i - 1, 1])
    table[:] = 0.0
    flat = table.reshape(-1)
    if i < k_state[b, 0]:
        _add_words(listed, f0, k_bounds[b, i, 0], e0, weights, flat)
        value = _table_pll(rows, counts, start, offs, cards, table, probs)
        _gather_words(listed, f0, k_bounds[b, i, 0], e0, flat, grad)
        return value, words
    words, nf = _chunk_logits(rows, start, offs, cards, groups, weights, flat, words, True)
    value = _table_pll(rows, counts, start, offs, cards, table, probs)
    _gather_words(words, 0, nf, 0, flat, grad)
    if k_state[b, 1] == 0:  # still filling: keep this chunk's list if it fits
        ne = words[1][nf - 1] if nf else 0
        if ENTRY_WORD_BYTES * (f0 + nf + e0 + ne) > k_state[b, 2]:
            k_state[b, 1] = 1
        else:
            listed[0][f0:f0 + nf] = words[0][:nf]
            listed[1][f0:f0 + nf] = words[1][:nf] + e0
            listed[2][e0:e0 + ne] = words[2][:ne]
            listed[3][e0:e0 + ne] = words[3][:ne]
            k_bounds[b, i, 0] = f0 + nf
            k_bounds[b, i, 1] = e0 + ne
            k_state[b, 0] += 1
    return value, words


@nb.njit(cache=True, parallel=True)
def _pll_and_gradient(rows, counts, offs, cards, weights, groups, ptr, feat, kept):
    """Summed PLL and gradient from the entries, or by the word lists of the chunks of rows
    when there are no entries (``ptr`` empty): kept ones, or made by a scan."""
    n = rows.shape[0]
    chunk = 64 * CHUNK_WORDS
    n_chunks = (n + chunk - 1) // chunk
    values = np.zeros(PARTIAL_SUMS)
    grads = np.zeros((PARTIAL_SUMS, weights.shape[0]))
    for b in nb.prange(PARTIAL_SUMS):
        probs = np.empty(offs[-1])
        table = np.empty((offs[-1], chunk))
        words = _new_words(weights.shape[0] if ptr.shape[0] == 0 else 0)
        for k in range(b, n_chunks, PARTIAL_SUMS):
            s = k * chunk
            if ptr.shape[0] == 0:  # chunk k is sequence b's (k // PARTIAL_SUMS)-th
                value, words = _chunk_scan_pll(rows, counts, s, offs, cards, weights, groups,
                                               table, probs, grads[b], words, kept, b,
                                               k // PARTIAL_SUMS)
                values[b] += value
            else:
                values[b] += _chunk_pll(rows, counts, s, min(s + chunk, n), offs, cards,
                                        weights, ptr, feat, probs, grads[b])
    grad = np.zeros(weights.shape[0])
    value = 0.0
    for b in range(PARTIAL_SUMS):
        value += values[b]
        grad += grads[b]
    return value, grad


def _kept_words(n_rows: int, budget: int):
    """Empty storage for the word lists that :func:`_pll_and_gradient` keeps across
    evaluations, ``budget`` bytes shared equally by the ``PARTIAL_SUMS`` sequences of chunks
    (each keeps the lists of its first chunks, while they fit): ``(feats, ends, xs, at,
    bounds, state)``; ``bounds[b, i]`` are the ends of chunk i's listed features and entries
    in sequence b's arrays, ``state[b]`` its (kept chunks, full, byte share). Capacities are
    counted in items; memory is only used as lists are written."""
    share = budget // PARTIAL_SUMS
    cap = share // ENTRY_WORD_BYTES
    per_sequence = -(-n_rows // (64 * CHUNK_WORDS)) // PARTIAL_SUMS + 1
    state = np.zeros((PARTIAL_SUMS, 3), dtype=np.int64)
    state[:, 2] = share
    return (np.empty((PARTIAL_SUMS, cap), dtype=np.int32),
            np.empty((PARTIAL_SUMS, cap), dtype=np.int64),
            np.empty((PARTIAL_SUMS, cap), dtype=np.uint64),
            np.empty((PARTIAL_SUMS, cap), dtype=np.int32),
            np.zeros((PARTIAL_SUMS, per_sequence, 2), dtype=np.int64), state)


def distinct_rows_counted(rows: np.ndarray, counts=None) -> tuple[np.ndarray, np.ndarray]:
    """``(patterns, counts)``: the distinct rows in lexicographic order and how often each
    occurs, or their summed ``counts`` when the rows come with counts (sorted rows put rows
    that share values in the same words of the bitset scan)."""
    keys = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    summed = np.bincount(inverse.ravel(), weights=counts, minlength=first.shape[0])
    return np.ascontiguousarray(rows[first]), summed.astype(np.float64)


class ReachLists:
    """Where the features of ``fs`` reach the conditionals of each distinct row of a fixed block
    of rows (see the notes above); :meth:`pll_and_gradient` evaluates the summed PLL and its
    gradient for any weights.

    The entries are counted (one bitset scan) and written (a second) when they take at most
    ``list_bytes`` (default ``LIST_BYTES``); otherwise every evaluation works from the
    chunks' word lists instead (``n_entries`` is then 0), kept within that budget. Needs
    variables of at most ``MASK_VALUES`` values. ``counts`` weights the rows (default: one
    each), as if each row were repeated that many times.
    """

    def __init__(self, fs: FeatureSet, rows: np.ndarray, owner=None,
                 list_bytes: int | None = None, counts=None):
        rows = _rows(rows, fs)
        counts = _counts(counts, rows)
        self.cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
        if self.cards.max() > MASK_VALUES:
            raise ValueError(f"reach lists need variables of at most {MASK_VALUES} values")
        self.rows, self.counts = distinct_rows_counted(rows, counts)
        self.offs = value_offsets(self.cards)
        self.groups = _groups_for(fs, self.rows, self.cards, owner)
        budget = LIST_BYTES if list_bytes is None else list_bytes
        chunk = 64 * CHUNK_WORDS
        self.ptr = np.zeros(0, dtype=np.int64)
        self.feat = np.zeros(0, dtype=np.int32)
        self.kept = _kept_words(0, 0)
        pointer_bytes = 8 * len(self.rows) * int(self.offs[-1])
        if budget > pointer_bytes:
            first = _count_reach(self.rows[:chunk], self.offs, self.cards, self.groups)[-1]
            if ENTRY_BYTES * first * (len(self.rows) / chunk) <= 2 * budget:  # a look first
                ptr = _count_reach(self.rows, self.offs, self.cards, self.groups)
                if ENTRY_BYTES * ptr[-1] + pointer_bytes <= budget:
                    self.ptr = ptr
                    self.feat = _fill_reach(self.rows, self.offs, self.cards, self.groups, ptr)
                    return
        self.kept = _kept_words(len(self.rows), budget)

    @property
    def n_entries(self) -> int:
        """Entries kept over the distinct rows (0 when every evaluation rescans)."""
        return int(self.ptr[-1]) if len(self.ptr) else 0

    @property
    def kept_chunks(self) -> int:
        """Chunks of rows whose word lists are kept (made by the first evaluation)."""
        return int(self.kept[5][:, 0].sum())

    def pll_and_gradient(self, weights: np.ndarray) -> tuple[float, np.ndarray]:
        """Summed PLL of the rows (with repeats) and its gradient at ``weights``."""
        weights = np.ascontiguousarray(weights, dtype=np.float64)
        return _pll_and_gradient(self.rows, self.counts, self.offs, self.cards, weights,
                                 self.groups, self.ptr, self.feat, self.kept)


def pll_evaluator(fs: FeatureSet, rows: np.ndarray, owner=None, list_bytes: int | None = None,
                  counts=None):
    """A function ``weights -> (summed PLL, gradient)`` of the features of ``fs`` on ``rows``
    (weighted by ``counts``, default one each): :class:`ReachLists` built once (``list_bytes``
    as there), or row by row when a variable has more than 64 values."""
    rows = _rows(rows, fs)
    if fs.schema.cardinalities.max() <= MASK_VALUES:
        return ReachLists(fs, rows, owner, list_bytes, counts).pll_and_gradient
    if counts is not None:
        counts = _counts(counts, rows)
    return lambda weights: _rowwise_pll_and_gradient(fs.with_weights(weights), rows, owner,
                                                     counts)


def _counts(counts, rows: np.ndarray) -> np.ndarray:
    """Row weights: ``counts`` as floats, one per row, or ones."""
    if counts is None:
        return np.ones(rows.shape[0])
    counts = np.ascontiguousarray(counts, dtype=np.float64)
    if counts.shape != (rows.shape[0],):
        raise ValueError(f"expected one count per row ({rows.shape[0]}), got {counts.shape}")
    return counts


def pll_and_gradient(fs: FeatureSet, rows: np.ndarray, owner=None) -> tuple[float, np.ndarray]:
    """Summed (not mean) PLL of ``rows`` and its gradient with respect to ``fs.weights``: one
    evaluation, so by the two bitset passes, without writing entries for later ones."""
    return pll_evaluator(fs, rows, owner, list_bytes=0)(fs.weights)


def _rowwise_pll_and_gradient(fs: FeatureSet, rows: np.ndarray, owner,
                              counts) -> tuple[float, np.ndarray]:
    """:func:`pll_and_gradient` row by row (weighted by ``counts`` unless None), for variables
    with more than 64 values."""
    probs, terms = all_conditionals(fs, rows, owner)
    cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
    var_ptr, var_feats = fs.features_by_variable()
    row_weights = _counts(counts, rows)
    grad = _gradient_rows(rows, row_weights, probs, cards, value_offsets(cards), var_ptr, var_feats,
                          _owner(fs, owner), fs.weights, fs.ptr, fs.var, fs.val, fs.eq,
                          PARTIAL_SUMS)
    return float(terms.sum() if counts is None else terms.sum(axis=1) @ counts), grad
