"""Tree -> feature conversion on the DTSL paper's Figure 1 example (Section III.B)."""

import itertools

import numpy as np
import pytest

from streammn.dn import DependencyNetwork
from streammn.schema import Schema
from streammn.trees.to_features import FeatureMethodError, forest_features, tree_features
from streammn.trees.forest import Forest

T, F = 1, 0
X1, X2, X3, X4 = 0, 1, 2, 3


def figure1_forest():
    """Figure 1: the tree for X4 tests X1 = T at the root, then X2 = T on the false side."""
    schema = Schema.from_cardinalities([2, 2, 2, 2], names=["X1", "X2", "X3", "X4"])
    forest = Forest(schema)
    root = forest.roots[X4]
    forest.counts[root] = [40, 60]  # (X4 = F, X4 = T)
    (x1_true,), (x1_false,) = forest.split([root], [X1], [T], [[5, 25]])
    forest.split([x1_false], [X2], [T], [[20, 5]])  # x1_false holds [35, 35]
    return forest


def as_set(fs):
    return {conds for _, conds in fs}


def cond(*pairs):
    return tuple(sorted((v, a, True) for v, a in pairs))


DEFAULT = {
    cond((X1, T), (X4, T)),
    cond((X1, T), (X4, F)),
    cond((X1, F), (X2, T), (X4, T)),
    cond((X1, F), (X2, T), (X4, F)),
    cond((X1, F), (X2, F), (X4, T)),
    cond((X1, F), (X2, F), (X4, F)),
}
PRUNE_EXTRA = {cond((X1, F), (X4, T)), cond((X1, F), (X4, F))}
NONZERO = {
    cond((X1, T), (X4, T)),
    cond((X1, T)),
    cond((X2, T), (X4, T)),
    cond((X2, T)),
    cond((X4, T)),
}


def test_default_features_of_figure1():
    forest = figure1_forest()
    fs = tree_features(forest, X4, "default")
    assert fs.n_features == 6
    assert as_set(fs) == DEFAULT
    weights = {conds: w for w, conds in fs}
    # leaf X1 = T holds [5, 25]: P(X4 = T) = (25 + 1/2) / (30 + 1)
    assert weights[cond((X1, T), (X4, T))] == pytest.approx(np.log(25.5 / 31))
    assert weights[cond((X1, F), (X2, F), (X4, F))] == pytest.approx(np.log(15.5 / 46))


def test_prune_adds_the_two_interior_rules():
    fs = tree_features(figure1_forest(), X4, "prune")
    assert fs.n_features == 8
    assert as_set(fs) == DEFAULT | PRUNE_EXTRA
    weights = {conds: w for w, conds in fs}
    assert weights[cond((X1, F), (X4, T))] == pytest.approx(np.log(35.5 / 71))


def test_prune_k_cuts_the_tree_at_depth_k():
    forest = figure1_forest()
    assert as_set(tree_features(forest, X4, "prune-5")) == DEFAULT | PRUNE_EXTRA
    assert as_set(tree_features(forest, X4, "prune-10")) == DEFAULT | PRUNE_EXTRA
    cut = tree_features(forest, X4, "prune-1")
    assert as_set(cut) == {cond((X1, T), (X4, T)), cond((X1, T), (X4, F))} | PRUNE_EXTRA


def test_nonzero_drops_false_conditions():
    fs = tree_features(figure1_forest(), X4, "nonzero")
    assert fs.n_features == 5
    assert as_set(fs) == NONZERO


def test_single_leaf_trees_give_marginal_features():
    fs = forest_features(figure1_forest(), "default")
    assert as_set(fs[X1]) == {cond((X1, T)), cond((X1, F))}
    assert tree_features(figure1_forest(), X1, "nonzero").n_features == 1


def test_unknown_method_is_an_error():
    with pytest.raises(FeatureMethodError, match="prune-k"):
        forest_features(figure1_forest(), "prune-x")


def test_default_features_reproduce_the_tree_conditional():
    forest = figure1_forest()
    dn = DependencyNetwork(forest.schema, forest_features(forest, "default"))
    rows = np.array(list(itertools.product([0, 1], repeat=4)), dtype=np.uint8)
    logp = forest.log_probs()
    for r in rows:
        leaf = (
            forest.true[forest.roots[X4]]
            if r[X1] == T
            else forest.true[forest.false[forest.roots[X4]]]
            if r[X2] == T
            else forest.false[forest.false[forest.roots[X4]]]
        )
        got = dn.log_conditional(r[None, :], X4)[0]
        np.testing.assert_allclose(got, logp[leaf, :2], atol=1e-12)
    np.testing.assert_allclose(dn.pll_terms(rows), forest.leaf_log_prob(rows), atol=1e-12)


def test_leaf_paths_and_sizes_are_inspectable():
    forest = figure1_forest()
    leaves = forest.leaves(X4)
    paths = sorted(forest.path(int(n)) for n in leaves)
    assert paths == sorted(
        [[(X1, T, True)], [(X1, T, False), (X2, T, True)], [(X1, T, False), (X2, T, False)]]
    )
    assert forest.n_leaves()[X4] == 3 and forest.depths()[X4] == 2
    assert sorted(forest.leaf_rows(X4).tolist()) == [25, 30, 45]
