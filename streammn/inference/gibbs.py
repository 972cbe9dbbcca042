"""Gibbs sampling over weighted conjunctive features (Markov networks and dependency networks).

A model is read through its conditionals only: for each variable ``j`` a list of features whose
summed weights at ``x_j = a`` give ``log P(X_j = a | x_-j)`` up to a constant. For a Markov
network that list is every feature mentioning ``X_j``; for a dependency network it is the
features of CPD ``j`` (Gibbs sampling on a DN's conditionals defines the DN's joint
distribution). Three numba kernels: independent chains for sampling; and for Rao-Blackwellised
marginals (CMLL runs one chain per test row and query group), either a lookup table of every
conditional (small state spaces) or chains run in lockstep, 64 per machine word, so that each
feature is tested against 64 chains with one AND per condition.

Randomness: each chain owns a splitmix64 stream seeded from a numpy ``SeedSequence`` of the
caller's seed and draws from it as :mod:`streammn.inference.draws` describes, so results do not
depend on how chains are spread over threads.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numba as nb
import numpy as np

from streammn.network import loglinear
from streammn.network.bitscan import group_masks, lowest_bit, value_offsets
from streammn.dn import DependencyNetwork
from streammn.features import FeatureSet
from streammn.inference.draws import draw, draw_from, next_at
from streammn.inference.incremental import chain_recorder, incremental_marginals
from streammn.network.loglinear import add_feature_logits
from streammn.network.model import MarkovNetwork
from streammn.errors import InferenceError, InferenceTypeError


BLOCK_WORDS = 4  # lockstep marginal chains run in blocks of 64 * BLOCK_WORDS
TABLE_STATES = 2**18  # largest state space whose conditionals are tabulated
PROGRESS_ROWS = 512  # evidence rows a block of gibbs_marginals runs between progress reports


def conditional_structure(model) -> tuple[FeatureSet, np.ndarray, np.ndarray, np.ndarray]:
    """``(features, var_ptr, var_feats, owner)`` defining every conditional of ``model``.

    ``owner[f]`` is ``-1`` for MN features (they count for every variable they mention) and the
    CPD index for DN features (see :func:`streammn.network.loglinear.all_conditionals`).
    """
    if isinstance(model, MarkovNetwork):
        var_ptr, var_feats = model.index
        return model.features, var_ptr, var_feats, np.full(model.n_features, -1, np.int64)
    if isinstance(model, DependencyNetwork):
        var_ptr, var_feats = model._index
        owner = np.repeat(np.arange(model.schema.n_vars), np.diff(var_ptr))
        return model._all, var_ptr, var_feats, owner
    raise InferenceTypeError(
        f"expected a MarkovNetwork or DependencyNetwork, got {type(model).__name__}"
    )


def chain_seeds(seed, n: int, *key) -> np.ndarray:
    """``n`` independent uint64 chain seeds derived from ``seed`` (and an optional key path)."""
    ss = np.random.SeedSequence([int(seed)] + [int(k) for k in key])
    return ss.generate_state(n, dtype=np.uint64)


@nb.njit(cache=True)
def _conditional_logits(
    x, j, card, var_ptr, var_feats, weights, ptr, var, val, eq, logits, allowed
):
    """logits[:card] = log P(X_j = . | x_-j) up to a constant."""
    for a in range(card):
        logits[a] = 0.0
    for k in range(var_ptr[j], var_ptr[j + 1]):
        add_feature_logits(x, j, card, var_feats[k], weights, ptr, var, val, eq, logits, allowed)


@nb.njit(cache=True)
def _chain(x, cards, sweeps, var_ptr, var_feats, weights, ptr, var, val, eq, state):
    """Run ``sweeps`` Gibbs sweeps over every variable of the state ``x`` (in place)."""
    max_card = 0
    for j in range(cards.shape[0]):
        max_card = max(max_card, cards[j])
    logits = np.empty(max_card)
    probs = np.empty(max_card)
    allowed = np.empty(max_card, dtype=np.bool_)
    for s in range(sweeps):
        for j in range(cards.shape[0]):
            card = cards[j]
            _conditional_logits(
                x, j, card, var_ptr, var_feats, weights, ptr, var, val, eq, logits, allowed
            )
            x[j] = draw(logits, 0, card, probs, state, 0)


@nb.njit(cache=True)
def _set_literals(lits, X, j, o, card, valid, n_words, n_chains):
    """Rebuild the chain bitsets of variable j's literals from the states X[:, j]."""
    for a in range(card):
        for w in range(n_words):
            lits[2 * (o + a), w] = np.uint64(0)
    for c in range(n_chains):
        lits[2 * (o + X[c, j]), c >> 6] |= np.uint64(1) << np.uint64(c & 63)
    for a in range(card):
        for w in range(n_words):
            lits[2 * (o + a) + 1, w] = valid[w] & ~lits[2 * (o + a), w]


