"""ET kernels against brute force."""

import itertools

import numpy as np
import pytest

from streammn.et.kernels import log_spanning_tree_sums


def random_weights(rng, m):
    """A symmetric, zero-diagonal structure matrix with every edge weight in [0.2, 2]."""
    a = rng.uniform(0.2, 2.0, size=(m, m))
    beta = (a + a.T) / 2
    np.fill_diagonal(beta, 0)
    return beta


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
    beta = random_weights(rng, m)
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


def random_ratios(rng, n, m, k=3):
    """Random rows and a positive ratio table with table[u, v, a, b] = table[v, u, b, a]."""
    t = rng.uniform(0.3, 3.0, size=(m, m, k, k))
    return rng.integers(0, k, size=(n, m)), (t + t.transpose(1, 0, 3, 2)) / 2


def test_gradient_matches_finite_differences():
    from streammn.et.kernels import structure_objective_and_gradient

    rng = np.random.default_rng(3)
    m, n = 5, 7
    rows, table = random_ratios(rng, n, m)
    beta = random_weights(rng, m)
    _, grad = structure_objective_and_gradient(beta, rows, table)
    h = 1e-6
    for u, v in [(0, 1), (1, 4), (2, 3), (0, 4)]:
        bp, bm = beta.copy(), beta.copy()
        bp[u, v] += h
        bp[v, u] += h
        bm[u, v] -= h
        bm[v, u] -= h
        fd = (
            structure_objective_and_gradient(bp, rows, table)[0]
            - structure_objective_and_gradient(bm, rows, table)[0]
        ) / (2 * h)
        np.testing.assert_allclose(grad[u, v], fd, rtol=1e-5, atol=1e-8)


def test_gradient_at_a_size_where_dgetri_runs_blocked_matches_numpy_inverses():
    """The kernel's inverse (LAPACK dgetri on the Cholesky factor, scipy's Cython LAPACK) at
    r = 99, past LAPACK's block size, where dgetri uses the workspace it asked for: the summed
    gradient equals the effective resistances from np.linalg's inverse row by row."""
    from streammn.et.kernels import effective_resistances, row_log_dets

    rng = np.random.default_rng(5)
    m, n = 100, 6
    rows, table = random_ratios(rng, n, m, k=2)
    beta = random_weights(rng, m)
    _, grad = row_log_dets(rows, beta, table, with_grad=True)
    expected = np.zeros((m, m))
    iu, iv = np.triu_indices(m, 1)
    for x in rows:
        ratios = table[iu, iv, x[iu], x[iv]]
        w = np.zeros((m, m))
        w[iu, iv] = beta[iu, iv] * ratios
        resistance = effective_resistances((w + w.T)[None])[0]
        expected[iu, iv] += ratios * resistance[iu, iv]
    np.testing.assert_allclose(grad, expected + expected.T, rtol=1e-9, atol=1e-12)


def test_row_kernels_on_one_variable_give_zero_terms():
    """No Laplacian to factorise or invert (r = 0): LAPACK is not called, which would refuse
    lda = 0 (before: a SystemError from the kernel and a LAPACK message on stderr)."""
    from streammn.et.kernels import cell_resistance_sums, row_log_dets

    rows, table, beta = np.zeros((3, 1), dtype=np.int64), np.ones((1, 1, 2, 2)), np.zeros((1, 1))
    log_dets, grad = row_log_dets(rows, beta, table, with_grad=True)
    np.testing.assert_array_equal(log_dets, np.zeros(3))
    np.testing.assert_array_equal(grad, np.zeros((1, 1)))
    sums = cell_resistance_sums(rows, beta, table)[1]
    np.testing.assert_array_equal(sums, np.zeros((1, 1, 2, 2)))


