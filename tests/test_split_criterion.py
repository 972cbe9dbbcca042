"""The significance split criterion (kappa='auto'): consistent on endless streams, small on wide
data, and exact where it can be checked by hand."""

import numpy as np
import pytest
from scipy.stats import chi2

from streammn.dtsl import DTSL
from streammn.planted import LogisticBN
from streammn.schema import Schema
from streammn.trees import kernels
from streammn.trees.criterion import SignificanceThresholds, n_candidates, significance_threshold


def test_threshold_is_the_corrected_chi_square_quantile():
    cards = np.array([2, 3, 2, 4])
    m = n_candidates(cards)
    # X_j = a tests: one per binary variable, one per value otherwise
    np.testing.assert_array_equal(m, [3 + 1 + 4, 1 + 1 + 4, 1 + 3 + 4, 1 + 3 + 1])
    k = np.array([1, 2, 10, 1000])
    got = significance_threshold(0.05, cards, m, k)
    want = 0.5 * chi2.isf(0.05 / (m * k * (k + 1)), cards - 1)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    # one look (exact growth): plain Bonferroni over the candidates
    np.testing.assert_allclose(
        significance_threshold(0.05, cards, m), 0.5 * chi2.isf(0.05 / m, cards - 1), rtol=1e-10
    )
    # the spending sequence sums to alpha however many looks
    looks = np.arange(1, 10**6, dtype=np.float64)
    assert (1.0 / (looks * (looks + 1))).sum() < 1.0


def test_thresholds_kept_per_target_and_look_are_the_function_s_values():
    """The streaming learner's table of thresholds gives bit for bit what the function gives,
    whatever the order in which looks first come, past its initial width."""
    rng = np.random.default_rng(5)
    cards = np.array([2, 3, 2, 4, 5])
    table = SignificanceThresholds(0.05, cards)
    for size in (1, 7, 40, 3):
        targets = rng.integers(0, cards.size, size)
        looks = rng.integers(1, 60, size)
        want = significance_threshold(0.05, cards[targets], n_candidates(cards)[targets], looks)
        np.testing.assert_array_equal(table.up_to(int(looks.max()))[targets, looks], want)


def _split_variables(model: DTSL) -> list[set[int]]:
    f = model.forest
    n = f.n_nodes
    tested = [set() for _ in range(model.schema.n_vars)]
    for node in np.flatnonzero(f.var[:n] >= 0):
        tested[int(f.tree[node])].add(int(f.var[node]))
    return tested


@pytest.mark.slow
def test_noise_leaves_stay_unsplit_however_many_looks():
    """30 independent coins, 600k rows, a look at every root every 200 rows (3,000 looks):
    the fixed prior ends up splitting almost every tree on noise, the test almost none, and
    more looks do not add false splits."""
    rng = np.random.default_rng(0)
    schema = Schema.binary(30)
    auto, fixed = DTSL(schema), DTSL(schema, kappa=0.1, replay_rows=0)
    splits_after = []
    for _ in range(10):
        rows = (rng.random((60_000, 30)) < 0.5).astype(np.uint8)
        auto.partial_fit(rows)
        fixed.partial_fit(rows)
        splits_after.append(int((auto.tree_stats()["n_leaves"] - 1).sum()))
    assert splits_after[-1] <= 3  # expected at most 30 * 0.05 / 0.9 = 1.7
    assert splits_after[-1] - splits_after[0] <= 2
    assert (fixed.tree_stats()["n_leaves"] > 1).sum() >= 20


def test_planted_stream_of_ten_million_rows_finds_every_parent_and_no_noise_split():
    bn = LogisticBN(6, seed=4, max_parents=2, weight_low=1.0, weight_high=2.0, noise_vars=4)
    schema = Schema.binary(bn.n_vars)
    model = DTSL(schema)
    rng = np.random.default_rng(1)
    for _ in range(10):
        model.partial_fit(bn.sample(1_000_000, rng))
    assert model.rows_seen == 10_000_000
    tested = _split_variables(model)
    noise = set(range(bn.n_signal, bn.n_vars))
    false_splits = sum(len(t & noise) for t in tested) + sum(len(tested[i]) for i in noise)
    assert false_splits <= 1
    for i in range(bn.n_signal):
        neighbours = set(map(int, bn.parents[i])) | set(bn.children[i])
        assert neighbours <= tested[i], (i, neighbours, tested[i])


