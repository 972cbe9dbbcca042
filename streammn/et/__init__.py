"""Ensemble-of-trees (ET) structure learning (Lin, Zhu, Lee & Taskar 2009); work in progress."""
