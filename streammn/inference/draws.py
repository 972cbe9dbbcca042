"""Random draws shared by every Gibbs kernel: one random stream per chain, and one value drawn
from a conditional given as logits or as probabilities.

Each chain owns a splitmix64 stream (a ``uint64`` state; seeds come from
:func:`streammn.inference.gibbs.chain_seeds`) and draws from it in a fixed order: its initial
values, then one number per resampled variable. So a chain's path depends only on its seed and
its conditionals, never on how chains are spread over threads or blocked together, and kernels
that compute the same conditionals in different ways follow the same paths. The helpers are
inlined into the kernels' hot loops and take offsets rather than array views (a view made
in a hot loop costs two atomic reference-count updates).
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, inline="always")
def next_at(states, i):
    """splitmix64 on ``states[i]``: a uniform float in [0, 1)."""
    states[i] += np.uint64(0x9E3779B97F4A7C15)
    z = states[i]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@nb.njit(cache=True, inline="always")
def draw_from(prob, o, card, states, i):
    """A value in ``0 .. card-1`` drawn from the probabilities ``prob[o:o + card]`` with one
    number of stream ``states[i]`` (the last value takes whatever rounding leaves)."""
    u = next_at(states, i)
    cum = 0.0
    for a in range(card - 1):
        cum += prob[o + a]
        if u < cum:
            return a
    return card - 1


@nb.njit(cache=True, inline="always")
def draw(logits, o, card, prob, states, i):
    """Normalise ``logits[o:o + card]`` into ``prob[:card]`` (softmax) and draw a value from it
    with one number of stream ``states[i]``."""
    mx = logits[o]
    for a in range(1, card):
        mx = max(mx, logits[o + a])
    tot = 0.0
    for a in range(card):
        prob[a] = np.exp(logits[o + a] - mx)
        tot += prob[a]
    for a in range(card):
        prob[a] /= tot
    return draw_from(prob, 0, card, states, i)
