"""ET kernels against brute force."""

import itertools

import numpy as np
import pytest

from streammn.et.kernels import log_spanning_tree_sums


def spanning_tree_sum(w):
    m = w.shape[0]
    edges = [(u, v) for u in range(m) for v in range(u + 1, m)]
    total = 0.0
    for subset in itertools.combinations(edges, m - 1):
        parent = list(range(m))

        def find(a):
            while parent[a] != a:
                a = parent[a]
            return a

        acyclic = True
        for u, v in subset:
            ru, rv = find(u), find(v)
            if ru == rv:
                acyclic = False
                break
            parent[ru] = rv
        if acyclic:
            total += np.prod([w[u, v] for u, v in subset])
    return total


@pytest.mark.parametrize("m", [2, 3, 4, 5, 6])
def test_matrix_tree_matches_enumeration(m):
    rng = np.random.default_rng(m)
    a = rng.uniform(0.1, 3.0, size=(4, m, m))
    w = (a + a.transpose(0, 2, 1)) / 2
    got = log_spanning_tree_sums(w)
    want = np.log([spanning_tree_sum(wi) for wi in w])
    np.testing.assert_allclose(got, want, rtol=1e-10)
