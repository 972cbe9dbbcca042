"""Numba kernels that evaluate weighted conjunctive features on whole batches of rows.

These are the hot loops shared by dependency networks (one feature set per variable) and Markov
networks (one feature set for the model): the unnormalised log score of each row, and for a
variable ``i`` the logits of ``P(X_i = a | x_-i)`` for every value ``a``: the summed weights of
the features that mention ``X_i``, evaluated with ``x_i`` replaced by ``a``. Normalising those
logits gives the conditional distribution used by pseudo-likelihood, Gibbs sampling and DN
scoring.

Row by row here (the simple kernels, and the fallbacks for variables with more than 64 values);
every conditional of a block of rows at once by the row-bitset kernels of
:mod:`streammn.network.bitscan` (:func:`all_conditionals`). The PLL and gradient of weight learning
are in :mod:`streammn.network.reach_lists`.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.network.bitscan import all_logits, groups_for, value_offsets
from streammn.features import FeatureSet
from streammn.errors import ModelError


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
def add_feature_logits(row, i, card, f, weights, ptr, var, val, eq, logits, allowed):
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
            add_feature_logits(
                rows[r], i, card, feats[k], weights, ptr, var, val, eq, out[r], allowed
            )
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
                add_feature_logits(
                    rows[r], i, card, var_feats[k], weights, ptr, var, val, eq, logits, allowed
                )
            m = logits[0]
            for a in range(1, card):
                m = max(m, logits[a])
            s = 0.0
            for a in range(card):
                s += np.exp(logits[a] - m)
            out[r, i] = logits[rows[r, i]] - m - np.log(s)
    return out


def checked_rows(rows: np.ndarray, fs: FeatureSet) -> np.ndarray:
    """``rows`` as a C-contiguous ``uint8`` array, checked to have one column per variable of
    ``fs``'s schema (:class:`~streammn.errors.ModelError`, a ``ValueError``, otherwise)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    if rows.ndim != 2 or rows.shape[1] != fs.schema.n_vars:
        raise ModelError(f"expected rows of shape (n, {fs.schema.n_vars}), got {rows.shape}")
    return rows


def log_scores(fs: FeatureSet, rows: np.ndarray) -> np.ndarray:
    """Sum of the weights of the features each row satisfies (unnormalised log probability)."""
    rows = checked_rows(rows, fs)
    return _log_scores(rows, fs.weights, fs.ptr, fs.var, fs.val, fs.eq)


def conditional_logits(
    fs: FeatureSet, rows: np.ndarray, i: int, features: np.ndarray | None = None
) -> np.ndarray:
    """Unnormalised ``log P(X_i = a | x_-i)`` for each row and value ``a``: shape (n, card_i).

    ``features`` restricts the sum to the given feature indices (default: every feature that
    mentions ``X_i``, which gives the same conditional as the whole model).
    """
    rows = checked_rows(rows, fs)
    if features is None:
        var_ptr, var_feats = fs.features_by_variable()
        features = var_feats[var_ptr[i] : var_ptr[i + 1]]
    card = int(fs.schema.cardinalities[i])
    return _conditional_logits(
        rows,
        int(i),
        card,
        np.ascontiguousarray(features, dtype=np.int64),
        fs.weights,
        fs.ptr,
        fs.var,
        fs.val,
        fs.eq,
    )


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
    rows = checked_rows(rows, fs)
    var_ptr, var_feats = index if index is not None else fs.features_by_variable()
    return _pll_terms(
        rows, fs.schema.cardinalities, var_ptr, var_feats, fs.weights, fs.ptr, fs.var, fs.val, fs.eq
    )


def pll(fs: FeatureSet, rows: np.ndarray) -> float:
    """Pseudo-log-likelihood per example: mean over rows of ``sum_i log P(x_i | x_-i)``."""
    terms = pll_terms(fs, rows)
    return float(terms.sum(axis=1).mean()) if terms.shape[0] else float("nan")


