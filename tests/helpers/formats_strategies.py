"""Hypothesis strategies and brute-force evaluation shared by the format tests."""

import itertools
import math

import numpy as np
from hypothesis import strategies as st

from streammn import Schema
from streammn.features import FeatureSet


@st.composite
def models(draw, max_vars=4, max_card=4, max_features=8, weights=None, canonical=True, named=False):
    """A random (schema, FeatureSet): multi-valued variables, = and != conditions."""
    cards = draw(st.lists(st.integers(2, max_card), min_size=1, max_size=max_vars))
    names = None
    if named:
        names = draw(
            st.lists(
                st.text(min_size=1, max_size=5),
                min_size=len(cards),
                max_size=len(cards),
                unique=True,
            )
        )
    schema = Schema.from_cardinalities(cards, names)
    if weights is None:  # any weight a model file holds: finite within the bound, or -inf
        weights = st.one_of(st.floats(-1e150, 1e150), st.just(-math.inf))
    feats = []
    for _ in range(draw(st.integers(0, max_features))):
        vs = draw(st.lists(st.integers(0, len(cards) - 1), max_size=4))
        conds = [(v, draw(st.integers(0, cards[v] - 1)), draw(st.booleans())) for v in vs]
        feats.append((draw(weights), conds))
    return schema, FeatureSet.from_features(schema, feats, canonical=canonical)


def all_rows(schema):
    return list(itertools.product(*[range(c) for c in schema.cardinalities]))


def holds(conds, row):
    return all((row[v] == a) == eq for v, a, eq in conds)


def brute_scores(fs, schema):
    """Unnormalised log score of every joint state, by direct evaluation of the features."""
    return np.array([sum((w for w, c in fs if holds(c, row)), 0.0) for row in all_rows(schema)])


def log_z(scores):
    scores = np.asarray(scores, dtype=float)
    if np.all(scores == -np.inf):
        return -np.inf
    m = scores.max()
    return m + math.log(np.exp(scores - m).sum())
