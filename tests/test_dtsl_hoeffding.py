"""Hoeffding-mode DTSL: agreement with exact mode and with river, budget, batching, state."""

import numpy as np
import pytest
from river import tree as river_tree

from streammn.connectors.array import ArraySource
from streammn.connectors.base import Batch
from streammn.dtsl import DTSL
from streammn.schema import Schema, SchemaError
from streammn.trees import leaf_counting

# A chain Bayesian network X0 -> X1 -> ... -> X9: X_{i+1} copies X_i with probability COPY[i]
# and is a fair coin otherwise. Neighbours have different strengths, so every variable has one
# clearly best root split (its most strongly coupled neighbour).
COPY = [0.95, 0.7, 0.9, 0.6, 0.92, 0.75, 0.88, 0.65, 0.97]


def sample_chain(rng, n):
    X = np.empty((n, len(COPY) + 1), dtype=np.uint8)
    X[:, 0] = rng.random(n) < 0.3
    for i, p in enumerate(COPY):
        coin = rng.random(n) < 0.5
        X[:, i + 1] = np.where(rng.random(n) < p, X[:, i], coin)
    return X


def expected_root(i):
    n = len(COPY) + 1
    cands = []
    if i > 0:
        cands.append((COPY[i - 1], i - 1))
    if i < n - 1:
        cands.append((COPY[i], i + 1))
    return max(cands)[1]


def root_splits(model):
    f = model.forest
    return [int(f.var[r]) for r in f.roots]


def test_hoeffding_matches_exact_roots_and_approaches_its_pll():
    rng = np.random.default_rng(0)
    stream = sample_chain(rng, 120_000)
    test = sample_chain(rng, 5_000)
    schema = Schema.binary(stream.shape[1])
    hoeff = DTSL(schema, kappa=0.01, mode="hoeffding")
    gaps = []
    seen = 0
    for stop in (1_000, 10_000, 120_000):
        for start in range(seen, stop, 4096):
            hoeff.partial_fit(stream[start : min(stop, start + 4096)])
        seen = stop
        exact = DTSL(schema, kappa=0.01, mode="exact").fit(ArraySource(stream[:stop], schema))
        gaps.append(
            exact.to_dependency_network().pll(test) - hoeff.to_dependency_network().pll(test)
        )
    assert hoeff.rows_seen == 120_000
    assert root_splits(hoeff) == root_splits(exact) == [expected_root(i) for i in range(10)]
    assert gaps[-1] < gaps[0]
    assert abs(gaps[-1]) < 0.01 * abs(exact.to_dependency_network().pll(test))


def test_root_split_agrees_with_river():
    rng = np.random.default_rng(1)
    n = 3_000
    X = (rng.random((n, 6)) < 0.5).astype(np.uint8)
    # X0 follows X3 closely and X5 weakly; the rest is noise
    X[:, 0] = np.where(
        rng.random(n) < 0.8, X[:, 3], np.where(rng.random(n) < 0.3, X[:, 5], rng.random(n) < 0.5)
    )
    schema = Schema.binary(6)
    ours = DTSL(schema, kappa=1.0, mode="hoeffding", grace_period=200, delta=1e-7, tau=0.05)
    ours.partial_fit(X)
    names = [f"x{j}" for j in range(1, 6)]
    river_model = river_tree.HoeffdingTreeClassifier(
        split_criterion="info_gain",
        grace_period=200,
        delta=1e-7,
        tau=0.05,
        nominal_attributes=names,
    )
    for row in X:
        river_model.learn_one({f"x{j}": int(row[j]) for j in range(1, 6)}, int(row[0]))
    assert river_model._root.feature == "x3"
    assert ours.forest.var[ours.forest.roots[0]] == 3
    assert f"x{ours.forest.var[ours.forest.roots[0]]}" == river_model._root.feature


@pytest.mark.parametrize("replay", [0, 3000])
def test_learning_does_not_depend_on_batch_boundaries(replay):
    rng = np.random.default_rng(2)
    rows = sample_chain(rng, 20_000)
    schema = Schema.binary(rows.shape[1])
    a = DTSL(schema, kappa=0.1, replay_rows=replay).fit(ArraySource(rows, schema, batch_size=5000))
    b = DTSL(schema, kappa=0.1, replay_rows=replay).fit(ArraySource(rows, schema, batch_size=333))
    assert a.equals(b)
    assert a.tree_stats()["n_leaves"].sum() > 10