def test_cell_resistance_sums_give_the_table_gradient_and_the_beta_gradient():
    from streammn.et.kernels import (
        cell_resistance_sums,
        row_log_dets,
        structure_objective_and_gradient,
    )

    rng = np.random.default_rng(4)
    m, n = 5, 9
    rows, table = random_ratios(rng, n, m)
    beta = random_weights(rng, m)
    log_dets, sums = cell_resistance_sums(rows, beta, table)
    np.testing.assert_array_equal(log_dets, row_log_dets(rows, beta, table)[0])
    assert not np.tril(sums.sum(axis=(2, 3))).any()
    # d (sum of log dets) / d table[u, v, a, b] = beta_uv S[u, v, a, b]
    h = 1e-6
    for u, v, ca, cb in [(0, 1, 0, 2), (1, 4, 1, 1), (2, 3, 2, 0), (0, 4, 0, 0)]:
        tp, tm = table.copy(), table.copy()
        tp[u, v, ca, cb] += h
        tp[v, u, cb, ca] += h
        tm[u, v, ca, cb] -= h
        tm[v, u, cb, ca] -= h
        fd = (row_log_dets(rows, beta, tp)[0].sum() - row_log_dets(rows, beta, tm)[0].sum()) / (
            2 * h
        )
        np.testing.assert_allclose(beta[u, v] * sums[u, v, ca, cb], fd, rtol=1e-5, atol=1e-8)
    # and sum_ab table S is the data part of the beta gradient
    data_grad = (table * sums).sum(axis=(2, 3))
    data_grad = (data_grad + data_grad.T) / n
    _, bound_grad = structure_objective_and_gradient(beta, rows, table, bound=True)
    np.fill_diagonal(data_grad, 0)
    np.testing.assert_allclose(data_grad, bound_grad, rtol=1e-12, atol=1e-14)


def test_pgd_never_decreases_objective():
    from streammn.et.kernels import projected_gradient_ascent

    rng = np.random.default_rng(5)
    m, n = 5, 20
    rows, table = random_ratios(rng, n, m)
    beta = np.full((m, m), 1.0 / (m * (m - 1) / 2))
    np.fill_diagonal(beta, 0)
    out, history = projected_gradient_ascent(beta, rows, table, max_iter=30)
    assert len(history) > 1
    assert np.all(np.diff(history) >= 0)
    assert abs(out[np.triu_indices(m, 1)].sum() - 1) < 1e-12 and out.min() >= 0


def test_likelihood_and_objective_invariant_to_scaling_beta():
    from streammn.et.kernels import structure_objective_and_gradient

    rng = np.random.default_rng(8)
    m, n = 6, 9
    rows, table = random_ratios(rng, n, m)
    beta = random_weights(rng, m)
    value, _ = structure_objective_and_gradient(beta, rows, table)
    for c in (0.01, 7.0, 1e4):
        np.testing.assert_allclose(
            structure_objective_and_gradient(c * beta, rows, table)[0], value, rtol=1e-10
        )


# --- theta, rho, initialisation and the learner -------------------------------------------------


def tree_rows(parents, n, rng, keep=0.85):
    """Ancestral samples of a binary tree: each child copies its parent with prob. ``keep``."""
    m = len(parents)
    rows = np.empty((n, m), dtype=np.uint8)
    rows[:, 0] = rng.integers(0, 2, n)
    for v in range(1, m):
        flip = rng.random(n) > keep
        rows[:, v] = rows[:, parents[v]] ^ flip
    return rows