@pytest.mark.slow
def test_exact_auto_stays_small_on_wide_data():
    """1,000 variables, 2,000 rows (nips-like width): one test per leaf at level 0.05 / 999
    keeps the trees near the planted structure and beats both an empty model and kappa 0.1."""
    bn = LogisticBN(1000, seed=3, max_parents=2)
    train = bn.sample(2000, np.random.default_rng(1))
    test = bn.sample(2000, np.random.default_rng(2))
    schema = Schema.binary(1000)
    auto = DTSL(schema, mode="exact").fit(train)
    empty = DTSL(schema, mode="exact", max_depth=0).fit(train)
    fixed = DTSL(schema, mode="exact", kappa=0.1, max_depth=2).fit(train)
    leaves = auto.tree_stats()["n_leaves"].sum()
    assert leaves <= 1000 + 4 * len(bn.edges())
    pll = {
        name: m.pll_terms(test).sum(axis=1).mean()
        for name, m in (("auto", auto), ("empty", empty), ("fixed", fixed))
    }
    assert pll["auto"] > pll["empty"] + 50
    assert pll["auto"] > pll["fixed"]


@pytest.mark.parametrize("batch,replay", [(333, "auto"), (5000, "auto"), (333, 2000), (777, 0)])
def test_defaults_do_not_depend_on_batch_boundaries_and_resume_exactly(batch, replay):
    """Also past the rebuild phase (a small buffer, or none), where chunks grow."""
    bn = LogisticBN(12, seed=2)
    rows = bn.sample(30_000, np.random.default_rng(3))
    schema = Schema.binary(12)
    whole = DTSL(schema, replay_rows=replay)
    for start in range(0, len(rows), 4096):
        whole.partial_fit(rows[start : start + 4096])
    cut = DTSL(schema, replay_rows=replay)
    for start in range(0, 14_000, batch):
        cut.partial_fit(rows[start : min(start + batch, 14_000)])
    cut = DTSL.from_bytes(cut.to_bytes())  # checkpoint and restore mid-stream
    for start in range(14_000, len(rows), batch):
        cut.partial_fit(rows[start : start + batch])
    assert whole.equals(cut)
    assert whole.tree_stats()["n_leaves"].sum() > 12


def test_memory_budget_covers_forest_replay_and_statistics():
    """A small budget: the replay buffer takes its quarter, the statistics what the forest
    leaves, and learning goes on with fewer collecting leaves instead of failing."""
    from streammn.trees.leaf_stats import LeafStats

    bn = LogisticBN(40, seed=6)
    schema = Schema.binary(40)
    rows = bn.sample(60_000, np.random.default_rng(4))
    small, large = DTSL(schema, memory_mb=0.3), DTSL(schema)
    for start in range(0, len(rows), 10_000):
        small.partial_fit(rows[start : start + 10_000])
        large.partial_fit(rows[start : start + 10_000])
        g = small._grower
        slot = LeafStats.slot_bytes(small.forest, np.int32)
        used = small.forest.nbytes + g._buf.nbytes + g._buf_bits.nbytes + g.stats.n_active * slot
        assert used <= small.memory_mb * 2**20
    assert small.replay_size < large.replay_size
    assert 0 < small.tree_stats()["active_leaves"] < large.tree_stats()["active_leaves"]
    assert small.tree_stats()["n_leaves"].sum() > 40  # it still learned structure


def test_one_pass_over_a_stream_the_buffer_holds_ends_with_the_exact_trees():
    """2,000 rows of deterministic-looking data (few rows per pattern): at the rebuild point
    that ends the stream, one pass at defaults has exactly the trees of exact DTSL."""
    bn = LogisticBN(20, seed=8, weight_low=2.0, weight_high=4.0)
    rows = bn.sample(2000, np.random.default_rng(5))
    schema = Schema.binary(20)
    one_pass = DTSL(schema)
    for start in range(0, 2000, 300):
        one_pass.partial_fit(rows[start : start + 300])
    exact = DTSL(schema, mode="exact").fit(rows)
    trees, want = one_pass.forest.get_state(), exact.forest.get_state()
    for field in want:
        if field != "node_slot":  # which leaves hold statistics: one pass's own state
            np.testing.assert_array_equal(trees[field], want[field], err_msg=field)
    assert exact.tree_stats()["n_leaves"].sum() > 40


def test_rebuilds_at_doubling_row_counts_while_the_buffer_holds_the_stream():
    schema = Schema.binary(3)
    model = DTSL(schema, replay_rows=9000, grace_period=300)
    grower = model._grower
    due = []
    for n in range(300, 15_000, 300):
        grower.rows_seen = n
        if grower._rebuild_due():
            due.append(n)
    # 1000 * 2**k rows, at the first boundary past each; then the last boundary within 9000
    assert due == [1200, 2100, 4200, 8100, 9000]
    assert not DTSL(schema, kappa=0.1, replay_rows=9000)._grower._rebuild_due()
    # the default buffer: chunks grow to 1,600 rows before it is full; every doubling point
    # and the last boundary within 100,000 rows (a multiple of 1,600) still rebuild
    grower = DTSL(schema)._grower
    grower.rows_seen, due = 0, []
    while grower.rows_seen < 300_000:
        grower.rows_seen = grower._next_boundary()
        if grower._rebuild_due():
            due.append(grower.rows_seen)
    assert due == [1000, 2000, 4000, 8000, 16_000, 32_000, 64_000, 99_200]


