"""Rao-Blackwellised Gibbs marginals of a Markov network with incremental conditionals.

CMLL runs one chain per test row and query group, and each chain only ever resamples the few
variables of its query group. So each chain first *reduces* the model to its free variables:

* a feature is a conjunction of per-variable value sets ("groups"); its groups on observed
  variables are fixed by the chain's evidence, so a feature that fails them never counts and is
  dropped, and one that passes them becomes a conjunction over free variables only;
* the free part of a feature depends only on which variables are free (the chain's evidence
  *pattern*, shared by every chain of a query group), so features with the same free part are
  merged once per pattern into *parts*; a chain then sums the weights of its live features into
  their parts (on plants, about 14k live features collapse into about 2.5k parts);
* a part with one free variable is a constant bias on that variable's logits.

During sampling each chain keeps, per part, how many of its groups the current state fails and
the XOR of their indices, and per free variable and value the logit of its conditional.
Resampling a variable reads its logits (O(values)); only when the value changes are the parts
mentioning it visited, through per-value lists of the groups that accept it. A part whose other
groups all pass adds or removes its weight to every other variable's logits; one with a single
other failing group, to that group's variable only (the XOR names it, no search); a part with
two or more other failing groups counts for no conditional either way and only updates its
count. On plants a value changes at about 5% of the steps, and a change visits about 500 groups.

Chains are independent (``prange`` over blocks of 64) and draw their random numbers as
:mod:`streammn.inference.draws` describes, so results do not depend on the thread count.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.inference.draws import draw, next_at
from streammn.network.bitscan import group_structure, lowest_bit, value_offsets


@nb.njit(cache=True)
def _split_features(is_free, gptr, g_var, g_mask):
    """The features mentioning a free variable, split into free and evidence groups.

    Returns ``(feat, n_free, keys, ev_ptr, ev_var, ev_mask)``: ``keys[t]`` holds the free
    groups of touching feature ``feat[t]`` as ``(variable, mask)`` pairs padded with -1 (the
    key its part is found by), ``ev_ptr[t]:ev_ptr[t+1]`` its groups on observed variables.
    """
    n_feat = gptr.shape[0] - 1
    free_groups = np.zeros(n_feat, dtype=np.int64)
    for f in range(n_feat):
        for g in range(gptr[f], gptr[f + 1]):
            if is_free[g_var[g]]:
                free_groups[f] += 1
    n_touch = 0
    n_ev = 0
    width = 1
    for f in range(n_feat):
        k = free_groups[f]
        if k > 0:
            n_touch += 1
            n_ev += gptr[f + 1] - gptr[f] - k
            width = max(width, k)
    feat = np.empty(n_touch, dtype=np.int64)
    n_free = np.empty(n_touch, dtype=np.int64)
    keys = np.full((n_touch, 2 * width), -1, dtype=np.int64)
    ev_ptr = np.zeros(n_touch + 1, dtype=np.int64)
    ev_var = np.empty(n_ev, dtype=np.int64)
    ev_mask = np.empty(n_ev, dtype=np.uint64)
    t = 0
    e = 0
    for f in range(n_feat):
        if free_groups[f] == 0:
            continue
        feat[t] = f
        n_free[t] = free_groups[f]
        k = 0
        for g in range(gptr[f], gptr[f + 1]):
            if is_free[g_var[g]]:
                keys[t, 2 * k] = g_var[g]
                keys[t, 2 * k + 1] = np.int64(g_mask[g])
                k += 1
            else:
                ev_var[e] = g_var[g]
                ev_mask[e] = g_mask[g]
                e += 1
        t += 1
        ev_ptr[t] = e
    return feat, n_free, keys, ev_ptr, ev_var, ev_mask


def _unique_rows(keys):
    """``np.unique(keys, axis=0, return_inverse=True)`` (same order) by one lexicographic sort,
    ten times faster on plants' 85k keys than numpy's structured comparison."""
    order = np.lexsort(keys.T[::-1])
    ordered = keys[order]
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    inverse = np.empty(len(ordered), dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse


def _pattern(is_free, gptr, g_var, g_mask):
    """Everything the chains of one evidence pattern share (see the module docstring), as
    ``(features, parts)``: ``(feat, part, unary_var, unary_mask, ev_ptr, ev_var, ev_mask)`` and
    ``(part_ptr, part_var, part_mask)``."""
    feat, n_free, keys, ev_ptr, ev_var, ev_mask = _split_features(is_free, gptr, g_var, g_mask)
    multi = n_free >= 2
    part = np.full(feat.shape[0], -1, dtype=np.int64)
    uniq, part[multi] = _unique_rows(keys[multi])
    part_len = (uniq[:, 0::2] >= 0).sum(axis=1)
    part_ptr = np.zeros(uniq.shape[0] + 1, dtype=np.int64)
    np.cumsum(part_len, out=part_ptr[1:])
    used = uniq[:, 0::2] >= 0
    part_var = np.ascontiguousarray(uniq[:, 0::2][used])
    part_mask = np.ascontiguousarray(uniq[:, 1::2][used]).view(np.uint64)
    unary_var = np.ascontiguousarray(keys[:, 0])
    unary_mask = np.ascontiguousarray(keys[:, 1]).view(np.uint64)
    features = (feat, part, unary_var, unary_mask, ev_ptr, ev_var, ev_mask)
    return features, (part_ptr, part_var, part_mask)


@nb.njit(cache=True)
def _fails(mask, value):
    return 1 - np.int64((mask >> np.uint64(value)) & np.uint64(1))


@nb.njit(cache=True)
def _add_to_values(logits, o, card, mask, w):
    """Add ``w`` to ``logits[o + a]`` for every value ``a`` in ``mask``."""
    for a in range(card):
        if (mask >> np.uint64(a)) & np.uint64(1):
            logits[o + a] += w


@nb.njit(cache=True)
def _block(
    chains, evidence, cards, offs, burn_in, samples, seeds, weights, features, parts, free_vars, acc
):
    """Reduce the model for up to 64 chains of one evidence pattern at once, then run each.

    Each feature's evidence groups are tested against all the chains with one AND per group
    over 64-chain bitsets of the observed values; the chains where it holds add its weight to
    their part (or bias). Per chain the features are visited in the same order, so the sums do
    not depend on how chains are blocked.

    ``features`` and ``parts`` are :func:`_pattern`'s two tuples, passed through
    :func:`_chains` (and ``parts`` on to :func:`_chain`) as one argument each, so the kernels'
    signatures and calls do not repeat their ten arrays; unpacked once per block or chain.
    """
    feat, part, unary_var, unary_mask, ev_ptr, ev_var, ev_mask = features
    nc = chains.shape[0]
    n = evidence.shape[1]
    states = np.empty(nc, dtype=np.uint64)
    x = np.empty((nc, n), dtype=np.int64)
    lits = np.zeros(offs[-1], dtype=np.uint64)
    for i in range(nc):
        states[i] = seeds[chains[i]]
        for j in range(n):
            e = evidence[chains[i], j]
            if e < 0:
                x[i, j] = min(int(next_at(states, i) * cards[j]), cards[j] - 1)
            else:
                x[i, j] = e
                lits[offs[j] + e] |= np.uint64(1) << np.uint64(i)
    n_parts = parts[0].shape[0] - 1  # parts[0]: part_ptr
    logits = np.zeros((nc, offs[-1]))
    part_w = np.zeros((nc, n_parts))
    seen = np.zeros((nc, n_parts), dtype=np.bool_)
    live = np.empty((nc, n_parts), dtype=np.int64)
    n_live = np.zeros(nc, dtype=np.int64)
    everyone = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - nc)
    for t in range(feat.shape[0]):
        h = everyone
        for e in range(ev_ptr[t], ev_ptr[t + 1]):
            v = ev_var[e]
            holds = np.uint64(0)
            for a in range(cards[v]):
                if (ev_mask[e] >> np.uint64(a)) & np.uint64(1):
                    holds |= lits[offs[v] + a]
            h &= holds
            if h == 0:
                break
        if h == 0:
            continue
        w = weights[feat[t]]
        p = part[t]
        while h != 0:
            i = lowest_bit(h)
            h &= h - np.uint64(1)
            if p < 0:
                j = unary_var[t]
                _add_to_values(logits[i], offs[j], cards[j], unary_mask[t], w)
            else:
                if not seen[i, p]:
                    seen[i, p] = True
                    live[i, n_live[i]] = p
                    n_live[i] += 1
                part_w[i, p] += w
    for i in range(nc):
        _chain(
            chains[i],
            states[i : i + 1],
            x[i],
            logits[i],
            part_w[i],
            live[i, : n_live[i]],
            cards,
            offs,
            burn_in,
            samples,
            parts,
            free_vars,
            acc,
            0,
            np.empty((0, 0), dtype=np.uint8),
        )


@nb.njit(cache=True)
def _chain(
    c,
    states,
    x,
    logits,
    part_w,
    live,
    cards,
    offs,
    burn_in,
    samples,
    parts,
    free_vars,
    acc,
    every,
    trace,
):
    """Chain ``c``'s Gibbs sweeps on its reduced model (its part weights and biases).

    With ``every > 0`` the state after every ``every``-th of the ``samples`` sweeps is also
    written to ``trace`` (sampling rows, :func:`chain_recorder`); ``x`` and ``states`` are left
    at the chain's last state, so a later call continues the chain.

    ``logits[offs[j] + a]`` is the logit of ``X_j = a``. Each part ``k`` keeps ``unsat[k]``, the
    number of its groups the state fails, and ``fail_xor[k]``, the XOR of their indices: when
    exactly one fails, that is its index, so the variable a part's weight moves to or from is
    found without a search. The hot loop calls no helper that takes arrays (numba would count
    references to them at every call). ``parts`` is ``(part_ptr, part_var, part_mask)``.
    """
    part_ptr, part_var, part_mask = parts
    n_live = live.shape[0]
    max_card = 0
    for j in range(cards.shape[0]):
        max_card = max(max_card, cards[j])
    # the chain's parts (nonzero weight), copied next to each other: part k has groups
    # k_ptr[k]:k_ptr[k+1], and group g accepts the logits ``add[add_ptr[g]:add_ptr[g+1]]``
    n_k = 0
    n_g = 0
    n_add = 0
    for i in range(n_live):
        p = live[i]
        if part_w[p] != 0.0:
            n_k += 1
            n_g += part_ptr[p + 1] - part_ptr[p]
            for q in range(part_ptr[p], part_ptr[p + 1]):
                for a in range(cards[part_var[q]]):
                    n_add += (part_mask[q] >> np.uint64(a)) & np.uint64(1)
    k_w = np.empty(n_k)
    k_ptr = np.zeros(n_k + 1, dtype=np.int64)
    g_var = np.empty(n_g, dtype=np.int64)
    g_mask = np.empty(n_g, dtype=np.uint64)
    add_ptr = np.zeros(n_g + 1, dtype=np.int64)
    add = np.empty(n_add, dtype=np.int64)
    g_slot = np.empty(n_g, dtype=np.int64)  # add[add_ptr[g]] when that is g's only logit
    unsat = np.zeros(n_k, dtype=np.int64)
    fail_xor = np.zeros(n_k, dtype=np.int64)
    k = 0
    g = 0
    for i in range(n_live):
        p = live[i]
        if part_w[p] == 0.0:
            continue
        k_w[k] = part_w[p]
        for q in range(part_ptr[p], part_ptr[p + 1]):
            j = part_var[q]
            g_var[g] = j
            g_mask[g] = part_mask[q]
            r = add_ptr[g]
            for a in range(cards[j]):
                if (part_mask[q] >> np.uint64(a)) & np.uint64(1):
                    add[r] = offs[j] + a
                    r += 1
            add_ptr[g + 1] = r
            g_slot[g] = add[r - 1] if r - add_ptr[g] == 1 else -1
            if _fails(part_mask[q], x[j]):
                unsat[k] += 1
                fail_xor[k] ^= g
            g += 1
        k += 1
        k_ptr[k] = g
    # per free variable and value, the groups that accept the value (and their parts)
    deg = np.zeros(offs[-1] + 1, dtype=np.int64)
    for r in range(n_add):
        deg[add[r] + 1] += 1
    slot_ptr = np.cumsum(deg)
    fill = slot_ptr[:-1].copy()
    slot_k = np.empty(n_add, dtype=np.int64)
    slot_g = np.empty(n_add, dtype=np.int64)
    slot_mask = np.empty(n_add, dtype=np.uint64)
    for k in range(n_k):
        for g in range(k_ptr[k], k_ptr[k + 1]):
            for r in range(add_ptr[g], add_ptr[g + 1]):
                t = fill[add[r]]
                slot_k[t] = k
                slot_g[t] = g
                slot_mask[t] = g_mask[g]
                fill[add[r]] += 1
            if unsat[k] - _fails(g_mask[g], x[g_var[g]]) == 0:
                for r in range(add_ptr[g], add_ptr[g + 1]):
                    logits[add[r]] += k_w[k]
    prob = np.empty(max_card)
    total = np.zeros(offs[-1])
    for s in range(burn_in + samples):
        for i in range(free_vars.shape[0]):
            j = free_vars[i]
            card = cards[j]
            o = offs[j]
            v = draw(logits, o, card, prob, states, 0)
            if s >= burn_in:
                for a in range(card):
                    total[o + a] += prob[a]
            old = x[j]
            if v == old:
                continue
            x[j] = v
            # first the groups that accepted the old value and not the new one (they now fail),
            # then those that accept the new value and not the old one (they now pass). A part
            # whose other groups all pass moves its weight out of or into every other group's
            # conditional; one with a single other failing group h, out of or into h's.
            for now_fails in (True, False):
                first, other = (o + old, v) if now_fails else (o + v, old)
                for r in range(slot_ptr[first], slot_ptr[first + 1]):
                    if (slot_mask[r] >> np.uint64(other)) & np.uint64(1):
                        continue
                    k = slot_k[r]
                    g = slot_g[r]
                    if now_fails:
                        others_failing = unsat[k]
                        others_xor = fail_xor[k]
                        unsat[k] += 1
                        w = -k_w[k]
                    else:
                        others_failing = unsat[k] - 1
                        others_xor = fail_xor[k] ^ g
                        unsat[k] -= 1
                        w = k_w[k]
                    fail_xor[k] ^= g
                    if others_failing > 1:
                        continue
                    h0, h1 = (
                        (k_ptr[k], k_ptr[k + 1])
                        if others_failing == 0
                        else (others_xor, others_xor + 1)
                    )
                    for h in range(h0, h1):
                        if h == g:
                            continue
                        if g_slot[h] >= 0:
                            logits[g_slot[h]] += w
                        else:
                            for t in range(add_ptr[h], add_ptr[h + 1]):
                                logits[add[t]] += w
        if every > 0 and s >= burn_in and (s - burn_in + 1) % every == 0:
            row = (s - burn_in + 1) // every - 1
            for j in range(x.shape[0]):
                trace[row, j] = x[j]
    for i in range(offs[-1]):
        acc[c, i] += total[i]


@nb.njit(cache=True, parallel=True)
def _chains(
    chains, evidence, cards, offs, burn_in, samples, seeds, weights, features, parts, free_vars, acc
):
    for b in nb.prange((chains.shape[0] + 63) // 64):
        _block(
            chains[64 * b : 64 * b + 64],
            evidence,
            cards,
            offs,
            burn_in,
            samples,
            seeds,
            weights,
            features,
            parts,
            free_vars,
            acc,
        )


def incremental_marginals(fs, evidence, cards, offs, burn_in, samples, seeds) -> np.ndarray:
    """Sums over the ``samples`` sweeps of each chain's conditionals, ``(chains, offs[-1])``:
    chain ``c`` starts from row ``c`` of ``evidence`` (-1: free) with seed ``seeds[c]``."""
    gptr, _, _, g_var, g_mask, _, _ = group_structure(
        fs.ptr, fs.var, fs.val, fs.eq, cards, np.full(fs.n_features, -1, np.int64)
    )
    free = evidence < 0
    patterns, which = np.unique(free, axis=0, return_inverse=True)
    which = which.ravel()
    acc = np.zeros((evidence.shape[0], offs[-1]))
    for i, is_free in enumerate(patterns):
        features, parts = _pattern(is_free, gptr, g_var, g_mask)
        _chains(
            np.flatnonzero(which == i),
            evidence,
            cards,
            offs,
            int(burn_in),
            int(samples),
            seeds,
            fs.weights,
            features,
            parts,
            np.flatnonzero(is_free),
            acc,
        )
    return acc


@nb.njit(cache=True)
def _unconditioned(n_parts, features, weights, cards, offs):
    """The reduced model of a chain without evidence (every variable free): the biases of the
    one-variable features, each part's summed weight and the parts with a weight."""
    feat, part, unary_var, unary_mask, _, _, _ = features
    logits = np.zeros(offs[-1])
    part_w = np.zeros(n_parts)
    seen = np.zeros(n_parts, dtype=np.bool_)
    live = np.empty(n_parts, dtype=np.int64)
    n_live = 0
    for t in range(feat.shape[0]):
        w = weights[feat[t]]
        p = part[t]
        if p < 0:
            j = unary_var[t]
            _add_to_values(logits, offs[j], cards[j], unary_mask[t], w)
        else:
            if not seen[p]:
                seen[p] = True
                live[n_live] = p
                n_live += 1
            part_w[p] += w
    return logits, part_w, live[:n_live]


