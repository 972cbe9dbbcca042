"""Probabilistic decision trees for DTSL: flat-array forests, exact level-wise and Hoeffding growth.

:mod:`~streammn.trees.forest` stores all trees; :mod:`~streammn.trees.kernels` holds the numba
kernels both growth modes share (routing, leaf statistics, split scoring);
:mod:`~streammn.trees.exact` grows trees level by level with one data pass per level;
:mod:`~streammn.trees.hoeffding` grows them in one pass from a stream;
:mod:`~streammn.trees.to_features` turns trees into weighted conjunctive features.
"""

from streammn.trees.exact import grow_level_wise
from streammn.trees.forest import Forest
from streammn.trees.hoeffding import HoeffdingGrower

__all__ = ["Forest", "HoeffdingGrower", "grow_level_wise"]
