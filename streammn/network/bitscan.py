"""Row-bitset kernels: every conditional of every variable at once, 64 rows to a word.

Scanning every feature for every row costs O(rows x conditions). Instead, a block of 64 rows
becomes one bit per row: lits[(j, a)] is the set of rows with x_j = a (and its complement). A
feature's conditions on variable j hold on the row set H_j (one AND per condition and word),
and the feature reaches P(X_j | x_-j) exactly on the rows where every *other* variable's
conditions hold: rows where it holds outright, plus rows where j's group is the only one that
fails (tracked with "fails at least once / twice" words, which also end the scan of a feature
as soon as every row of the chunk has failed twice). The cost is O(conditions x words), 64
times less than row by row; the only per-row work left is adding weights where a feature
nearly holds, which is what the conditionals need anyway.

Used by :func:`streammn.network.loglinear.all_conditionals` (the logits of a block of rows) and by
the reach lists of weight learning (:mod:`streammn.network.reach_lists`); Gibbs sampling shares the
group structure and the bit helpers.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic
from numba.typed import Dict

from streammn.features import FeatureSet


CHUNK_WORDS = 4  # rows are processed in chunks of 64 * CHUNK_WORDS
PARTIAL_SUMS = 4  # fixed number of chunk sequences, whatever the thread count


@nb.njit(cache=True)
def lowest_bit(x):
    """Index of the lowest set bit of a non-zero uint64."""
    return np.int64(trailing_zeros(x))


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
        splat = builder.insert_element(
            ir.Constant(lanes, ir.Undefined), args[3], ir.Constant(ir.IntType(32), 0)
        )
        splat = builder.shuffle_vector(
            splat, splat, ir.Constant(ir.VectorType(ir.IntType(32), 8), [0] * 8)
        )
        zero = ir.Constant(lanes, [0.0] * 8)
        for q in range(8):
            mask, at = _lane_block(builder, data, args[1], args[2], q)
            builder.store(
                builder.fadd(builder.load(at, align=8), builder.select(mask, splat, zero)),
                at,
                align=8,
            )
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
            total = builder.fadd(
                total,
                builder.select(mask, builder.load(at, align=8), ir.Constant(lanes, [0.0] * 8)),
            )
        width = 8
        while width > 1:  # pairwise: lanes i and i + width / 2
            width //= 2
            ity = ir.VectorType(ir.IntType(32), width)
            low = builder.shuffle_vector(total, total, ir.Constant(ity, list(range(width))))
            high = builder.shuffle_vector(
                total, total, ir.Constant(ity, list(range(width, 2 * width)))
            )
            total = builder.fadd(low, high)
        return builder.extract_element(total, ir.Constant(ir.IntType(32), 0))

    return sig, codegen


@nb.njit(cache=True)
def chunk_logits(rows, start, offs, cards, groups, weights, table, words, keep):
    """Every feature against one chunk of ``64 * CHUNK_WORDS`` rows: adds its weight to the
    logits in ``table`` where it reaches a conditional, and with ``keep`` lists where as the
    chunk's *word list* (the same for any weights) for :func:`gather_words` (the gradient).
    ``table[offs[j] + a, r]`` is slot-major (adjacent rows adjacent), seen flat.

    Feature f's conditions come grouped by variable (see :func:`group_structure`). Over the
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
    b[: a.shape[0]] = a
    return b


@nb.njit(cache=True)
def new_words(n_features):
    """Empty word-list buffers for :func:`chunk_logits`."""
    return (
        np.empty(n_features, dtype=np.int32),
        np.empty(n_features, dtype=np.int64),
        np.empty(4 * n_features, dtype=np.uint64),
        np.empty(4 * n_features, dtype=np.int32),
    )


@nb.njit(cache=True)
def add_words(words, f0, f1, e0, weights, table):
    """Add listed features ``f0:f1``'s weights to the flat ``table`` at their entries' rows
    (from entry ``e0``; see :func:`chunk_logits`), in the order the list was made."""
    feats, ends, xs, at = words
    e = e0
    for i in range(f0, f1):
        wt = weights[feats[i]]
        while e < ends[i]:
            _add_at_bits(table, at[e], xs[e], wt)
            e += 1


@nb.njit(cache=True)
def gather_words(words, f0, f1, e0, table, grad):
    """Subtract from ``grad[f]`` the sum of the flat ``table`` at listed feature f's entries'
    rows, for listed features ``f0:f1`` (from entry ``e0``; see :func:`chunk_logits`)."""
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
def group_structure(ptr, var, val, eq, cards, owner):
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
                g_slot[g] = offs[j] + lowest_bit(m)
            else:
                g_slot[g] = -1
            g += 1
        gptr[f + 1] = g
    return gptr, g_start, g_end, g_var, g_mask, g_slot, code


@nb.njit(cache=True)
def group_masks(ptr, var, val, eq, cards):
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


def groups_for(fs: FeatureSet, rows: np.ndarray, cards: np.ndarray, owner: np.ndarray):
    """The bitset kernels' view of ``fs``, each feature's groups ordered rarest first on
    ``rows``: ``(gptr, g_slot, g_lit, lit_var, lit_mask)`` (see :func:`group_structure` and
    :func:`_distinct_groups`); ``owner`` as there, one entry per feature."""
    groups = group_structure(fs.ptr, fs.var, fs.val, fs.eq, cards, owner)
    offs = value_offsets(cards)
    counts = np.bincount((rows + offs[:-1].astype(np.int64)).ravel(), minlength=offs[-1])
    rate_eq = counts / max(rows.shape[0], 1)
    lit_rate = np.empty(2 * offs[-1])
    lit_rate[0::2] = rate_eq
    lit_rate[1::2] = 1.0 - rate_eq
    _order_groups(*groups, lit_rate)  # type: ignore[call-arg]  # (group_structure's 7 arrays)
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
def all_logits(rows, offs, cards, weights, groups):
    """Unnormalised conditional logits of every row, ``(n, offs[-1])``: column ``offs[j] + a``
    sums the weights of the features reaching variable j's conditional at value a (``groups``
    from :func:`groups_for`), chunk by chunk (:func:`chunk_logits`) in ``PARTIAL_SUMS``
    parallel sequences."""
    n = rows.shape[0]
    n_slots = offs[-1]
    logits = np.empty((n, n_slots))
    chunk = 64 * CHUNK_WORDS
    n_chunks = (n + chunk - 1) // chunk
    for b in nb.prange(PARTIAL_SUMS):  # chunk sequences, each reusing its buffers
        table = np.empty((n_slots, chunk))
        words = new_words(weights.shape[0])
        for k in range(b, n_chunks, PARTIAL_SUMS):
            table[:] = 0.0
            chunk_logits(
                rows, k * chunk, offs, cards, groups, weights, table.reshape(-1), words, False
            )
            for r in range(min(chunk, n - k * chunk)):
                for s in range(n_slots):
                    logits[k * chunk + r, s] = table[s, r]
    return logits


def value_offsets(cardinalities) -> np.ndarray:
    """``offs[j]``: the first column of variable j's values in a (rows, sum of cards) table."""
    return np.concatenate([[0], np.cumsum(cardinalities)]).astype(np.int64)
