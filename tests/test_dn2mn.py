"""DN2MN against the paper's worked examples, known MNs, and a literal Table 1/2 implementation."""

import itertools
import math

import numpy as np
import pytest

from helpers.helpers_mn import all_rows, brute_joint, random_featureset
from streammn import Schema
from streammn.dn import DependencyNetwork
from streammn.dn.conversion import (
    BASES,
    ORDERINGS,
    DN2MNError,
    dn2mn,
    marginals_from_rows,
    rotation_fractions,
)
from streammn.features import FeatureSet
from streammn.network.model import MarkovNetwork

T, F_ = 1, 0  # the paper's True / False as values of binary variables


def table_dn(schema, tables):
    """DN whose CPD i is {assignment of its parents + value of X_i: probability}."""
    cpds = []
    for i, table in enumerate(tables):
        cpds.append(
            FeatureSet.from_features(
                schema, [(math.log(p), [(j, v, True) for j, v in conds]) for conds, p in table]
            )
        )
    return DependencyNetwork(schema, cpds)


def joint_of(mn):
    return mn.joint()[1]


# --- Section 4.1 ---------------------------------------------------------------------------------


def example_41():
    schema = Schema.binary(2)
    p1 = {T: 4 / 5, F_: 2 / 5}  # P(X1 = T | X2)
    p2 = {T: 2 / 3, F_: 1 / 4}  # P(X2 = T | X1)
    cpd1 = [(((0, a), (1, b)), p1[b] if a == T else 1 - p1[b]) for a in (T, F_) for b in (T, F_)]
    cpd2 = [(((0, a), (1, b)), p2[a] if b == T else 1 - p2[a]) for a in (T, F_) for b in (T, F_)]
    return schema, table_dn(schema, [cpd1, cpd2])


def test_section_41_worked_example():
    schema, dn = example_41()
    states = all_rows(schema)  # FF, FT, TF, TT
    expect = {(T, T): 0.4, (T, F_): 0.2, (F_, T): 0.1, (F_, F_): 0.3}
    mn = dn2mn(dn, base="single", base_instance=[T, T], orderings="one")
    # the factors phi_1 (1, 1, 1/4, 3/2) and phi_2 (1, 1/2) of the paper, up to log Z
    rel = mn.log_score(states) - mn.log_score(np.array([[T, T]], np.uint8))[0]
    phi = {(T, T): 1 * 1, (T, F_): 1 * 0.5, (F_, T): 0.25 * 1, (F_, F_): 1.5 * 0.5}
    np.testing.assert_allclose(rel, [math.log(phi[tuple(s)]) for s in states], atol=1e-12)
    for base in BASES:
        for orderings in ORDERINGS:
            mn = dn2mn(
                dn,
                base=base,
                orderings=orderings,
                base_instance=[F_, T],
                marginals=[[0.3, 0.7], [0.6, 0.4]],
            )
            np.testing.assert_allclose(joint_of(mn), [expect[tuple(s)] for s in states], atol=1e-12)


# --- Section 5 -----------------------------------------------------------------------------------


def example_5():
    schema = Schema.binary(2)
    p1 = {T: 4 / 5, F_: 1 / 5}
    p2 = {T: 1 / 5, F_: 4 / 5}
    cpd1 = [(((0, a), (1, b)), p1[b] if a == T else 1 - p1[b]) for a in (T, F_) for b in (T, F_)]
    cpd2 = [(((0, a), (1, b)), p2[a] if b == T else 1 - p2[a]) for a in (T, F_) for b in (T, F_)]
    return schema, table_dn(schema, [cpd1, cpd2])


def test_section_5_inconsistent_example():
    schema, dn = example_5()
    states = [tuple(s) for s in all_rows(schema)]
    tt = {(T, T): 4, (T, F_): 16, (F_, T): 1, (F_, F_): 64}
    ff = {(T, T): 64, (T, F_): 1, (F_, T): 16, (F_, F_): 4}
    for x, table in (([T, T], tt), ([F_, F_], ff)):
        mn = dn2mn(dn, base="single", base_instance=x, orderings="one")
        np.testing.assert_allclose(joint_of(mn), [table[s] / 85 for s in states], atol=1e-12)

    def kl_from_uniform(p):
        return float(np.sum(0.25 * np.log(0.25 / p)))

    single = kl_from_uniform(
        joint_of(dn2mn(dn, base="single", base_instance=[T, T], orderings="one"))
    )
    for base, orderings in [
        ("uniform", "one"),
        ("uniform", "two"),
        ("uniform", "rotations2"),
        ("marginals", "rotations2"),
    ]:
        avg = dn2mn(dn, base=base, orderings=orderings, marginals=[[0.5, 0.5], [0.5, 0.5]])
        assert kl_from_uniform(joint_of(avg)) < single
    # averaging over all base instances and both orders recovers the uniform distribution here
    np.testing.assert_allclose(
        joint_of(dn2mn(dn, base="uniform", orderings="two")), 0.25, atol=1e-12
    )