def test_smoothed_theta_has_no_zero_and_keeps_marginal_consistency():
    from streammn import Schema
    from streammn.et.density import smoothed_theta
    from streammn.et.kernels import et_log_likelihood
    from streammn.stats import PairCounts

    schema = Schema.from_cardinalities([2, 3, 2])
    counts = PairCounts(schema).update(np.array([[0, 0, 1], [0, 0, 1], [0, 1, 1]]))
    node, pair = smoothed_theta(counts, pseudo_count=1.0)
    assert counts.table(0, 1)[1].sum() == 0 and counts.table(1, 2)[2].sum() == 0  # zero counts
    for u, ku in enumerate([2, 3, 2]):
        assert node[u, :ku].min() > 0 and abs(node[u, :ku].sum() - 1) < 1e-12
        for v, kv in enumerate([2, 3, 2]):
            if u != v:
                np.testing.assert_allclose(pair[u, v, :ku, :kv].sum(axis=1), node[u, :ku])
    beta = np.ones((3, 3)) / 3
    np.fill_diagonal(beta, 0)
    unseen = np.array([[1, 2, 0]])
    ll = et_log_likelihood(unseen, beta, node, pair)
    assert np.isfinite(ll).all()
    # Eq. 6 normalises over all states with the smoothed theta
    states = np.array(list(itertools.product(range(2), range(3), range(2))))
    assert abs(np.exp(et_log_likelihood(states, beta, node, pair)).sum() - 1) < 1e-10


def test_rho_is_eq8_determinant_ratio_and_sums_to_m_minus_1():
    from streammn.et.density import edge_appearance

    rng = np.random.default_rng(3)
    m = 6
    a = rng.uniform(0.0, 1.0, size=(m, m))
    beta = np.triu(a, 1)
    beta[0, 3] = 0.0
    beta = beta + beta.T
    rho = edge_appearance(beta)
    total = spanning_tree_sum(beta)
    for u, v in itertools.combinations(range(m), 2):
        cut = beta.copy()
        cut[u, v] = cut[v, u] = 0.0
        np.testing.assert_allclose(rho[u, v], 1 - spanning_tree_sum(cut) / total, atol=1e-12)
    assert rho[0, 3] == 0
    np.testing.assert_allclose(np.triu(rho, 1).sum(), m - 1)


