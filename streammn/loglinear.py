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
