"""Random decision-tree dependency networks shaped like DTSL's (for speed benchmarks).

Each CPD is a probabilistic decision tree grown by splitting a uniformly chosen leaf on a test
``X_j = v`` (j not yet on the path) until it has ``leaves`` leaves, which gives random-binary-
search-tree depths (about ``2 ln leaves``) like greedy trees. Leaves hold Dirichlet(1) draws over
the target. The tree is written as DEFAULT features: one per leaf and target value, with the path
conditions and ``X_i = a``, weight ``log P(a | leaf)``.
"""

from __future__ import annotations

import numpy as np

from streammn.dn import DependencyNetwork
from streammn.features import FeatureSet
from streammn.schema import Schema


def random_tree_features(rng, schema: Schema, i: int, leaves: int) -> FeatureSet:
    cards = schema.cardinalities
    others = [j for j in range(schema.n_vars) if j != i]
    paths = [[]]
    while len(paths) < leaves:
        k = int(rng.integers(len(paths)))
        used = {v for v, _, _ in paths[k]}
        free = [j for j in others if j not in used]
        if not free:
            break
        j = int(rng.choice(free))
        v = int(rng.integers(cards[j]))
        path = paths.pop(k)
        paths += [path + [(j, v, True)], path + [(j, v, False)]]
    feats = []
    for path in paths:
        p = rng.dirichlet(np.ones(cards[i]))
        feats += [(float(np.log(p[a])), path + [(i, a, True)]) for a in range(cards[i])]
    return FeatureSet.from_features(schema, feats)


def random_tree_dn(schema: Schema, leaves: int, seed: int = 0) -> DependencyNetwork:
    rng = np.random.default_rng(seed)
    return DependencyNetwork(
        schema, [random_tree_features(rng, schema, i, leaves) for i in range(schema.n_vars)]
    )
