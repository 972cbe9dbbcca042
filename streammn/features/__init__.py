"""Weighted conjunctive features, the representation every model and model file shares.

- :mod:`~streammn.features.feature_set`: :class:`FeatureSet` (CSR-style arrays of conjunctions
  with weights) and the canonical form of a conjunction.
- :mod:`~streammn.features._canonical`: the kernel that canonicalises many conjunctions at once;
  :mod:`~streammn.features._merge` and :mod:`~streammn.features.grouping`: finding and summing
  duplicate features by hashing.

Below the models (:mod:`streammn.network`, :mod:`streammn.dn`) and the model files
(:mod:`streammn.formats`), which both build on it.
"""

from streammn.features.feature_set import (
    Condition,
    FeatureSet,
    canonical_conditions,
    distinct_sorted,
)

__all__ = ["Condition", "FeatureSet", "canonical_conditions", "distinct_sorted"]