@nb.njit(cache=True, parallel=True)
def _normalise(logits, rows, offs, cards):
    """Turn logits into conditionals in place; return log P(x_j | x_-j) per row and variable."""
    n, n_vars = rows.shape
    terms = np.empty((n, n_vars))
    for r in nb.prange(n):
        for j in range(n_vars):
            terms[r, j] = normalise_variable(logits[r], offs[j], cards[j], rows[r, j])
    return terms


@nb.njit(cache=True)
def normalise_variable(logits, o, card, x):
    """Turn ``logits[o:o + card]`` into probabilities in place; return the log probability of
    value ``x`` (finite even where the exponential underflows)."""
    if card == 2:
        z, e = binary_conditional(logits, o, x)
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
def binary_conditional(logits, o, x):
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
                    add_feature_logits(
                        rows[r],
                        j,
                        cards[j],
                        f,
                        weights,
                        ptr,
                        var,
                        val,
                        eq,
                        out[r, offs[j] : offs[j + 1]],
                        allowed,
                    )
    return out


@nb.njit(cache=True, parallel=True)
def gradient_rows(
    rows,
    counts,
    probs,
    cards,
    offs,
    var_ptr,
    var_feats,
    owner,
    weights,
    ptr,
    var,
    val,
    eq,
    n_blocks,
):
    """Gradient of the PLL of ``rows`` (row ``r`` weighted by ``counts[r]``) with respect to
    ``weights``, row by row from the conditionals ``probs`` (columns at ``offs``), summed over
    ``n_blocks`` parallel blocks (the row-by-row path, for variables with more than
    ``MASK_VALUES`` values)."""
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
                    add_feature_logits(
                        rows[r], j, cards[j], f, unit, ptr, var, val, eq, ind, allowed
                    )
                    d = ind[rows[r, j]]
                    for a in range(cards[j]):
                        d -= ind[a] * probs[r, offs[j] + a]
                    grads[blk, f] += counts[r] * d
    out = np.zeros(weights.shape[0])
    for blk in range(n_blocks):
        out += grads[blk]
    return out


def feature_owners(fs: FeatureSet, owner) -> np.ndarray:
    """``owner`` as an ``int64`` array (see :func:`all_conditionals`), or ``-1`` for every
    feature (each counts for every variable it mentions) when it is ``None``."""
    if owner is None:
        return np.full(fs.n_features, -1, dtype=np.int64)
    return np.ascontiguousarray(owner, dtype=np.int64)


def row_kernel_features(
    fs: FeatureSet, owner
) -> tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]:
    """``(var_ptr, var_feats, owners, weights, ptr, var, val, eq)``: the feature arrays the
    row-by-row kernels (:func:`_logits_rows`, :func:`gradient_rows`) take, in their order.

    One place builds them so the kernels' callers (here and :mod:`streammn.network.reach_lists`) do
    not each spell out the same eight arguments."""
    var_ptr, var_feats = fs.features_by_variable()
    owners = feature_owners(fs, owner)
    return var_ptr, var_feats, owners, fs.weights, fs.ptr, fs.var, fs.val, fs.eq


def all_conditionals(fs: FeatureSet, rows: np.ndarray, owner=None) -> tuple[np.ndarray, np.ndarray]:
    """Every conditional of every row at once, by the row-bitset kernel (row by row when a
    variable has more than 64 values), computed once per distinct row.

    Returns ``(probs, terms)``: ``probs[r, offs[j] + a] = P(X_j = a | x_-j)`` (columns laid out
    by :func:`value_offsets`) and ``terms[r, j] = log P(x_j | x_-j)``. ``owner[f] = j`` makes
    feature f count only for variable j's conditional (dependency networks); ``-1`` or no
    ``owner`` means every variable it mentions (Markov networks).
    """
    rows = checked_rows(rows, fs)
    cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
    offs = value_offsets(cards)
    patterns, inverse = distinct_rows(rows)  # equal rows have equal conditionals
    if cards.max() > MASK_VALUES:
        logits = _logits_rows(patterns, cards, offs, *row_kernel_features(fs, owner))
    else:
        logits = all_logits(
            patterns,
            offs,
            cards,
            fs.weights,
            groups_for(fs, patterns, cards, feature_owners(fs, owner)),
        )
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