# --- Section 4.2 SIMPLIFYFEATURE and Section 5.2 rotations ----------------------------------------


def test_simplifyfeature_example():
    # P(X2 | X1, X4) with f1 = X1 ^ !X2 ^ X4, f2 = X1 ^ X2, f3 = X2 ^ !X4 and x' all true.
    # The paper's x^(2) = [X1, X2, T, T] fixes the variables *after* X2 in [1, 2, 3, 4]; under
    # Table 2's convention (variables before X_i are fixed) that is the order [4, 3, 2, 1].
    schema = Schema.binary(4)
    w1, w2, w3 = 0.7, -1.3, 0.4
    cpd = FeatureSet.from_features(
        schema,
        [
            (w1, [(0, T, True), (1, F_, True), (3, T, True)]),
            (w2, [(0, T, True), (1, T, True)]),
            (w3, [(1, T, True), (3, F_, True)]),
        ],
    )
    empty = FeatureSet.empty(schema)
    dn = DependencyNetwork(schema, [empty, cpd, empty, empty])
    mn = dn2mn(
        dn, base="single", base_instance=[T] * 4, orderings="one", order=[3, 2, 1, 0], merge=False
    )
    # phi_2 = exp(w1 (X1 ^ !X2) + w2 (X1 ^ X2) - w2 X1); f3 is removed
    assert sorted(mn.features.to_list()) == sorted(
        [
            (w1, ((0, T, True), (1, F_, True))),
            (w2, ((0, T, True), (1, T, True))),
            (-w2, ((0, T, True),)),
        ]
    )


def test_section_52_rotation_weights():
    n = 20
    # CPD of X7 contains X4 ^ X6 ^ X7 ^ X13 (1-based); summed over all rotations of [1..n]
    assert rotation_fractions(n, [(j - 7) % n for j in (4, 6, 13)]).tolist() == pytest.approx(
        [6 / n, (4 + (n - 13)) / n, 2 / n, 1 / n]
    )
    schema = Schema.binary(n)
    w = 0.9
    cpds = [FeatureSet.empty(schema) for _ in range(n)]
    cpds[6] = FeatureSet.from_features(
        schema, [(w, [(3, T, True), (5, T, True), (6, T, True), (12, T, True)])]
    )
    mn = dn2mn(
        DependencyNetwork(schema, cpds),
        base="single",
        base_instance=[T] * n,
        orderings="rotations",
        merge=False,
    )
    numerators = {tuple(v + 1 for v, _, _ in c): wt / w for wt, c in mn.features if wt > 0}
    # 1/n, 2/n and (4 + (n-13))/n as in the paper; the last is 6/n, not the paper's 5/n: the
    # paper's list of starting points (X8..X12) omits the rotation starting at X13.
    assert numerators == pytest.approx(
        {(4, 6, 7, 13): 1 / n, (4, 7, 13): 2 / n, (7, 13): (4 + (n - 13)) / n, (7,): 6 / n}
    )
    assert sum(numerators.values()) == pytest.approx(1.0)


# --- consistent DNs from known MNs ----------------------------------------------------------


def conditional_table_dn(mn):
    """The exact DN of an MN: CPD i = log P(X_i | MB(X_i)) as one feature per table entry."""
    schema = mn.schema
    cpds = []
    for i in range(schema.n_vars):
        mb = sorted(mn.markov_blanket(i))
        assigns = list(itertools.product(*[range(schema.cardinalities[j]) for j in mb]))
        rows = np.zeros((len(assigns), schema.n_vars), np.uint8)
        for r, u in enumerate(assigns):
            rows[r, mb] = u
        logp = mn.log_conditional(rows, i)
        feats = [
            (logp[r, a], [(j, u_j, True) for j, u_j in zip(mb, u)] + [(i, a, True)])
            for r, u in enumerate(assigns)
            for a in range(schema.cardinalities[i])
        ]
        cpds.append(FeatureSet.from_features(schema, feats))
    return DependencyNetwork(schema, cpds)