@nb.njit(cache=True)
def _block_plan(free, lits, n_words, var_ptr, var_feats, ptr, var, code, allowed):
    """The features each conditional of a block of chains needs, with the evidence applied once.

    A variable observed on every chain of the block ("static") keeps its literal bitsets for
    the whole run, so each feature's conditions on static variables are ANDed here once, into
    ``plan_static[e]`` (with the chains where X_j is free); a feature that fails them on every
    chain is left out, and a sweep ANDs only the conditions on the other variables
    (``plan_dyn``). Features keep their order, so the logits are the same sums as without the
    plan. Entries ``plan_ptr[j]:plan_ptr[j+1]`` belong to X_j's conditional.
    """
    n = free.shape[0]
    static = np.ones(n, dtype=np.bool_)
    for j in range(n):
        for w in range(n_words):
            if free[j, w] != 0:
                static[j] = False
    size = var_feats.shape[0]
    n_dyn = 0
    for j in range(n):
        if not static[j]:
            for k in range(var_ptr[j], var_ptr[j + 1]):
                n_dyn += ptr[var_feats[k] + 1] - ptr[var_feats[k]]
    plan_ptr = np.zeros(n + 1, dtype=np.int64)
    plan_f = np.empty(size, dtype=np.int64)
    plan_jm = np.empty(size, dtype=np.uint64)
    plan_static = np.empty((size, n_words), dtype=np.uint64)
    plan_dyn_ptr = np.zeros(size + 1, dtype=np.int64)
    plan_dyn = np.empty(n_dyn, dtype=np.int64)
    e = 0
    d = 0
    for j in range(n):
        plan_ptr[j] = e
        if static[j]:
            continue
        for k in range(var_ptr[j], var_ptr[j + 1]):
            f = var_feats[k]
            jm = np.uint64(0)
            for c in range(ptr[f], ptr[f + 1]):
                if var[c] == j:
                    jm = allowed[c]
                    break
            if jm == 0:
                continue  # no test on X_j: the same for every value, cancels
            alive = np.uint64(0)
            for w in range(n_words):
                h = free[j, w]
                for c in range(ptr[f], ptr[f + 1]):
                    if h == 0:
                        break
                    if var[c] != j and static[var[c]]:
                        h &= lits[code[c], w]
                plan_static[e, w] = h
                alive |= h
            if alive == 0:
                continue
            plan_f[e] = f
            plan_jm[e] = jm
            for c in range(ptr[f], ptr[f + 1]):
                if var[c] != j and not static[var[c]]:
                    plan_dyn[d] = code[c]
                    d += 1
            e += 1
            plan_dyn_ptr[e] = d
    plan_ptr[n] = e
    return plan_ptr, plan_f, plan_jm, plan_static, plan_dyn_ptr, plan_dyn


