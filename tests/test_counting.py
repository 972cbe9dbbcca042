"""The segmented count (streammn.trees.counting) against a row-by-row count in numpy, through
both of its routes (bit-sliced and row routing), binary and multi-valued, with missing values."""

import numpy as np
import pytest

from streammn.schema import Schema
from streammn.trees import counting, kernels
from streammn.trees.forest import Forest
from streammn.trees.stats import LeafStats


def random_forest(schema, rng, n_splits):
    f = Forest(schema)
    for _ in range(n_splits):
        leaves = f.leaves()
        node = leaves[rng.integers(leaves.size)]
        t = f.tree[node]
        var = int(rng.choice([j for j in range(schema.n_vars) if j != t]))
        f.split([node], [var], [int(rng.integers(f.cards[var]))], [np.zeros(f.max_card)])
    return f


def brute_force(f, st, rows, dest, grace, slot_n, slot_last):
    """Leaf counts, slot totals and statistics, buffer leaves and due slots, row by row."""
    counts, tot, stats = f.counts.copy(), st.tot.copy(), st.stats.copy()
    ind = st.indicators(rows).astype(np.int64)
    leaves = kernels.route(rows, f.roots, f.links)
    row_leaf = np.zeros((rows.shape[1], rows.shape[0]), dtype=np.int32)
    n, due = slot_n.copy(), []
    for r in range(rows.shape[0]):
        for t in range(rows.shape[1]):
            leaf, y = leaves[r, t], rows[r, t]
            if dest[r] >= 0:
                row_leaf[t, dest[r]] = leaf
            if y == kernels.MISSING:
                continue
            counts[leaf, y] += 1
            s = f.slot[leaf]
            if s >= 0:
                tot[s, y] += 1
                stats[s, y] += ind[r]
                n[s] += 1
                if n[s] - slot_last[s] == grace:
                    due.append(s)
    return counts, tot, stats, row_leaf, n, sorted(due)


@pytest.mark.parametrize("cards,missing", [((2,) * 9, False), ((2, 3, 4, 2, 5, 3), False),
                                           ((2, 3, 4, 2, 5, 3), True)])
@pytest.mark.parametrize("route", ["numbered", "listed", "sparse", "rows"])
@pytest.mark.parametrize("n_rows", [1, 70, 333])
def test_segmented_count_equals_row_by_row(cards, missing, route, n_rows):
    """Bit-sliced routing with the groups' rows ``numbered`` (trees of many active leaves),
    ``listed`` (few active leaves) or ``sparse`` (listed: active leaves with few rows by the
    leaves' counts); row routing."""
    rng = np.random.default_rng(len(cards) + n_rows)
    schema = Schema.from_cardinalities(list(cards)).with_missing(missing)
    f = random_forest(schema, rng, 150 if route == "numbered" else 40)
    leaves = f.leaves()
    st = LeafStats(f, capacity=leaves.size)
    share = {"numbered": 0.9, "sparse": 0.1}.get(route, 0.7)
    st.activate(leaves[rng.random(leaves.size) < share])
    f.counts[leaves] = 1
    st.stats[:] = rng.integers(0, 5, st.stats.shape)
    rows = (rng.random((n_rows, len(cards))) * np.array(cards)).astype(np.uint8)
    if missing:
        rows[rng.random(rows.shape) < 0.1] = kernels.MISSING
    dest = np.where(rng.random(n_rows) < 0.8, rng.permutation(n_rows), -1).astype(np.int64)
    grace = 3
    st.n[:] = rng.integers(0, 3, st.n.shape)
    st.last_attempt[:] = 0
    expected = brute_force(f, st, rows, dest, grace, st.n, st.last_attempt)

    n = f.n_nodes
    table, steps, nodes = kernels.routing_table(f.links[:n], f.tree[:n], f.depth[:n],
                                                f.roots.shape[0])
    assert nodes.sum() == n
    forced = np.full_like(nodes, 2 ** 40) if route == "rows" else np.zeros_like(nodes)
    row_leaf = np.zeros((len(cards), n_rows), dtype=np.int32)
    due = np.empty((1, st.slot_node.shape[0]), dtype=np.int64)
    n_due = np.zeros(1, dtype=np.int64)
    counting.accumulate(rows, counting.value_bits(rows, f.max_card),
                        counting.lanes(st.indicators(rows)), st.K, f.cards,
                        np.arange(len(cards), dtype=np.int64), f.roots, f.links, table, steps,
                        forced, f.slot, f.counts, True, st.tot, st.stats, st.n, st.last_attempt,
                        grace, due, n_due, dest, row_leaf)
    counts, tot, stats, leaf_of, slot_n, due_slots = expected
    np.testing.assert_array_equal(f.counts, counts)
    np.testing.assert_array_equal(st.tot, tot)
    np.testing.assert_array_equal(st.stats, stats)
    np.testing.assert_array_equal(row_leaf[:, dest[dest >= 0]], leaf_of[:, dest[dest >= 0]])
    np.testing.assert_array_equal(st.n, slot_n)
    assert sorted(due[0, :n_due[0]].tolist()) == due_slots


