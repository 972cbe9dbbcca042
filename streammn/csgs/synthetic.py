"""Planted context-specific Markov networks (the structure of the CSGS paper's Section 4.1).

Binary variables ``X_0 .. X_{n-1}``; ``X_w`` (default ``w = 0``) is the context variable. The
distribution satisfies ``I(X_a, X_b | x_w = 1)`` for every pair ``a, b != w`` and has every pair
dependent when ``x_w = 0``: the instantiated graph of ``x_w = 0`` is complete, that of
``x_w = 1`` a star centred on ``w`` (Section 4.1). As a log-linear model::

    [X_w = 1]                       theta_w
    [X_w = 1, X_a = 1]              field of a given x_w = 1     (star)
    [X_w = 0, X_a = 1]              field of a given x_w = 0
    [X_w = 0, X_a = 1, X_b = 1]     interaction of a, b given x_w = 0  (complete graph)

The paper's datasets come from "10 different Markov networks with fixed structure but randomly
chosen weights" without the weight distribution; we draw fields from ``N(0, field_scale)`` and
interactions from ``+-U(low, high)`` (random sign), magnitudes that make every true interaction
detectable with a few thousand rows without making any state nearly deterministic. Rows are
sampled exactly from the enumerated joint distribution (``n`` is small).
"""

from __future__ import annotations

import numpy as np

from streammn.features import FeatureSet
from streammn.network.model import MarkovNetwork
from streammn.schema import Schema
from streammn.errors import CSGSError


def context_specific_network(
    n: int,
    seed: int = 0,
    w: int = 0,
    field_scale: float = 0.5,
    interaction: tuple[float, float] = (0.5, 1.5),
) -> MarkovNetwork:
    """The planted model with ``n`` binary variables and context variable ``w``."""
    if n < 3 or not 0 <= w < n:
        raise CSGSError(f"need n >= 3 and 0 <= w < n, got n={n}, w={w}")
    rng = np.random.default_rng(seed)
    others = [v for v in range(n) if v != w]
    features = [(rng.normal(0, field_scale), [(w, 1, True)])]
    for a in others:
        features.append((rng.normal(0, field_scale), [(w, 1, True), (a, 1, True)]))
        features.append((rng.normal(0, field_scale), [(w, 0, True), (a, 1, True)]))
    for i, a in enumerate(others):
        for b in others[i + 1 :]:
            size = rng.uniform(*interaction) * rng.choice([-1.0, 1.0])
            features.append((size, [(w, 0, True), (a, 1, True), (b, 1, True)]))
    schema = Schema.binary(n)
    return MarkovNetwork(schema, FeatureSet.from_features(schema, features))


def sample_rows(model: MarkovNetwork, n_rows: int, seed: int = 0) -> np.ndarray:
    """``n_rows`` independent rows drawn exactly from a small model's joint distribution."""
    states, p = model.joint()
    rng = np.random.default_rng(seed)
    return np.ascontiguousarray(states[rng.choice(len(p), size=n_rows, p=p)])


def kl_divergence(true: MarkovNetwork, learned: MarkovNetwork) -> float:
    """``KL(p_true || p_learned)`` in nats, by enumerating every joint state."""
    states, p = true.joint()
    log_q = learned.log_probability(states)
    keep = p > 0
    return float(np.sum(p[keep] * (np.log(p[keep]) - log_q[keep])))
