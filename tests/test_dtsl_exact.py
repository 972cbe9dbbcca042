"""Exact level-wise DTSL equals a plain recursive LEARNTREE (paper Table II, Libra's rule)."""

import math

import numpy as np
import pytest

from streammn.connectors.array import ArraySource
from streammn.dtsl import DTSL, DTSLError
from streammn.schema import Schema
from streammn.trees import Forest, grow_level_wise
from streammn.trees.exact import SourcePasses


# --- independent reference: depth-first LEARNTREE, written plainly --------------------------
def _loglik(counts, prior):
    d = len(counts)
    n = sum(counts)
    return sum(c * (math.log(c + prior / d) - math.log(n + prior)) for c in counts if c > 0)


def _target_counts(rows, t, d):
    return [int((rows[:, t] == y).sum()) for y in range(d)]


def learn_tree(rows, t, cards, kappa, min_count, prior, max_depth=None, depth=0):
    """Return ('leaf', counts) or ('split', j, a, counts, true_subtree, false_subtree)."""
    d = cards[t]
    counts = _target_counts(rows, t, d)
    best, best_gain = None, -math.inf
    if max_depth is None or depth < max_depth:
        parent_ll = _loglik(counts, prior)
        for j in range(len(cards)):
            if j == t:
                continue
            values = [1] if cards[j] == 2 else range(cards[j])
            for a in values:
                mask = rows[:, j] == a
                n_true = int(mask.sum())
                if n_true < min_count or len(rows) - n_true < min_count:
                    continue
                gain = (
                    _loglik(_target_counts(rows[mask], t, d), prior)
                    + _loglik(_target_counts(rows[~mask], t, d), prior)
                    - parent_ll
                )
                if gain > best_gain:
                    best, best_gain = (j, a), gain
    if best is None or best_gain <= (d - 1) * -math.log(kappa):
        return ("leaf", counts)
    j, a = best
    mask = rows[:, j] == a
    return (
        "split",
        j,
        a,
        counts,
        learn_tree(rows[mask], t, cards, kappa, min_count, prior, max_depth, depth + 1),
        learn_tree(rows[~mask], t, cards, kappa, min_count, prior, max_depth, depth + 1),
    )


def forest_tree(forest, node):
    counts = forest.counts[node, : forest.cards[forest.tree[node]]].tolist()
    if forest.var[node] < 0:
        return ("leaf", counts)
    return (
        "split",
        int(forest.var[node]),
        int(forest.val[node]),
        counts,
        forest_tree(forest, forest.true[node]),
        forest_tree(forest, forest.false[node]),
    )


def random_data(rng, n_rows, cards):
    """Rows with chained dependencies so that the trees get several levels."""
    cards = np.asarray(cards)
    X = np.zeros((n_rows, len(cards)), dtype=np.int64)
    for j, c in enumerate(cards):
        noise = rng.integers(0, c, n_rows)
        if j >= 2:
            keep = rng.random(n_rows) < 0.6
            src = (X[:, j - 1] + X[:, j - 2] * (X[:, 0] > 0)) % c
            X[:, j] = np.where(keep, src, noise)
        else:
            X[:, j] = noise
    return X.astype(np.uint8)


def depth(tree):
    return 0 if tree[0] == "leaf" else 1 + max(depth(tree[4]), depth(tree[5]))