def test_lane_sums_flush_before_uint8_overflows():
    """600 identical rows at one leaf: more than a uint8 lane holds."""
    schema = Schema.binary(3)
    f = Forest(schema)
    st = LeafStats(f, capacity=3)
    st.activate(f.roots)
    st.add(np.ones((600, 3), dtype=np.uint8))
    assert (st.stats[:, 1] == 600).all() and (st.tot[:, 1] == 600).all()


@pytest.mark.parametrize("cards", [(2,) * 70, (2, 3, 4, 2, 5, 3)])
def test_replay_equals_row_by_row(cards):
    """Rows of just-split leaves move to the children and are counted there (binary: summed
    by group from the buffer's rows as lanes, past the 64-column block; else row by row)."""
    from streammn.trees.hoeffding import _padded_buffer
    rng = np.random.default_rng(len(cards))
    schema = Schema.from_cardinalities(list(cards))
    f = random_forest(schema, rng, 60)
    rows = _padded_buffer(301, len(cards))
    rows[:] = (rng.random((301, len(cards))) * np.array(cards)).astype(np.uint8)
    row_leaf = np.ascontiguousarray(kernels.route(rows, f.roots, f.links).T)
    leaves = f.leaves()
    split = leaves[rng.random(leaves.size) < 0.3]
    for node in split:
        var = (f.tree[node] + 1) % len(cards)
        f.split([node], [var], [int(rng.integers(f.cards[var]))], [np.zeros(f.max_card)])
    st = LeafStats(f, capacity=f.leaves().size)
    new_leaves = f.leaves()
    st.activate(new_leaves[rng.random(new_leaves.size) < 0.8])
    st.stats[:] = rng.integers(0, 5, st.stats.shape)
    tot, stats, n = st.tot.copy(), st.stats.copy(), st.n.copy()
    ind = st.indicators(rows).astype(np.int64) if st.binary else \
        kernels.indicator_matrix(rows, f.cards, st.offsets, st.K).astype(np.int64)
    leaf_after = kernels.route(rows, f.roots, f.links)
    for r in range(rows.shape[0]):
        for t in range(len(cards)):
            leaf = leaf_after[r, t]
            s = f.slot[leaf]
            if f.parent[leaf] in split and row_leaf[t, r] == f.parent[leaf] and s >= 0:
                tot[s, rows[r, t]] += 1
                stats[s, rows[r, t]] += ind[r]
                n[s] += 1
    trees = np.unique(f.tree[split])
    st.replay(rows, row_leaf, trees)
    np.testing.assert_array_equal(row_leaf, leaf_after.T)
    np.testing.assert_array_equal(st.tot, tot)
    np.testing.assert_array_equal(st.stats, stats)
    np.testing.assert_array_equal(st.n, n)
