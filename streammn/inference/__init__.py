"""Inference and evaluation: Gibbs sampling, Rao-Blackwellised marginals, PLL and CMLL.

Exact enumeration for small models lives on :class:`streammn.network.model.MarkovNetwork`
(``log_partition``, ``joint``, ``marginals``).
"""

from streammn.inference.evaluate import cmll, cmll_terms, pll, pll_terms, variable_groups
from streammn.inference.convergence import ChainDiagnostics, SamplingWarning
from streammn.inference.gibbs import InferenceError, gibbs_marginals, sample_chains
from streammn.inference.sampling import sample, sample_diagnosed

__all__ = [
    "ChainDiagnostics",
    "SamplingWarning",
    "InferenceError",
    "cmll",
    "cmll_terms",
    "gibbs_marginals",
    "pll",
    "pll_terms",
    "sample",
    "sample_chains",
    "sample_diagnosed",
    "variable_groups",
]
