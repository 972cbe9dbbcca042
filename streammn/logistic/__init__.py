"""Logistic-regression conditionals: one L1-regularised logistic regression per variable on the
indicators of the others, the other kind of dependency-network CPD the DN2MN paper learns
(seed 003). :mod:`~streammn.logistic.coding` lays out the columns and writes the regressions as
conjunctive features, :mod:`~streammn.logistic.batch` fits them, and
:mod:`~streammn.logistic.conditionals` keeps a stream's sample and the fit that DTSL's
``cpd='lr'`` / ``'auto'`` use."""