def test_rebuilt_leaves_hold_the_statistics_of_their_buffered_rows():
    """After a rebuild every active leaf's statistics are those of the buffered rows that reach
    it: kept from the exact pass that decided the leaf, or counted for leaves too small to
    have been tried."""
    bn = LogisticBN(12, seed=4, weight_low=1.0, weight_high=3.0)
    rows = bn.sample(2000, np.random.default_rng(5))
    rows[:, 3] = (rows[:, 3] + rows[:, 4]) % 3  # one 3-valued variable
    schema = Schema.from_cardinalities([2, 2, 2, 3] + [2] * 8)
    model = DTSL(schema, min_count=5)
    model.partial_fit(rows)
    grower = model._grower
    assert grower.rebuild_count == 2  # at 1,000 and 2,000 rows
    f, st = model.forest, grower.stats
    leaves = kernels.route(rows, f.roots, f.links)
    indicators = st.indicators(rows)
    slots = np.flatnonzero(st.slot_node >= 0)
    assert slots.size == f.leaves().size > 30
    for s in slots:
        node, t = st.slot_node[s], st.slot_target[s]
        at = leaves[:, t] == node
        for y in range(schema.cardinalities[t]):
            mine = at & (rows[:, t] == y)
            assert st.tot[s, y] == mine.sum()
            np.testing.assert_array_equal(st.stats[s, y], indicators[mine].sum(axis=0))
        assert st.n[s] == at.sum()


def test_rebuilds_start_from_the_last_rebuilds_statistics(monkeypatch):
    """A rebuild starts the nodes it grows as the last rebuild did (same root, or same child of
    a node split by the same test) from the statistics counted then and counts only the rows
    added since: the same trees, counts, statistics and state as counting every row again,
    with a 3-valued variable and missing values; rewriting the buffer drops them."""
    from streammn.trees import rebuild_passes

    bn = LogisticBN(12, seed=4, weight_low=1.0, weight_high=3.0)
    rng = np.random.default_rng(6)
    rows = bn.sample(4000, rng)
    rows[:, 3] = (rows[:, 3] + rows[:, 4]) % 3
    rows[rng.random(rows.shape) < 0.03] = kernels.MISSING
    schema = Schema.from_cardinalities([2, 2, 2, 3] + [2] * 8).with_missing(True)
    given = []  # whether each rebuild's passes had the last rebuild's growth
    passes_init = rebuild_passes.BufferPasses.__init__

    def spy(self, *args):
        given.append(args[-1] is not None)  # earlier
        passes_init(self, *args)

    monkeypatch.setattr(rebuild_passes.BufferPasses, "__init__", spy)
    reused = DTSL(schema, min_count=5).partial_fit(rows)
    assert given == [False, True, True]  # rebuilds at 1,000, 2,000 and 4,000 rows
    given.clear()
    monkeypatch.setattr(rebuild_passes.EarlierGrowth, "nbytes", property(lambda self: 2**62))
    recounted = DTSL(schema, min_count=5).partial_fit(rows)  # never kept: too big
    assert given == [False, False, False]
    assert reused.equals(recounted)
    assert reused.tree_stats()["n_leaves"].sum() > 40
    grower = reused._grower
    assert grower._earlier is not None
    grower.index_buffer()
    assert grower._earlier is None


def test_chunks_grow_with_the_stream_between_fixed_positions():
    """'auto': chunks of at most 1/32 of the stream and 32 grace periods; any row count inside
    a chunk names its end, so the chunks do not depend on how the stream was cut. Fixed kappa:
    every grace period."""
    schema = Schema.binary(3)
    grower = DTSL(schema, replay_rows=9000, grace_period=300)._grower
    fixed = DTSL(schema, kappa=0.1, replay_rows=9000, grace_period=300)._grower
    rng = np.random.default_rng(0)
    start, spacings = 0, []
    while start < 3_000_000:
        grower.rows_seen = start
        end = grower._next_boundary()
        for n in rng.integers(start, end, 5):
            grower.rows_seen = int(n)
            assert grower._next_boundary() == end
        spacing = end - start
        assert spacing % 300 == 0 and spacing <= max(300, start // 32) and spacing <= 32 * 300
        if end <= 32 * 300:
            assert spacing == 300
        spacings.append(spacing)
        start = end
    assert spacings[-1] == 32 * 300
    for n in (0, 8999, 9000, 123_456, 2_999_999):
        fixed.rows_seen = n
        assert fixed._next_boundary() == (n // 300 + 1) * 300


def test_rows_per_side_is_one_under_the_test_and_libras_ten_with_a_fixed_prior():
    schema = Schema.binary(3)
    assert DTSL(schema).rows_per_side == 1
    assert DTSL(schema, kappa=0.1).rows_per_side == 10
    assert DTSL(schema, kappa=0.1, min_count=4).rows_per_side == 4