def test_memory_budget_bounds_active_leaves():
    rng = np.random.default_rng(3)
    rows = sample_chain(rng, 40_000)
    schema = Schema.binary(rows.shape[1])
    free = DTSL(schema, kappa=0.1, grace_period=100)
    tight = DTSL(schema, kappa=0.1, grace_period=100, max_leaves=12)
    for start in range(0, len(rows), 1000):
        free.partial_fit(rows[start : start + 1000])
        tight.partial_fit(rows[start : start + 1000])
        assert tight.tree_stats()["active_leaves"] <= 12
    assert free.tree_stats()["active_leaves"] > 12
    # leaves without statistics still learn their distribution from every row
    for t in range(rows.shape[1]):
        assert tight.leaf_rows(t).sum() == len(rows)
    assert tight.tree_stats()["n_leaves"].sum() > rows.shape[1]


def test_bad_batch_leaves_state_untouched():
    rng = np.random.default_rng(4)
    rows = sample_chain(rng, 3_000)
    schema = Schema.binary(rows.shape[1])
    model = DTSL(schema, kappa=0.1, grace_period=50).partial_fit(rows[:2000])
    before = model.to_bytes()
    bad = rows[2000:].astype(np.int64)
    bad[700, 4] = 2
    with pytest.raises(SchemaError, match="row 2700"):
        model.partial_fit(bad)
    with pytest.raises(SchemaError):
        model.partial_fit(rows[2000:, :5])
    bad_batch = Batch(np.ascontiguousarray(bad.astype(np.uint8)), end=3000, start=2000)
    with pytest.raises(SchemaError, match="row 2700"):
        model.partial_fit(bad_batch)
    assert model.to_bytes() == before
    assert model.rows_seen == 2000


@pytest.mark.parametrize("budget,replay", [(None, 0), (8, 0), (None, 2500)])
def test_state_round_trip_and_identical_continuation(budget, replay):
    rng = np.random.default_rng(5)
    rows = sample_chain(rng, 30_000)
    schema = Schema.binary(rows.shape[1])
    model = DTSL(schema, kappa=0.05, grace_period=150, max_leaves=budget, replay_rows=replay)
    model.partial_fit(rows[:12_345])
    restored = DTSL.from_bytes(model.to_bytes())
    assert restored.equals(model)
    assert repr(restored) == repr(model)
    for start in range(12_345, len(rows), 2000):
        model.partial_fit(rows[start : start + 2000])
        restored.partial_fit(rows[start : start + 2000])
    assert restored.equals(model)
    np.testing.assert_array_equal(
        restored.to_dependency_network().pll_terms(rows[:500]),
        model.to_dependency_network().pll_terms(rows[:500]),
    )
    uninterrupted = DTSL(
        schema, kappa=0.05, grace_period=150, max_leaves=budget, replay_rows=replay
    )
    uninterrupted.partial_fit(rows)
    assert uninterrupted.equals(model)


def test_replay_with_whole_stream_buffer_gives_full_leaf_statistics():
    """With a buffer as long as the stream, a new leaf is seeded with every earlier row that
    reaches it, so every active leaf's statistics equal a recount over all rows."""
    rng = np.random.default_rng(8)
    rows = sample_chain(rng, 6_000)
    schema = Schema.binary(rows.shape[1])
    model = DTSL(schema, kappa=0.1, grace_period=100, tau=1.0, replay_rows=6_000)
    for start in range(0, len(rows), 700):
        model.partial_fit(rows[start : start + 700])
    f, st = model.forest, model._grower.stats
    leaves = f.route(rows)
    active = np.flatnonzero(st.slot_node >= 0)
    assert f.depths().max() >= 3
    for s in active:
        node, t = st.slot_node[s], st.slot_target[s]
        at = rows[leaves[:, t] == node]
        for y in (0, 1):
            sub = at[at[:, t] == y]
            assert st.tot[s, y] == len(sub)
            np.testing.assert_array_equal(st.stats[s, y], sub.sum(axis=0))
    g = model._grower  # the buffer's value bitmaps are its rows'
    np.testing.assert_array_equal(g._buf_bits, leaf_counting.value_bits(g._buf, f.max_card))
    shallow = DTSL(schema, kappa=0.1, grace_period=100, tau=1.0, replay_rows=2_500, max_depth=2)
    shallow.partial_fit(rows)
    g = shallow._grower
    assert shallow.tree_stats()["depth"].max() == 2
    # ... through the ring's wrap (100-row chunks at any bit offset) and chunks longer than
    # the ring (3,000-row chunks, the last 1,000 rows kept)
    long_chunks = DTSL(schema, grace_period=3000, replay_rows=1000).partial_fit(rows)
    for g in (shallow._grower, long_chunks._grower):
        w = g.settings.replay_rows
        assert g.rows_seen > w == g._buf_len
        np.testing.assert_array_equal(g._buf, rows[-w:][(np.arange(w) - g._buf_pos) % w])
        np.testing.assert_array_equal(g._buf_bits, leaf_counting.value_bits(g._buf, f.max_card))
    # without replay, leaves created mid-stream only count the rows after their creation
    plain = DTSL(schema, kappa=0.1, grace_period=100, tau=1.0, replay_rows=0).partial_fit(rows)
    pst = plain._grower.stats
    pact = np.flatnonzero(pst.slot_node >= 0)
    assert (pst.n[pact] < plain.forest.counts[pst.slot_node[pact]].sum(axis=1)).any()