def own_features_dn(mn):
    """The DN whose CPD i is the MN's features that mention X_i (unnormalised, consistent)."""
    var_ptr, var_feats = mn.index
    return DependencyNetwork(
        mn.schema,
        [
            mn.features.select(var_feats[var_ptr[i] : var_ptr[i + 1]])
            for i in range(mn.schema.n_vars)
        ],
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_consistent_dns_reproduce_the_mn_exactly(seed):
    rng = np.random.default_rng(seed)
    schema = Schema.from_cardinalities([2, 3, 2, 4, 2, 3, 2])
    mn = MarkovNetwork(schema, random_featureset(rng, schema, 14, max_len=3, p_eq=0.6))
    _, truth = brute_joint(mn.features, schema)
    marg = [rng.dirichlet(np.ones(d)) for d in schema.cardinalities]
    x0 = [int(rng.integers(d)) for d in schema.cardinalities]
    order = rng.permutation(schema.n_vars)
    for dn in (conditional_table_dn(mn), own_features_dn(mn)):
        for base in BASES:
            for orderings in ORDERINGS:
                got = dn2mn(
                    dn,
                    base=base,
                    orderings=orderings,
                    base_instance=x0,
                    marginals=marg,
                    order=order,
                )
                np.testing.assert_allclose(
                    joint_of(got), truth, atol=1e-9, err_msg=f"{base}/{orderings}"
                )


def test_consistent_dn_with_ten_binary_variables():
    rng = np.random.default_rng(5)
    schema = Schema.binary(10)
    mn = MarkovNetwork(schema, random_featureset(rng, schema, 25, max_len=3))
    _, truth = brute_joint(mn.features, schema)
    dn = conditional_table_dn(mn)
    rows = rng.integers(0, 2, size=(200, 10))
    for orderings in ORDERINGS:
        got = dn2mn(dn, orderings=orderings, train=rows, weights="closed-form")
        np.testing.assert_allclose(joint_of(got), truth, atol=1e-9)


# --- averaging against a literal implementation of Tables 1 and 2 -------------------------------


def simplify_feature(i, conds, x, inv_order, numerator):
    """Table 2 (``None`` when a fixed test fails, i.e. the feature is removed)."""
    out = []
    for j, v, eq in conds:
        if inv_order[i] < inv_order[j] or (i == j and numerator):
            out.append((j, v, eq))
        elif (x[j] == v) != eq:
            return None
    return out


def reference_dn2mn(dn, x, order):
    """Table 1 for one base instance and one order."""
    inv = np.empty(len(order), int)
    inv[np.asarray(order)] = np.arange(len(order))
    out = []
    for i, cpd in enumerate(dn.cpds):
        for w, conds in cpd:
            fn = simplify_feature(i, conds, x, inv, True)
            fd = simplify_feature(i, conds, x, inv, False)
            if fn is not None:
                out.append((w, fn))
            if fd is not None:
                out.append((-w, fd))
    return out


def reference_average(dn, base_probs, orders):
    schema = dn.schema
    feats = []
    for x in all_rows(schema):
        px = np.prod([base_probs[j][x[j]] for j in range(schema.n_vars)])
        if px == 0:
            continue
        for o in orders:
            feats += [(w * px / len(orders), c) for w, c in reference_dn2mn(dn, x, o)]
    return FeatureSet.from_features(schema, feats)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 4])
def test_averaging_matches_brute_force_over_instances_and_orders(seed):
    rng = np.random.default_rng(seed)
    schema = Schema.from_cardinalities([2, 3, 2, 3, 2])
    n = schema.n_vars
    dn = DependencyNetwork(
        schema, [random_featureset(rng, schema, 6, max_len=4, p_eq=0.6) for _ in range(n)]
    )  # inconsistent
    marg = [rng.dirichlet(np.ones(d)) for d in schema.cardinalities]
    x0 = [int(rng.integers(d)) for d in schema.cardinalities]
    order = rng.permutation(n)
    rot = [np.roll(order, -s) for s in range(n)]
    orders = {
        "one": [order],
        "two": [order, order[::-1]],
        "rotations": rot,
        "rotations2": rot + [np.roll(order[::-1], -s) for s in range(n)],
    }
    probs = {
        "single": [np.eye(d)[x0[j]] for j, d in enumerate(schema.cardinalities)],
        "uniform": [np.full(d, 1 / d) for d in schema.cardinalities],
        "marginals": marg,
    }
    states = all_rows(schema)
    for base in BASES:
        for orderings in ORDERINGS:
            ref = MarkovNetwork(schema, reference_average(dn, probs[base], orders[orderings]))
            for merge in (True, False):
                got = dn2mn(
                    dn,
                    base=base,
                    orderings=orderings,
                    base_instance=x0,
                    marginals=marg,
                    order=order,
                    merge=merge,
                )
                a, b = got.log_score(states), ref.log_score(states)
                np.testing.assert_allclose(
                    a - a[0], b - b[0], atol=1e-10, err_msg=f"{base}/{orderings}/{merge}"
                )


def test_merge_sums_duplicates_and_drops_zeros():
    schema, dn = example_41()
    raw = dn2mn(dn, base="uniform", merge=False)
    merged = dn2mn(dn, base="uniform")
    keys = [c for _, c in merged.features]
    assert len(set(keys)) == len(keys) and merged.n_features < raw.n_features
    assert np.all(np.abs(merged.weights) > 1e-12)
    states = all_rows(schema)
    np.testing.assert_allclose(merged.log_score(states), raw.log_score(states), atol=1e-12)