@nb.njit(cache=True)
def _marginal_block(evidence, c0, n_words, cards, offs, burn_in, samples, seeds, features, acc):
    """Gibbs chains ``c0 .. c0 + 64 n_words`` in lockstep, one bit per chain.

    For each variable j, every feature of j's conditional is tested against all chains at once:
    its conditions on other variables are ANDed over the chains' literal bitsets (stopping at the
    first empty word) and its weight added to the logits of the values of X_j it allows, on the
    chains where it survives. Chains where X_j is evidence are masked out. Conditions on
    variables observed in every chain of the block are applied once (:func:`_block_plan`).

    ``features`` is the tuple ``(var_ptr, var_feats, weights, ptr, var, code, allowed)`` built
    by :func:`gibbs_marginals` and passed through :func:`_marginals` as one argument, unpacked
    here once per block.
    """
    var_ptr, var_feats, weights, ptr, var, code, allowed = features
    m, n = evidence.shape
    width = 64 * n_words
    nc = min(width, m - c0)
    n_slots = offs[-1]
    X = np.zeros((width, n), dtype=np.uint8)
    free = np.zeros((n, n_words), dtype=np.uint64)
    valid = np.zeros(n_words, dtype=np.uint64)
    states = seeds[c0 : c0 + nc].copy()
    for c in range(nc):
        valid[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
        for j in range(n):
            e = evidence[c0 + c, j]
            if e < 0:
                free[j, c >> 6] |= np.uint64(1) << np.uint64(c & 63)
                X[c, j] = min(int(next_at(states, c) * cards[j]), cards[j] - 1)
            else:
                X[c, j] = e
    lits = np.zeros((2 * n_slots, n_words), dtype=np.uint64)
    for j in range(n):
        _set_literals(lits, X, j, offs[j], cards[j], valid, n_words, nc)
    plan_ptr, plan_f, plan_jm, plan_static, plan_dyn_ptr, plan_dyn = _block_plan(
        free, lits, n_words, var_ptr, var_feats, ptr, var, code, allowed
    )
    max_card = 0
    for j in range(n):
        max_card = max(max_card, cards[j])
    logits = np.zeros((max_card, width))
    column = np.empty(max_card)  # one chain's logits, for the draw
    p = np.empty(max_card)
    for s in range(burn_in + samples):
        for j in range(n):
            any_free = np.uint64(0)
            for w in range(n_words):
                any_free |= free[j, w]
            if any_free == 0:
                continue
            card = cards[j]
            o = offs[j]
            for a in range(card):
                for c in range(nc):
                    logits[a, c] = 0.0
            for e in range(plan_ptr[j], plan_ptr[j + 1]):
                jm = plan_jm[e]
                wt = weights[plan_f[e]]
                for w in range(n_words):
                    h = plan_static[e, w]
                    for d in range(plan_dyn_ptr[e], plan_dyn_ptr[e + 1]):
                        if h == 0:
                            break
                        h &= lits[plan_dyn[d], w]
                    if h == 0:
                        continue
                    for a in range(card):
                        if (jm >> np.uint64(a)) & np.uint64(1):
                            x = h
                            while x != 0:
                                logits[a, 64 * w + lowest_bit(x)] += wt
                                x &= x - np.uint64(1)
            for w in range(n_words):
                x = free[j, w]
                while x != 0:
                    c = 64 * w + lowest_bit(x)
                    x &= x - np.uint64(1)
                    for a in range(card):
                        column[a] = logits[a, c]
                    X[c, j] = draw(column, 0, card, p, states, c)
                    if s >= burn_in:
                        for a in range(card):
                            acc[c0 + c, o + a] += p[a]
            _set_literals(lits, X, j, o, card, valid, n_words, nc)


@nb.njit(cache=True, parallel=True)
def _marginals(evidence, cards, offs, burn_in, samples, seeds, features):
    m = evidence.shape[0]
    width = 64 * BLOCK_WORDS
    n_blocks = (m + width - 1) // width
    acc = np.zeros((m, offs[-1]))
    for blk in nb.prange(n_blocks):
        _marginal_block(
            evidence, blk * width, BLOCK_WORDS, cards, offs, burn_in, samples, seeds, features, acc
        )
    return acc


@nb.njit(cache=True, parallel=True)
def _marginals_table(evidence, cards, offs, strides, table, burn_in, samples, seeds):
    """Gibbs chains reading every conditional from ``table[state code, offs[j] + a]``."""
    m, n = evidence.shape
    n_slots = offs[-1]
    flat = table.reshape(-1)
    acc = np.zeros((m, n_slots))
    for c in nb.prange(m):
        states = seeds[c : c + 1].copy()
        x = np.empty(n, dtype=np.int64)
        code = 0
        for j in range(n):
            e = evidence[c, j]
            x[j] = min(int(next_at(states, 0) * cards[j]), cards[j] - 1) if e < 0 else e
            code += x[j] * strides[j]
        for s in range(burn_in + samples):
            for j in range(n):
                if evidence[c, j] >= 0:
                    continue
                at = code * n_slots + offs[j]  # table[code, offs[j]]
                if s >= burn_in:
                    for a in range(cards[j]):
                        acc[c, offs[j] + a] += flat[at + a]
                v = draw_from(flat, at, cards[j], states, 0)
                code += (v - x[j]) * strides[j]
                x[j] = v
    return acc


@nb.njit(cache=True, parallel=True)
def _sample(
    n_chains, per_chain, burn_in, thin, seeds, cards, var_ptr, var_feats, weights, ptr, var, val, eq
):
    n = cards.shape[0]
    out = np.empty((n_chains * per_chain, n), dtype=np.uint8)
    for c in nb.prange(n_chains):
        state = seeds[c : c + 1].copy()
        x = np.empty(n, dtype=np.uint8)
        for j in range(n):
            x[j] = min(int(next_at(state, 0) * cards[j]), cards[j] - 1)
        _chain(x, cards, burn_in, var_ptr, var_feats, weights, ptr, var, val, eq, state)
        for t in range(per_chain):
            _chain(x, cards, thin, var_ptr, var_feats, weights, ptr, var, val, eq, state)
            out[t * n_chains + c] = x
    return out


@nb.njit(cache=True)
def uniform_starts(states, cards):
    """A uniformly random state per chain, drawn from (and advancing) its stream."""
    X = np.empty((states.shape[0], cards.shape[0]), dtype=np.uint8)
    for c in range(states.shape[0]):
        for j in range(cards.shape[0]):
            X[c, j] = min(int(next_at(states, c) * cards[j]), cards[j] - 1)
    return X


@nb.njit(cache=True, parallel=True)
def _record(X, states, sweeps, every, cards, var_ptr, var_feats, weights, ptr, var, val, eq):
    """Run ``sweeps`` Gibbs sweeps on each chain ``X[c]`` (its stream ``states[c]``), both
    updated in place, and return the state after every ``every``-th sweep:
    ``out[t, c] = X[c]`` after sweep ``(t + 1) * every``."""
    n_chains, n = X.shape
    out = np.empty((sweeps // every, n_chains, n), dtype=np.uint8)
    for c in nb.prange(n_chains):
        state = states[c : c + 1].copy()
        x = X[c].copy()
        for t in range(sweeps // every):
            _chain(x, cards, every, var_ptr, var_feats, weights, ptr, var, val, eq, state)
            out[t, c] = x
        _chain(x, cards, sweeps % every, var_ptr, var_feats, weights, ptr, var, val, eq, state)
        X[c] = x
        states[c] = state[0]
    return out


@nb.njit(cache=True, parallel=True)
def _record_table(X, states, sweeps, every, cards, offs, strides, table):
    """:func:`_record` reading every conditional from ``table[state code, offs[j] + a]``."""
    n_chains, n = X.shape
    n_slots = offs[-1]
    flat = table.reshape(-1)
    out = np.empty((sweeps // every, n_chains, n), dtype=np.uint8)
    for c in nb.prange(n_chains):
        state = states[c : c + 1].copy()
        x = X[c].copy()
        code = 0
        for j in range(n):
            code += x[j] * strides[j]
        for s in range(sweeps):
            for j in range(n):
                v = draw_from(flat, code * n_slots + offs[j], cards[j], state, 0)
                code += (v - x[j]) * strides[j]
                x[j] = v
            if (s + 1) % every == 0:
                out[(s + 1) // every - 1, c] = x
        X[c] = x
        states[c] = state[0]
    return out


class Recorder(NamedTuple):
    """Chains of one model, as :func:`recorder` builds them.

    ``run(X, states, sweeps, every)`` runs ``sweeps`` Gibbs sweeps on each chain ``X[c]``
    (uint8 states; its stream ``states[c]``; both updated in place, so a later call continues
    the chains) and returns the state after every ``every``-th sweep, ``(sweeps // every,
    chains, n_vars)``. ``sweep_cost`` is a rough cost of one chain's sweep, in nanoseconds of
    one core, for cutting long runs into calls of about a second (progress between calls)."""

    cards: np.ndarray
    run: Callable
    sweep_cost: float


def recorder(model) -> Recorder:
    """The chains of ``model``: :func:`_record_table` when its joint states are few enough to
    tabulate every conditional once (``TABLE_STATES``), else for a Markov network with finite
    weights the incremental chains (:func:`~streammn.inference.incremental.chain_recorder`),
    else :func:`_record`. A chain's path does not depend on which (up to rounding)."""
    fs, var_ptr, var_feats, owner = conditional_structure(model)
    cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
    n_states = int(np.prod(cards.astype(object)))
    conditions = int(fs.ptr[-1])
    if n_states > TABLE_STATES and isinstance(model, MarkovNetwork):
        if np.isfinite(fs.weights).all():
            return Recorder(cards, chain_recorder(fs, cards), 10.0 * cards.size + 2.0 * conditions)
    if n_states > TABLE_STATES:
        kernel = (cards, var_ptr, var_feats, fs.weights, fs.ptr, fs.var, fs.val, fs.eq)
        # each conditional tests every condition of every feature of its variable
        cost = 10.0 * cards.size + conditions * conditions / max(1, fs.n_features)
        return Recorder(
            cards, lambda X, states, sweeps, every: _record(X, states, sweeps, every, *kernel), cost
        )
    rows = np.stack(np.unravel_index(np.arange(n_states), tuple(cards)), axis=1)
    table = loglinear.all_conditionals(fs, np.ascontiguousarray(rows, np.uint8), owner=owner)[0]
    strides = np.ascontiguousarray(np.append(np.cumprod(cards[::-1])[::-1][1:], 1), np.int64)
    offs = value_offsets(cards)

    def run(X, states, sweeps, every):
        return _record_table(X, states, sweeps, every, cards, offs, strides, table)

    return Recorder(cards, run, 10.0 * cards.size)


def check_counts(**kw):
    for name, v in kw.items():
        if int(v) != v or v < (0 if name == "burn_in" else 1):
            raise InferenceError(
                f"{name} must be a {'non-negative' if name == 'burn_in' else 'positive'}"
                f" integer, got {v!r}"
            )


def _evidence(evidence, schema) -> np.ndarray:
    """Evidence rows as ``int16`` with -1 for unobserved; every observed value is validated
    against ``schema`` like any row (a SchemaError naming the row and column)."""
    ev = np.asarray(evidence)
    unobserved = ev == -1
    rows = schema.validate(np.where(unobserved, 0, ev), source="evidence")
    out = rows.astype(np.int16)
    out[unobserved] = -1
    return out


def gibbs_marginals(
    model,
    evidence,
    burn_in: int = 100,
    samples: int = 1000,
    chains: int = 1,
    seed: int = 0,
    method: str = "auto",
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Rao-Blackwellised single-variable marginals given evidence, for each evidence row.

    ``evidence`` is an int array ``(m, n_vars)`` with ``-1`` for unobserved variables. Each row
    runs ``chains`` chains from a uniformly random completion of its evidence, ``burn_in``
    sweeps then ``samples`` sweeps whose conditionals are averaged. Returns ``(m, sum of
    cardinalities)``: ``out[r, offs[j] + a] = P(X_j = a | evidence_r)`` with ``offs`` from
    :func:`streammn.network.loglinear.value_offsets` (one-hot for observed variables).

    ``method``: ``'table'`` precomputes every conditional of every joint state once (small
    models: at most ``TABLE_STATES`` states) so that each Gibbs step is a lookup; ``'bitset'``
    runs the chains in lockstep, 64 per machine word, evaluating the features of each
    conditional against all chains at once; ``'incremental'`` (Markov networks only) reduces
    the model to each chain's free variables and updates conditionals only when a value changes
    (:mod:`streammn.inference.incremental`); ``'auto'`` (default) picks the table when it fits,
    else ``'incremental'`` for a Markov network and ``'bitset'`` for a dependency network.

    ``progress``, when given, is called with the number of evidence rows finished as blocks of
    :data:`PROGRESS_ROWS` finish (every chain has its own seed, so blocks give the same
    marginals as one run).
    """
    check_counts(burn_in=burn_in, samples=samples, chains=chains)
    if method not in ("auto", "table", "bitset", "incremental"):
        raise InferenceError(
            f"method must be 'auto', 'table', 'bitset' or 'incremental', got {method!r}"
        )
    if method == "incremental" and not isinstance(model, MarkovNetwork):
        raise InferenceError(
            "method='incremental' needs a MarkovNetwork (a dependency "
            "network's conditionals are not one joint model's)"
        )
    fs, var_ptr, var_feats, owner = conditional_structure(model)
    cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
    ev = _evidence(evidence, fs.schema)
    m = ev.shape[0]
    ev = np.ascontiguousarray(np.repeat(ev, chains, axis=0))  # chain k of row r at r*chains+k
    seeds = chain_seeds(seed, ev.shape[0])
    offs = value_offsets(cards)
    n_states = int(np.prod(cards.astype(object)))
    if method == "table" and n_states > 16 * TABLE_STATES:
        raise InferenceError(
            f"method='table' would tabulate {n_states} joint states; use 'bitset' (or 'auto')"
        )
    if method == "table" or (method == "auto" and n_states <= TABLE_STATES):
        # every conditional of every joint state, computed once by the PLL kernel
        states = np.ascontiguousarray(
            np.stack(np.unravel_index(np.arange(n_states), tuple(cards)), axis=1), dtype=np.uint8
        )
        table = loglinear.all_conditionals(fs, states, owner=owner)[0]
        strides = np.ascontiguousarray(np.append(np.cumprod(cards[::-1])[::-1][1:], 1), np.int64)

        def run(ev, seeds):  # last variable fastest in the table
            return _marginals_table(
                ev, cards, offs, strides, table, int(burn_in), int(samples), seeds
            )
    elif method == "incremental" or (method == "auto" and isinstance(model, MarkovNetwork)):

        def run(ev, seeds):
            return incremental_marginals(fs, ev, cards, offs, burn_in, samples, seeds)
    else:
        if cards.max() > loglinear.MASK_VALUES:
            raise InferenceError(
                f"the lockstep Gibbs kernel handles variables of at most "
                f"{loglinear.MASK_VALUES} values; this model has one with {cards.max()} and "
                f"{n_states} joint states (more than TABLE_STATES={TABLE_STATES} for the "
                "tabulated method)"
            )
        code, allowed = group_masks(fs.ptr, fs.var, fs.val, fs.eq, cards)
        structure = (var_ptr, var_feats, fs.weights, fs.ptr, fs.var, code, allowed)

        def run(ev, seeds):
            return _marginals(ev, cards, offs, int(burn_in), int(samples), seeds, structure)

    acc = _in_blocks(run, ev, seeds, chains, progress)
    out = acc.reshape(m, chains, -1).sum(axis=1) / (samples * chains)
    for j in range(cards.shape[0]):  # observed variables: one-hot on their value
        obs = ev[::chains, j] >= 0
        out[obs, offs[j] : offs[j + 1]] = 0.0
        out[np.flatnonzero(obs), offs[j] + ev[::chains, j][obs]] = 1.0
    return out


def _in_blocks(run, ev, seeds, chains: int, progress) -> np.ndarray:
    """``run(ev, seeds)`` at once, or, with ``progress``, in blocks of :data:`PROGRESS_ROWS`
    evidence rows (their ``chains`` chains together), reporting each block's rows."""
    if progress is None:
        return run(ev, seeds)
    step = PROGRESS_ROWS * chains
    parts = []
    for lo in range(0, ev.shape[0], step):
        hi = min(lo + step, ev.shape[0])
        parts.append(run(np.ascontiguousarray(ev[lo:hi]), seeds[lo:hi]))
        progress((hi - lo) // chains)
    return np.concatenate(parts)


def sample_chains(model, n: int, chains: int, burn_in: int, thin: int, seeds) -> np.ndarray:
    """``n`` rows from ``chains`` chains (row ``t * chains + c`` is chain c's t-th sample)."""
    check_counts(n=n, chains=chains, burn_in=burn_in, thin=thin)
    fs, var_ptr, var_feats, _ = conditional_structure(model)
    cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
    per_chain = -(-int(n) // int(chains))
    out = _sample(
        int(chains),
        per_chain,
        int(burn_in),
        int(thin),
        np.ascontiguousarray(seeds, dtype=np.uint64),
        cards,
        var_ptr,
        var_feats,
        fs.weights,
        fs.ptr,
        fs.var,
        fs.val,
        fs.eq,
    )
    return out[:n]
