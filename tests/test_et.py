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


def all_spanning_trees(m):
    edges = [(u, v) for u in range(m) for v in range(u + 1, m)]
    for subset in itertools.combinations(edges, m - 1):
        w = np.zeros((m, m))
        for u, v in subset:
            w[u, v] = w[v, u] = 1.0
        if spanning_tree_sum(w) > 0:
            yield subset


@pytest.mark.parametrize("m", [2, 3, 4, 5])
def test_et_likelihood_matches_brute_force(m):
    from streammn.et.kernels import et_log_likelihood

    rng = np.random.default_rng(10 + m)
    k = 2
    node = rng.dirichlet(np.ones(k), size=m)
    pair = np.empty((m, m, k, k))
    for u in range(m):
        for v in range(m):
            # consistent joints: mix of independence and a random table with the same margins
            pair[u, v] = np.outer(node[u], node[v])
    for u in range(m):
        for v in range(u + 1, m):
            eps = rng.uniform(-0.5, 0.5) * min(node[u].min(), node[v].min()) ** 2
            pair[u, v] = pair[u, v] + eps * np.array([[1, -1], [-1, 1]])
            pair[v, u] = pair[u, v].T
    a = rng.uniform(0.2, 2.0, size=(m, m))
    beta = (a + a.T) / 2
    np.fill_diagonal(beta, 0)
    trees = list(all_spanning_trees(m))
    states = np.array(list(itertools.product(range(k), repeat=m)))
    z = sum(np.prod([beta[u, v] for u, v in t]) for t in trees)
    want = []
    for x in states:
        p = 0.0
        for t in trees:
            pt = np.prod([beta[u, v] for u, v in t]) / z
            px = np.prod(node[np.arange(m), x])
            for u, v in t:
                px *= pair[u, v, x[u], x[v]] / (node[u, x[u]] * node[v, x[v]])
            p += pt * px
        want.append(np.log(p))
    got = et_log_likelihood(states, beta, node, pair)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    np.testing.assert_allclose(np.exp(got).sum(), 1.0, rtol=1e-9)


def test_gradient_matches_finite_differences():
    from streammn.et.kernels import structure_objective_and_gradient

    rng = np.random.default_rng(3)
    m, n = 5, 7
    r = rng.uniform(0.3, 3.0, size=(n, m, m))
    r = (r + r.transpose(0, 2, 1)) / 2
    a = rng.uniform(0.2, 2.0, size=(m, m))
    beta = (a + a.T) / 2
    np.fill_diagonal(beta, 0)
    _, grad = structure_objective_and_gradient(beta, r)
    h = 1e-6
    for u, v in [(0, 1), (1, 4), (2, 3), (0, 4)]:
        bp, bm = beta.copy(), beta.copy()
        bp[u, v] += h; bp[v, u] += h
        bm[u, v] -= h; bm[v, u] -= h
        fd = (structure_objective_and_gradient(bp, r)[0] - structure_objective_and_gradient(bm, r)[0]) / (2 * h)
        np.testing.assert_allclose(grad[u, v], fd, rtol=1e-5, atol=1e-8)


def test_pgd_never_decreases_objective():
    from streammn.et.kernels import projected_gradient_ascent

    rng = np.random.default_rng(5)
    m, n = 5, 20
    r = rng.uniform(0.3, 3.0, size=(n, m, m))
    r = (r + r.transpose(0, 2, 1)) / 2
    beta = np.full((m, m), 1.0 / (m * (m - 1) / 2))
    np.fill_diagonal(beta, 0)
    out, history = projected_gradient_ascent(beta, r, max_iter=30)
    assert len(history) > 1
    assert np.all(np.diff(history) >= 0)
    assert abs(out[np.triu_indices(m, 1)].sum() - 1) < 1e-12 and out.min() >= 0


def test_likelihood_and_objective_invariant_to_scaling_beta():
    from streammn.et.kernels import structure_objective_and_gradient

    rng = np.random.default_rng(8)
    m, n = 6, 9
    r = rng.uniform(0.3, 3.0, size=(n, m, m))
    r = (r + r.transpose(0, 2, 1)) / 2
    a = rng.uniform(0.2, 2.0, size=(m, m))
    beta = (a + a.T) / 2
    np.fill_diagonal(beta, 0)
    value, _ = structure_objective_and_gradient(beta, r)
    for c in (0.01, 7.0, 1e4):
        np.testing.assert_allclose(structure_objective_and_gradient(c * beta, r)[0], value, rtol=1e-10)
