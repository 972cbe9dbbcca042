"""Shared helpers for the MN / DN2MN / inference tests: random models and brute force."""

import itertools

import numba
import numpy as np

from streammn import Schema
from streammn.features import FeatureSet
from streammn.network.loglinear import value_offsets
from streammn.network.model import MarkovNetwork


def random_featureset(rng, schema, n_features, max_len=3, p_eq=0.7, scale=1.0):
    feats = []
    for _ in range(n_features):
        k = rng.integers(1, max_len + 1)
        vs = rng.choice(schema.n_vars, size=k, replace=False)
        conds = [
            (int(v), int(rng.integers(schema.cardinalities[v])), bool(rng.random() < p_eq))
            for v in vs
        ]
        feats.append((float(rng.normal() * scale), conds))
    return FeatureSet.from_features(schema, feats)


def noisy_chain_rows(rng, cards, n, p_copy, dtype=np.int64):
    """Rows of a noisy Markov chain: each variable copies its predecessor (mod its cardinality)
    with probability p_copy, else takes a uniform value."""
    rows = np.empty((n, len(cards)), dtype=dtype)
    rows[:, 0] = rng.integers(0, cards[0], n)
    for v in range(1, len(cards)):
        copy = rng.random(n) < p_copy
        rows[:, v] = np.where(copy, rows[:, v - 1] % cards[v], rng.integers(0, cards[v], n))
    return rows


def all_rows(schema):
    return np.array(
        list(itertools.product(*[range(c) for c in schema.cardinalities])), dtype=np.uint8
    ).reshape(-1, schema.n_vars)


def holds(conds, row):
    return all((row[v] == a) == eq for v, a, eq in conds)


def brute_score(fs, row):
    return sum(w for w, c in fs if holds(c, row))


def brute_joint(fs, schema):
    rows = all_rows(schema)
    s = np.array([brute_score(fs, r) for r in rows])
    p = np.exp(s - s.max())
    return rows, p / p.sum()


def mixed_mn_and_rows(seed, n_rows, scale):
    """A random Markov network over 10 variables of 2 to 4 values (60 features of up to 4
    conditions, weights of stddev ``scale``) and ``n_rows`` uniformly random rows of its schema;
    small enough for :func:`brute_conditional_marginals`."""
    rng = np.random.default_rng(seed)
    schema = Schema.from_cardinalities([2, 3, 2, 2, 3, 2, 2, 4, 2, 2])
    mn = MarkovNetwork(schema, random_featureset(rng, schema, 60, max_len=4, scale=scale))
    return mn, rng.integers(0, schema.cardinalities, size=(n_rows, schema.n_vars))


def brute_conditional_marginals(mn, evidence):
    """``P(X_j = a | evidence row)`` by enumerating the joint, laid out like
    ``gibbs_marginals``' output (``-1`` in ``evidence``: unobserved)."""
    states, p = mn.joint()
    offs = value_offsets(mn.schema.cardinalities)
    out = np.zeros((len(evidence), offs[-1]))
    for r, e in enumerate(evidence):
        keep = np.all((states == e) | (e < 0), axis=1)
        q = p[keep] / p[keep].sum()
        for j, card in enumerate(mn.schema.cardinalities):
            out[r, offs[j] : offs[j + 1]] = np.bincount(states[keep, j], weights=q, minlength=card)
    return out


def at_each_thread_count(compute):
    """``compute()`` at one and (where numba has them) two threads, numba's thread count
    restored afterwards: the results in that order, for determinism checks."""
    threads = numba.get_num_threads()
    try:
        out = []
        for n in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(n)
            out.append(compute())
        return out
    finally:
        numba.set_num_threads(threads)
