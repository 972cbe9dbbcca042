"""Ensemble-of-trees (ET) structure learning (Lin, Zhu, Lee & Taskar 2009).

:mod:`~streammn.et.kernels` (matrix-tree log-determinants, Eq. 6, gradient, PGD),
:mod:`~streammn.et.density` (theta from the stores, beta initialisation and refinement, rho,
graph, the ET density), :mod:`~streammn.et.edge_tables` (the edge tables learned with beta,
Eq. 7), :mod:`~streammn.et.learner` (the streaming learner).
"""

from streammn.et.density import ETDensity
from streammn.et.learner import EnsembleOfTrees

__all__ = ["ETDensity", "EnsembleOfTrees"]
