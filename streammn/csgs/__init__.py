"""CSGS: context-specific Grow-Shrink structure learning (Edera, Strappa & Bromberg 2014).

- :mod:`streammn.csgs.kernels`: chi-square tests on pattern counts and the Grow-Shrink loop.
- :mod:`streammn.csgs.canonical`: Algorithm 1 (canonical assignments and graphs) and feature
  generation.
- :mod:`streammn.csgs.learner`: :class:`CSGS`, the streaming learner (counts, then a canonical
  model and pseudo-likelihood weights at snapshot time).
- :mod:`streammn.csgs.synthetic`: the planted context-specific networks of the paper's Section 4.
"""

from streammn.csgs.canonical import CanonicalModel, learn_canonical_model, pearson_test
from streammn.csgs.learner import CSGS, CSGSError, CSGSStateError

__all__ = [
    "CSGS",
    "CSGSError",
    "CSGSStateError",
    "CanonicalModel",
    "learn_canonical_model",
    "pearson_test",
]
