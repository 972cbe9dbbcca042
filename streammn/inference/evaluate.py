"""Evaluation measures of the papers: pseudo-log-likelihood and conditional marginal
log-likelihood (CMLL), for Markov networks and dependency networks alike."""

from __future__ import annotations

from typing import Callable

import numpy as np

from streammn.network import loglinear
from streammn.errors import NoRowsError
from streammn.inference.gibbs import InferenceError, conditional_structure, gibbs_marginals


def pll_terms(model, rows) -> np.ndarray:
    """``log P(x_i | x_-i)`` per row and variable under the model's conditionals (bitset kernel)."""
    fs, _, _, owner = conditional_structure(model)
    return loglinear.all_conditionals(fs, model.schema.rows_of(rows), owner=owner)[1]


def pll(model, rows) -> float:
    """Mean over rows of ``sum_i log P(x_i | x_-i)``."""
    terms = pll_terms(model, rows)
    return float(terms.sum(axis=1).mean()) if terms.shape[0] else float("nan")


def variable_groups(n_vars: int, groups: int) -> list[np.ndarray]:
    """The CMLL query groups: ``groups`` contiguous blocks of variables of near-equal size."""
    if not 1 <= groups <= n_vars:
        raise InferenceError(f"groups must be in 1..{n_vars}, got {groups}")
    return np.array_split(np.arange(n_vars), groups)


def cmll_terms(
    model,
    rows,
    groups: int = 4,
    progress: Callable[[float], None] | None = None,
    **sampling,
) -> np.ndarray:
    """``log P(x_i | x_E)`` per row and variable, ``E`` = the variables outside ``X_i``'s group.

    The protocol of Davis & Domingos used by the DTSL and DN2MN papers: the variables are split
    into ``groups`` sets; each set in turn is the query with all other variables as evidence;
    marginals come from the Rao-Blackwellised Gibbs sampler (:func:`gibbs_marginals`, which
    takes the ``sampling`` settings: ``burn_in``, ``samples``, ``chains``, ``seed`` and
    ``method``, by default 100 burn-in sweeps and 1000 samples, the papers' protocol).
    ``progress``, when given, is called with the rows' worth of queries finished as they finish
    (a row is done when its ``groups`` queries are).
    """
    rows = model.schema.rows_of(rows)
    m, n = rows.shape
    if m == 0:  # no rows, no terms (the sampler has no chain to run)
        return np.empty((0, n))
    blocks = variable_groups(n, groups)
    evidence = np.repeat(rows[None].astype(np.int16), len(blocks), axis=0)  # (groups, m, n)
    for g, block in enumerate(blocks):
        evidence[g][:, block] = -1
    marg = gibbs_marginals(
        model,
        evidence.reshape(-1, n),
        progress=None if progress is None else lambda k: progress(k / len(blocks)),
        **sampling,
    ).reshape(len(blocks), m, -1)
    offs = loglinear.value_offsets(model.schema.cardinalities)
    out = np.empty((m, n))
    for g, block in enumerate(blocks):
        cols = offs[block][None, :] + rows[:, block]
        out[:, block] = np.log(np.take_along_axis(marg[g], cols, axis=1))
    return out


def cmll(model, rows, **options) -> float:
    """Conditional marginal log-likelihood per example: the mean over ``rows`` of the sums of
    :func:`cmll_terms`, which takes the ``options`` (``groups`` and the sampler's settings)."""
    terms = cmll_terms(model, rows, **options)
    if not terms.shape[0]:
        raise NoRowsError("no rows to score: the CMLL is a mean over rows")
    return float(terms.sum(axis=1).mean())