def test_exact_model_round_trip():
    rng = np.random.default_rng(6)
    rows = sample_chain(rng, 5_000)
    schema = Schema.binary(rows.shape[1])
    model = DTSL(schema, kappa=0.1, mode="exact").fit(rows)
    restored = DTSL.from_bytes(model.to_bytes())
    assert restored.equals(model)
    assert restored.forest.equals(model.forest)
    assert "mode='exact'" in repr(restored)


@pytest.mark.parametrize(
    "kappa,mode,replay",
    [
        (0.1, "hoeffding", "auto"),
        ("auto", "hoeffding", "auto"),
        ("auto", "hoeffding", 1500),
        (0.1, "exact", "auto"),
        ("auto", "exact", "auto"),
    ],
)
def test_thread_count_does_not_change_the_model(mode, kappa, replay, monkeypatch):
    """Counting, replay and scoring in blocks of trees (or slots) run in parallel (here at any
    size of step: small ones run on one thread by default)."""
    monkeypatch.setattr("streammn.trees.leaf_stats.PARALLEL_NS", 0)
    rng = np.random.default_rng(9)
    rows = sample_chain(rng, 8_000)
    schema = Schema.binary(rows.shape[1])
    one = DTSL(schema, kappa=kappa, mode=mode, n_threads=1, replay_rows=replay).fit(rows)
    for n_threads in (2, 3):  # 3: blocks of unequal size
        other = DTSL(schema, kappa=kappa, mode=mode, n_threads=n_threads, replay_rows=replay).fit(
            rows
        )
        assert one.forest.equals(other.forest)
        assert one.get_state()[1].keys() == other.get_state()[1].keys()
        for k, v in one.get_state()[1].items():
            np.testing.assert_array_equal(v, other.get_state()[1][k])


def test_parallel_steps_use_every_core_by_default_in_blocks_that_pay():
    """The default thread count is numba's; a step is cut into one block per thread only when
    each block gets at least half of ``PARALLEL_NS`` of work, never more blocks than items."""
    import numba

    from streammn.trees.forest import Forest
    from streammn.trees.leaf_stats import PARALLEL_NS, LeafStats

    schema = Schema.binary(4)
    assert DTSL(schema).threads == numba.get_num_threads()
    stats = LeafStats(Forest(schema), capacity=1, n_threads=8)
    assert stats._blocks(100, PARALLEL_NS - 1) == 1
    assert stats._blocks(100, PARALLEL_NS) == 2
    assert stats._blocks(100, 2 * PARALLEL_NS) == 4
    assert stats._blocks(100, 100 * PARALLEL_NS) == 8
    assert stats._blocks(3, 100 * PARALLEL_NS) == 3


def test_max_tree_leaves_bounds_every_tree_on_a_long_noisy_stream():
    rng = np.random.default_rng(11)
    schema = Schema.binary(12)
    capped = DTSL(schema, kappa=1.0, grace_period=50, tau=0.5, max_tree_leaves=4)
    free = DTSL(schema, kappa=1.0, grace_period=50, tau=0.5, max_tree_leaves=None)
    for _ in range(20):  # pure noise: an uncapped tree keeps splitting on it
        rows = (rng.random((5000, 12)) < 0.5).astype(np.uint8)
        capped.partial_fit(rows)
        free.partial_fit(rows)
    assert capped.tree_stats()["n_leaves"].max() <= 4
    assert capped.tree_stats()["n_leaves"].min() >= 2
    assert free.tree_stats()["n_leaves"].sum() > 4 * 12
    assert capped.tree_stats()["active_leaves"] == 0  # capped trees collect no statistics
    # the leaves keep learning their distributions, and the state round-trips exactly
    before = capped.forest.counts.sum()
    rows = (rng.random((1000, 12)) < 0.5).astype(np.uint8)
    restored = DTSL.from_bytes(capped.to_bytes())
    capped.partial_fit(rows)
    restored.partial_fit(rows)
    assert capped.forest.counts.sum() > before
    assert restored.to_bytes() == capped.to_bytes()
