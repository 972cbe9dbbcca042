"""Dependency networks: a conditional distribution per variable, and their conversion.

- :mod:`~streammn.dn.network`: :class:`DependencyNetwork`, the conditionals as weighted
  conjunctive features per variable (what every structure learner builds).
- :mod:`~streammn.dn.conversion`: DN2MN, the closed-form conversion of a dependency network into
  a Markov network (:func:`streammn.dn2mn`).
"""

from streammn.dn.network import DependencyNetwork

__all__ = ["DependencyNetwork"]