def test_convex_bound_initialisation_maximises_the_eq14_term():
    from streammn.et.density import initial_beta
    from streammn.et.kernels import structure_objective_and_gradient

    rng = np.random.default_rng(11)
    m, n = 5, 15
    rows, table = random_ratios(rng, n, m)
    beta = initial_beta(rows, table)
    uniform = np.full((m, m), 1.0 / (m * (m - 1) / 2))
    np.fill_diagonal(uniform, 0)
    best = structure_objective_and_gradient(beta, rows, table, bound=True)[0]
    assert best >= structure_objective_and_gradient(uniform, rows, table, bound=True)[0]
    for _ in range(20):  # concave problem: no random simplex point does better
        x = rng.dirichlet(np.ones(m * (m - 1) // 2))
        other = np.zeros((m, m))
        other[np.triu_indices(m, 1)] = x
        assert (
            structure_objective_and_gradient(other + other.T, rows, table, bound=True)[0]
            <= best + 1e-9
        )


def test_planted_tree_recovered_exactly_and_chow_liu_is_the_tree_density():
    from streammn import Schema
    from streammn.et import EnsembleOfTrees
    from streammn.et.density import chow_liu_beta, ETDensity

    rng = np.random.default_rng(0)
    parents = [0, 0, 0, 1, 1, 2, 5, 3]
    rows = tree_rows(parents, 6000, rng)
    schema = Schema.from_cardinalities([2] * len(parents))
    learner = EnsembleOfTrees(schema, sample_rows=1500).fit(rows)
    truth = {(min(v, p), max(v, p)) for v, p in enumerate(parents) if v}
    assert set(learner.edges) == truth
    node, pair = learner.theta()
    cards = schema.cardinalities
    cl = chow_liu_beta(node, pair, cards)
    assert {(u, v) for u, v in zip(*np.nonzero(np.triu(cl, 1)))} == truth
    # ET with beta on one tree = the tree's product formula
    probe = rows[:50].astype(np.int64)
    expected = np.log(node[np.arange(8), probe]).sum(axis=1)
    for u, v in truth:
        expected += np.log(
            pair[u, v, probe[:, u], probe[:, v]] / (node[u, probe[:, u]] * node[v, probe[:, v]])
        )
    np.testing.assert_allclose(ETDensity(schema, cl, node, pair).log_likelihood(probe), expected)
    # and the learned ET is at least as likely on held-out rows as the Chow-Liu tree
    test = tree_rows(parents, 2000, rng)
    assert (
        learner.density().log_likelihood(test).mean()
        >= ETDensity(schema, cl, node, pair).log_likelihood(test).mean() - 1e-3
    )


def test_density_file_round_trip_and_bad_file():
    from streammn import Schema
    from streammn.et import EnsembleOfTrees, ETDensity
    from streammn.et.density import ETDensityError

    rows = tree_rows([0, 0, 1, 1], 500, np.random.default_rng(2))
    learner = EnsembleOfTrees(Schema.from_cardinalities([2] * 4), sample_rows=200).fit(rows)
    density = learner.density()
    again = ETDensity.from_bytes(density.to_bytes())
    np.testing.assert_array_equal(again.log_likelihood(rows), density.log_likelihood(rows))
    with pytest.raises(ETDensityError, match="model.et"):
        ETDensity.from_bytes(b"junk", where="model.et")


def test_pair_tables_shrink_toward_independence_by_the_james_stein_intensity():
    from streammn import Schema
    from streammn.et import EnsembleOfTrees
    from streammn.et.density import independence_shrinkage, smoothed_theta
    from streammn.stats import PairCounts

    # hand-computed: p = [[.375, .125], [.125, .375]], margins 1/2, sum (t - p)^2 = 4 / 64
    table = np.array([[30.0, 10.0], [10.0, 30.0]])
    assert independence_shrinkage(table, 80) == pytest.approx(0.6875 / (79 * 0.0625))
    assert independence_shrinkage(np.array([[4.0, 4.0], [4.0, 4.0]]), 16) == 1.0
    schema = Schema.from_cardinalities([2, 2])
    rows = np.repeat(np.array([[0, 0], [0, 1], [1, 0], [1, 1]]), [30, 10, 10, 30], axis=0)
    node, pair = smoothed_theta(PairCounts(schema).update(rows), pseudo_count=1.0)
    lam = 0.6875 / (79 * 0.0625)
    dirichlet = (table + 0.25) / 81
    np.testing.assert_allclose(
        pair[0, 1, :2, :2], lam * np.outer(node[0], node[1]) + (1 - lam) * dirichlet
    )
    # shrink=False: the plug-in (Dirichlet-smoothed) table of the paper, also through the learner
    plain = smoothed_theta(PairCounts(schema).update(rows), pseudo_count=1.0, shrink=False)[1]
    np.testing.assert_allclose(plain[0, 1, :2, :2], dirichlet)
    learner = EnsembleOfTrees(schema, shrink=False, sample_rows=50).fit(rows)
    np.testing.assert_allclose(learner.theta()[1][0, 1, :2, :2], dirichlet)
    assert EnsembleOfTrees.from_bytes(learner.to_bytes()).shrink is False
    # independent variables: most pairs fully shrunk (ratio 1 on every cell); a real dependence
    # keeps most of its plug-in table, and less shrinkage with more rows
    rng = np.random.default_rng(5)
    noise = rng.integers(0, 2, size=(500, 12))
    noise[:, 1] = noise[:, 0] ^ (rng.random(500) < 0.2)
    counts = PairCounts(Schema.from_cardinalities([2] * 12)).update(noise)
    node, pair = smoothed_theta(counts)
    ratio = pair / (node[:, None, :, None] * node[None, :, None, :])
    flat = [np.allclose(ratio[u, v, :2, :2], 1.0) for u in range(2, 12) for v in range(u + 1, 12)]
    assert np.mean(flat) > 0.75
    strong = [
        independence_shrinkage(
            PairCounts(Schema.from_cardinalities([2, 2])).update(noise[:n, :2]).table(0, 1), n
        )
        for n in (100, 500)
    ]
    assert 0 < strong[1] < strong[0] < 0.1
