"""Shared helpers for the MN / DN2MN / inference tests: random models and brute force."""

import itertools

import numpy as np

from streammn.features import FeatureSet


def random_featureset(rng, schema, n_features, max_len=3, p_eq=0.7, scale=1.0):
    feats = []
    for _ in range(n_features):
        k = rng.integers(1, max_len + 1)
        vs = rng.choice(schema.n_vars, size=k, replace=False)
        conds = [(int(v), int(rng.integers(schema.cardinalities[v])), bool(rng.random() < p_eq))
                 for v in vs]
        feats.append((float(rng.normal() * scale), conds))
    return FeatureSet.from_features(schema, feats)


def all_rows(schema):
    return np.array(list(itertools.product(*[range(c) for c in schema.cardinalities])),
                    dtype=np.uint8).reshape(-1, schema.n_vars)


def holds(conds, row):
    return all((row[v] == a) == eq for v, a, eq in conds)


def brute_score(fs, row):
    return sum(w for w, c in fs if holds(c, row))


def brute_joint(fs, schema):
    rows = all_rows(schema)
    s = np.array([brute_score(fs, r) for r in rows])
    p = np.exp(s - s.max())
    return rows, p / p.sum()