def test_errors_and_marginals():
    schema, dn = example_41()
    with pytest.raises(DN2MNError, match="marginals"):
        dn2mn(dn)
    with pytest.raises(DN2MNError, match="base_instance"):
        dn2mn(dn, base="single")
    with pytest.raises(DN2MNError, match="orderings"):
        dn2mn(dn, base="uniform", orderings="all")
    with pytest.raises(DN2MNError, match="permutation"):
        dn2mn(dn, base="uniform", order=[0, 0])
    bad = DependencyNetwork(
        schema, [FeatureSet.from_features(schema, [(-np.inf, [(0, 1, True)])]), dn.cpds[1]]
    )
    with pytest.raises(DN2MNError, match="finite"):
        dn2mn(bad, base="uniform")
    rows = np.array([[0, 1], [1, 1], [1, 1]])
    m = marginals_from_rows(rows, schema)
    np.testing.assert_allclose(m[0], [(1 + 0.5) / 4, (2 + 0.5) / 4])
    np.testing.assert_allclose(m[1], [0.5 / 4, 3.5 / 4])


def test_a_learned_dn_carries_its_marginals():
    """dn2mn(dn) on DTSL's DN (Hoeffding, which streams, and exact) takes the base
    distribution from the counts in the trees: equal to passing the training rows, and
    marginals= / train= still override it."""
    from streammn.demo import planted_network
    from streammn.dtsl import DTSL
    from streammn.inference import sample

    planted, _ = planted_network(6, seed=2)
    rows = sample(planted, 2000, seed=3)
    for mode in ("hoeffding", "exact"):
        dn = (
            DTSL(planted.schema, kappa=0.01, mode=mode, grace_period=100)
            .fit(rows)
            .to_dependency_network()
        )
        counts = dn.marginal_counts()
        for i, c in enumerate(counts):
            np.testing.assert_array_equal(c, np.bincount(rows[:, i], minlength=2))
        from_trees = dn2mn(dn)
        assert from_trees.features.equals(
            dn2mn(dn, train=rows, weights="closed-form").features, atol=1e-12
        )
        uniform = [np.ones(2)] * 6
        assert dn2mn(dn, marginals=uniform).features.equals(
            dn2mn(dn, base="uniform").features, atol=1e-12
        )
        assert not from_trees.features.equals(dn2mn(dn, base="uniform").features, atol=1e-6)
    bare = DependencyNetwork(dn.schema, dn.cpds)  # e.g. read from a Libra .dn file
    assert bare.marginal_counts() is None
    with pytest.raises(DN2MNError, match="train= rows, or a DN with its trees"):
        dn2mn(bare)


def test_streammn_dn2mn_stays_the_function_and_the_old_module_path_warns():
    """Importing a learner once shadowed the function with its module (issue 38)."""
    import subprocess
    import sys

    code = (
        "import streammn; from streammn.dtsl import DTSL; "
        "import streammn.dn.conversion; print(callable(streammn.dn2mn), streammn.dn2mn.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "streammn.dn.conversion"]
    with pytest.warns(DeprecationWarning, match="streammn.dn.conversion"):
        import importlib

        import streammn.dn2mn as old

        importlib.reload(old)
    assert old.dn2mn is dn2mn


def test_the_parallel_conversion_runs_only_where_it_pays_and_gives_the_same_bits(monkeypatch):
    """The conversion's parallel and serial twins give the same model to the bit; by default a
    DN of fewer than PARALLEL_FEATURES features converts serially (a first run on a small model
    never compiles the parallel twin), a larger one on the pool."""
    from streammn.demo import planted_network
    from streammn.dn import conversion
    from streammn.dtsl import DTSL
    from streammn.inference import sample

    planted, _ = planted_network(8, seed=0)
    rows = sample(planted, 2000, seed=1)
    dn = (
        DTSL(planted.schema, mode="exact", kappa=0.01, cpd="tree").fit(rows).to_dependency_network()
    )
    on_pool, serial = conversion.dn2mn(dn, parallel=True), conversion.dn2mn(dn, parallel=False)
    assert on_pool.features.equals(serial.features)
    assert np.array_equal(on_pool.features.weights, serial.features.weights)

    ran = []
    for name in ("_convert", "_convert_serial"):
        kernel = getattr(conversion, name)
        monkeypatch.setattr(
            conversion, name, lambda *a, _k=kernel, _n=name: ran.append(_n) or _k(*a)
        )
    conversion.dn2mn(dn)
    monkeypatch.setattr(conversion, "PARALLEL_FEATURES", 1)
    conversion.dn2mn(dn)
    assert ran == ["_convert_serial", "_convert"]