@nb.njit(cache=True, parallel=True)
def _record(X, states, sweeps, every, cards, offs, logits, part_w, live, parts, free_vars):
    n_chains, n = X.shape
    out = np.empty((sweeps // every, n_chains, n), dtype=np.uint8)
    for c in nb.prange(n_chains):
        x = np.empty(n, dtype=np.int64)
        for j in range(n):
            x[j] = X[c, j]
        state = states[c : c + 1].copy()
        acc = np.zeros((1, offs[-1]))
        trace = np.empty((sweeps // every, n), dtype=np.uint8)
        _chain(
            0,
            state,
            x,
            logits.copy(),
            part_w,
            live,
            cards,
            offs,
            0,
            sweeps,
            parts,
            free_vars,
            acc,
            every,
            trace,
        )
        out[:, c, :] = trace
        for j in range(n):
            X[c, j] = x[j]
        states[c] = state[0]
    return out


def chain_recorder(fs, cards):
    """``run(X, states, sweeps, every)``: run ``sweeps`` Gibbs sweeps of a Markov network on
    each chain ``X[c]`` (uint8 states, its stream ``states[c]``; both updated in place) and
    return the state after every ``every``-th sweep, ``(sweeps // every, chains, n_vars)``.

    The model is reduced once (no evidence: every variable free) and each chain updates its
    conditionals only when a value changes, as for the marginals. Needs finite weights (a
    ``-inf`` weight cannot be added and taken away again)."""
    cards = np.ascontiguousarray(cards, dtype=np.int64)
    offs = value_offsets(cards)
    gptr, _, _, g_var, g_mask, _, _ = group_structure(
        fs.ptr, fs.var, fs.val, fs.eq, cards, np.full(fs.n_features, -1, np.int64)
    )
    features, parts = _pattern(np.ones(cards.size, dtype=np.bool_), gptr, g_var, g_mask)
    logits, part_w, live = _unconditioned(parts[0].shape[0] - 1, features, fs.weights, cards, offs)
    free_vars = np.arange(cards.size, dtype=np.int64)

    def run(X, states, sweeps, every):
        return _record(
            X, states, int(sweeps), int(every), cards, offs, logits, part_w, live, parts, free_vars
        )

    return run
