"""Inference and evaluation: Gibbs sampling, Rao-Blackwellised marginals, PLL and CMLL.

Exact enumeration for small models lives on :class:`streammn.model.MarkovNetwork`
(``log_partition``, ``joint``, ``marginals``).
"""

from streammn.inference.evaluate import cmll, cmll_terms, pll, pll_terms, variable_groups
from streammn.inference.gibbs import InferenceError, gibbs_marginals, sample, sample_chains

__all__ = [
    "InferenceError",
    "cmll",
    "cmll_terms",
    "gibbs_marginals",
    "pll",
    "pll_terms",
    "sample",
    "sample_chains",
    "variable_groups",
]