CASES = [
    # cards, kappa, min_count, prior, max_depth, max_leaves, batch_size
    ([2, 2, 2, 2, 2, 2], 0.5, 5, 1.0, None, None, 1000),
    ([2, 2, 2, 2, 2, 2], 1.0, 3, 1.0, None, 3, 37),
    ([2, 3, 2, 4, 2, 3], 0.1, 4, 1.0, None, None, 64),
    ([3, 2, 3, 2, 3], 0.9, 2, 2.0, 3, 5, 50),
    ([2, 2, 2, 2, 2, 2, 2], 1e-4, 10, 1.0, None, None, 100),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_exact_mode_equals_recursive_learntree(case):
    cards, kappa, min_count, prior, max_depth, max_leaves, batch = CASES[case]
    rng = np.random.default_rng(case)
    rows = random_data(rng, 400, cards)
    schema = Schema.from_cardinalities(cards)
    model = DTSL(
        schema,
        kappa=kappa,
        mode="exact",
        min_count=min_count,
        prior=prior,
        max_depth=max_depth,
        max_leaves=max_leaves,
    )
    model.fit(ArraySource(rows, schema, batch_size=batch))
    deepest = 0
    for t in range(len(cards)):
        expected = learn_tree(rows, t, cards, kappa, min_count, prior, max_depth)
        assert forest_tree(model.forest, model.forest.roots[t]) == expected
        deepest = max(deepest, depth(expected))
        assert model.leaf_rows(t).sum() == len(rows)
    assert model.tree_stats()["depth"].max() == deepest
    # the same trees when every pass routes rows from the roots (no row -> node cache)
    uncached = Forest(schema, prior=prior)
    grow_level_wise(
        uncached,
        ArraySource(rows, schema, batch_size=batch),
        model.tree_settings,
        max_leaves or 10**6,
        cache_bytes=0,
    )
    assert uncached.equals(model.forest)
    if max_leaves is None:  # one pass per level, plus the pass that finds nothing to split
        assert model.n_passes <= deepest + 1
    assert deepest >= 2, "test data should give trees with several levels"


def test_sibling_subtraction_counts_one_child_per_pair():
    """With room for the split leaves' statistics, a pass counts only the smaller child of
    each pair (the other is its parent minus it), and the trees are still LEARNTREE's."""
    cards = [2, 3, 2, 2, 2, 2]
    rows = random_data(np.random.default_rng(7), 400, cards)
    schema = Schema.from_cardinalities(cards)
    passes = SourcePasses(ArraySource(rows, schema, batch_size=64))
    counted = []

    def count_pass(forest, stats, chunk, trees):
        counted.append((chunk.copy(), forest.counts[chunk].sum(axis=1)))
        passes(forest, stats, chunk, trees)

    forest = Forest(schema)
    settings = DTSL(schema, kappa=0.5, mode="exact", min_count=5).tree_settings
    grow_level_wise(forest, None, settings, 10**6, count_pass=count_pass)
    for t in range(len(cards)):
        assert forest_tree(forest, forest.roots[t]) == learn_tree(rows, t, cards, 0.5, 5, 1.0)
    for chunk, _ in counted[1:]:
        parents = forest.parent[chunk]
        assert np.unique(parents).size == parents.size  # never both children of a pair
    paired = 0
    for chunk, n in counted[1:]:
        parent = forest.parent[chunk]
        sibling = np.where(forest.true[parent] == chunk, forest.false[parent], forest.true[parent])
        sibling_n = forest.counts[sibling].sum(axis=1)
        in_frontier = sibling_n >= 2 * 5  # splittable siblings were in the same frontier
        assert (n[in_frontier] <= sibling_n[in_frontier]).all()  # the smaller one was counted
        paired += in_frontier.sum()
    assert paired >= 5


def test_exact_mode_needs_rewindable_source():
    schema = Schema.binary(3)
    model = DTSL(schema, mode="exact")
    with pytest.raises(DTSLError, match="re-iterable"):
        model.fit(iter([]))
    with pytest.raises(DTSLError, match="hoeffding"):
        model.partial_fit(np.zeros((5, 3), dtype=np.uint8))


@pytest.mark.slow
def test_dependency_network_pll_matches_trees_and_features():
    cards = [2, 3, 2, 2, 3]
    rng = np.random.default_rng(7)
    rows = random_data(rng, 500, cards)
    schema = Schema.from_cardinalities(cards)
    model = DTSL(schema, kappa=0.5, mode="exact", min_count=5, cpd="tree").fit(rows)
    dn = model.to_dependency_network()
    test = random_data(rng, 200, cards)
    tree_terms = dn.pll_terms(test)
    from streammn.dn import DependencyNetwork

    plain = DependencyNetwork(schema, dn.cpds)  # features only, no trees
    np.testing.assert_allclose(plain.pll_terms(test), tree_terms, rtol=0, atol=1e-12)
    # the tree CPD by hand: smoothed leaf probability of the row's value
    logp = model.forest.log_probs()
    leaves = model.forest.route(test)
    for t in range(len(cards)):
        np.testing.assert_allclose(tree_terms[:, t], logp[leaves[:, t], test[:, t]])
    prior = 1.0
    for t in range(len(cards)):
        for leaf in model.forest.leaves(t):
            c = model.forest.counts[leaf, : cards[t]]
            np.testing.assert_allclose(
                np.exp(logp[leaf, : cards[t]]), (c + prior / cards[t]) / (c.sum() + prior)
            )
