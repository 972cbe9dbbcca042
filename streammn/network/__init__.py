"""The Markov network a learner publishes: the model, its scoring and its weights.

- :mod:`~streammn.network.model`: :class:`~streammn.network.model.MarkovNetwork`, the log-linear
  model over a schema and its features (:mod:`streammn.features`): conditionals,
  pseudo-likelihood, enumeration on small models.
- Scoring kernels, the hot loops of pseudo-likelihood: :mod:`~streammn.network.loglinear`
  (row by row), :mod:`~streammn.network.bitscan` (features as bit sets over many rows) and
  :mod:`~streammn.network.reach_lists` (the sparse form weight learning iterates).
- Weight learning: :mod:`~streammn.network.weights` (pseudo-likelihood, batch and stochastic),
  :mod:`~streammn.network.lbfgs` (its optimiser), :mod:`~streammn.network.weight_sample` (the
  uniform row sample a stream keeps for it) and :mod:`~streammn.network.published` (the weights
  a snapshot publishes: DN2MN's closed form, continued on the sample when that scores better).
"""
