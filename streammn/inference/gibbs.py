"""Gibbs sampling over weighted conjunctive features (Markov networks and dependency networks).

A model is read through its conditionals only: for each variable ``j`` a list of features whose
summed weights at ``x_j = a`` give ``log P(X_j = a | x_-j)`` up to a constant. For a Markov
network that list is every feature mentioning ``X_j``; for a dependency network it is the
features of CPD ``j`` (Gibbs sampling on a DN's conditionals defines the DN's joint
distribution). One numba kernel serves sampling and Rao-Blackwellised marginals.

Randomness: each chain owns a splitmix64 stream seeded from a numpy ``SeedSequence`` of the
caller's seed, so results do not depend on how chains are spread over threads.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.dn import DependencyNetwork
from streammn.features import FeatureSet
from streammn.loglinear import _add_feature_logits, value_offsets
from streammn.model import MarkovNetwork


class InferenceError(ValueError):
    """Bad inference arguments (evidence shape or values, sample counts)."""


def conditional_structure(model) -> tuple[FeatureSet, np.ndarray, np.ndarray, np.ndarray]:
    """``(features, var_ptr, var_feats, owner)`` defining every conditional of ``model``.

    ``owner[f]`` is ``-1`` for MN features (they count for every variable they mention) and the
    CPD index for DN features (see :func:`streammn.loglinear.all_conditionals`).
    """
    if isinstance(model, MarkovNetwork):
        var_ptr, var_feats = model.index
        return model.features, var_ptr, var_feats, np.full(model.n_features, -1, np.int64)
    if isinstance(model, DependencyNetwork):
        var_ptr, var_feats = model._index
        owner = np.repeat(np.arange(model.schema.n_vars), np.diff(var_ptr))
        return model._all, var_ptr, var_feats, owner
    raise TypeError(f"expected a MarkovNetwork or DependencyNetwork, got {type(model).__name__}")


def chain_seeds(seed, n: int, *key) -> np.ndarray:
    """``n`` independent uint64 chain seeds derived from ``seed`` (and an optional key path)."""
    ss = np.random.SeedSequence([int(seed)] + [int(k) for k in key])
    return ss.generate_state(n, dtype=np.uint64)


@nb.njit(cache=True)
def _next(state):
    """splitmix64: advance ``state[0]`` and return a uniform float in [0, 1)."""
    state[0] += np.uint64(0x9E3779B97F4A7C15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@nb.njit(cache=True)
def _conditional(x, j, card, var_ptr, var_feats, weights, ptr, var, val, eq, logits, allowed,
                 probs):
    """probs[:card] = P(X_j = . | x_-j)."""
    for a in range(card):
        logits[a] = 0.0
    for k in range(var_ptr[j], var_ptr[j + 1]):
        _add_feature_logits(x, j, card, var_feats[k], weights, ptr, var, val, eq, logits,
                            allowed)
    m = logits[0]
    for a in range(1, card):
        m = max(m, logits[a])
    s = 0.0
    for a in range(card):
        probs[a] = np.exp(logits[a] - m)
        s += probs[a]
    for a in range(card):
        probs[a] /= s


@nb.njit(cache=True)
def _draw(probs, card, state):
    u = _next(state)
    acc = 0.0
    for a in range(card - 1):
        acc += probs[a]
        if u < acc:
            return a
    return card - 1


@nb.njit(cache=True)
def _chain(x, free, cards, offs, sweeps, record_from, var_ptr, var_feats, weights, ptr, var, val,
           eq, state, acc):
    """Run ``sweeps`` Gibbs sweeps over the ``free`` variables of ``x`` (in place).

    From sweep ``record_from`` on, the conditional of every resampled variable is added to
    ``acc[offs[j] + a]`` before the new value is drawn (Rao-Blackwellisation).
    """
    max_card = 0
    for j in range(cards.shape[0]):
        max_card = max(max_card, cards[j])
    logits = np.empty(max_card)
    probs = np.empty(max_card)
    allowed = np.empty(max_card, dtype=np.bool_)
    for s in range(sweeps):
        for k in range(free.shape[0]):
            j = free[k]
            card = cards[j]
            _conditional(x, j, card, var_ptr, var_feats, weights, ptr, var, val, eq, logits,
                         allowed, probs)
            if s >= record_from:
                for a in range(card):
                    acc[offs[j] + a] += probs[a]
            x[j] = _draw(probs, card, state)


@nb.njit(cache=True, parallel=True)
def _marginals(evidence, cards, offs, burn_in, samples, chains, seeds, var_ptr, var_feats,
               weights, ptr, var, val, eq):
    m, n = evidence.shape
    acc = np.zeros((m * chains, offs[-1]))
    for job in nb.prange(m * chains):
        r = job // chains
        state = np.empty(1, dtype=np.uint64)
        state[0] = seeds[job]
        x = np.empty(n, dtype=np.uint8)
        n_free = 0
        for j in range(n):
            if evidence[r, j] < 0:
                n_free += 1
        free = np.empty(n_free, dtype=np.int64)
        k = 0
        for j in range(n):
            if evidence[r, j] < 0:
                free[k] = j
                k += 1
                x[j] = min(int(_next(state) * cards[j]), cards[j] - 1)
            else:
                x[j] = evidence[r, j]
        _chain(x, free, cards, offs, burn_in + samples, burn_in, var_ptr, var_feats, weights,
               ptr, var, val, eq, state, acc[job])
    out = np.zeros((m, offs[-1]))
    for job in range(m * chains):
        out[job // chains] += acc[job]
    for r in range(m):
        for j in range(n):
            if evidence[r, j] < 0:
                for a in range(cards[j]):
                    out[r, offs[j] + a] /= samples * chains
            else:
                out[r, offs[j] + evidence[r, j]] = 1.0
    return out


@nb.njit(cache=True, parallel=True)
def _sample(n_chains, per_chain, burn_in, thin, seeds, cards, var_ptr, var_feats, weights, ptr,
            var, val, eq):
    n = cards.shape[0]
    out = np.empty((n_chains * per_chain, n), dtype=np.uint8)
    offs = np.zeros(n + 1, dtype=np.int64)
    free = np.arange(n)
    for c in nb.prange(n_chains):
        state = np.empty(1, dtype=np.uint64)
        state[0] = seeds[c]
        dummy = np.zeros(0)
        x = np.empty(n, dtype=np.uint8)
        for j in range(n):
            x[j] = min(int(_next(state) * cards[j]), cards[j] - 1)
        _chain(x, free, cards, offs, burn_in, burn_in + 1, var_ptr, var_feats, weights, ptr,
               var, val, eq, state, dummy)
        for t in range(per_chain):
            _chain(x, free, cards, offs, thin, thin + 1, var_ptr, var_feats, weights, ptr, var,
                   val, eq, state, dummy)
            out[t * n_chains + c] = x
    return out


def _check_counts(**kw):
    for name, v in kw.items():
        if int(v) != v or v < (0 if name == "burn_in" else 1):
            raise InferenceError(f"{name} must be a {'non-negative' if name == 'burn_in' else 'positive'}"
                                 f" integer, got {v!r}")


def gibbs_marginals(model, evidence, burn_in: int = 100, samples: int = 1000, chains: int = 1,
                    seed: int = 0) -> np.ndarray:
    """Rao-Blackwellised single-variable marginals given evidence, for each evidence row.

    ``evidence`` is an int array ``(m, n_vars)`` with ``-1`` for unobserved variables. Each row
    runs ``chains`` chains from a uniformly random completion of its evidence, ``burn_in``
    sweeps then ``samples`` sweeps whose conditionals are averaged. Returns ``(m, sum of
    cardinalities)``: ``out[r, offs[j] + a] = P(X_j = a | evidence_r)`` with ``offs`` from
    :func:`streammn.loglinear.value_offsets` (one-hot for observed variables).
    """
    _check_counts(burn_in=burn_in, samples=samples, chains=chains)
    fs, var_ptr, var_feats, _ = conditional_structure(model)
    cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
    ev = np.asarray(evidence)
    if ev.ndim != 2 or ev.shape[1] != cards.shape[0]:
        raise InferenceError(f"evidence must have shape (m, {cards.shape[0]}), got {ev.shape}")
    ev = np.ascontiguousarray(ev, dtype=np.int16)
    if ((ev >= cards) | (ev < -1)).any():
        raise InferenceError("evidence values must be -1 (unobserved) or a valid state")
    seeds = chain_seeds(seed, ev.shape[0] * chains)
    return _marginals(ev, cards, value_offsets(cards), int(burn_in), int(samples), int(chains),
                      seeds, var_ptr, var_feats, fs.weights, fs.ptr, fs.var, fs.val, fs.eq)


def sample_chains(model, n: int, chains: int, burn_in: int, thin: int, seeds) -> np.ndarray:
    """``n`` rows from ``chains`` chains (row ``t * chains + c`` is chain c's t-th sample)."""
    _check_counts(n=n, chains=chains, burn_in=burn_in, thin=thin)
    fs, var_ptr, var_feats, _ = conditional_structure(model)
    cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
    per_chain = -(-int(n) // int(chains))
    out = _sample(int(chains), per_chain, int(burn_in), int(thin),
                  np.ascontiguousarray(seeds, dtype=np.uint64), cards, var_ptr, var_feats,
                  fs.weights, fs.ptr, fs.var, fs.val, fs.eq)
    return out[:n]


def sample(model, n: int, seed: int = 0, burn_in: int = 100, thin: int = 1,
           chains: int = 16) -> np.ndarray:
    """``n`` rows drawn by Gibbs sampling: ``chains`` independent chains, each started uniformly
    at random, ``burn_in`` sweeps discarded, then one row every ``thin`` sweeps."""
    chains = max(1, min(int(chains), int(n)))
    return sample_chains(model, n, chains, burn_in, thin, chain_seeds(seed, chains))
