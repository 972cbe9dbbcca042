"""The Markov network a learner publishes: its features, the model, scoring and weights.

- :mod:`~streammn.network.features`: :class:`~streammn.network.features.FeatureSet`, weighted
  conjunctions of variable literals, with the kernels that canonicalise and merge them
  (:mod:`~streammn.network._canonical`, :mod:`~streammn.network._merge`,
  :mod:`~streammn.network.grouping`).
- :mod:`~streammn.network.model`: :class:`~streammn.network.model.MarkovNetwork`, the log-linear
  model over a schema (conditionals, pseudo-likelihood, enumeration on small models).
- Scoring kernels, the hot loops of pseudo-likelihood: :mod:`~streammn.network.loglinear`
  (row by row), :mod:`~streammn.network.bitscan` (features as bit sets over many rows) and
  :mod:`~streammn.network.reach_lists` (the sparse form weight learning iterates).
- Weight learning: :mod:`~streammn.network.weights` (pseudo-likelihood, batch and stochastic),
  :mod:`~streammn.network.lbfgs` (its optimiser) and :mod:`~streammn.network.weight_sample`
  (the uniform row sample a stream keeps for it).
"""
