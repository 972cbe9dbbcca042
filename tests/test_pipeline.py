"""The count of a chunk with its side work (streammn.trees.pipeline): the parallel step that
also prepares the next chunk and writes this one to the replay buffer gives what the three
steps give one after another, binary and multi-valued, with missing values and a buffer that
wraps; and a grower that takes that step learns the same model as one that does not."""

import numpy as np
import pytest

from streammn.dtsl import DTSL
from streammn.schema import Schema
from streammn.trees import leaf_counting, kernels, pipeline, replay
from streammn.trees.hoeffding import _padded_buffer
from streammn.trees.leaf_stats import LeafStats
from tests.test_counting import random_forest

CASES = [((2,) * 9, False), ((2, 3, 4, 2, 5, 3), False), ((2, 3, 4, 2, 5, 3), True)]


def stream(cards, missing, n_rows, seed):
    rng = np.random.default_rng(seed)
    rows = (rng.random((n_rows, len(cards))) * np.array(cards)).astype(np.uint8)
    if missing:
        rows[rng.random(rows.shape) < 0.1] = kernels.MISSING
    return rows


def empty_buffer(st, n_rows):
    f = st.forest
    return (
        _padded_buffer(n_rows, f.schema.n_vars),
        np.zeros((f.schema.n_vars, f.max_card, -(-n_rows // 64)), dtype=np.uint64),
        np.zeros((n_rows, replay.packed_words(st.K)), dtype=np.uint64),
    )


@pytest.mark.parametrize("cards,missing", CASES)
@pytest.mark.parametrize("n_blocks", [1, 2, 3])
def test_count_and_stage_equals_the_steps_one_after_another(cards, missing, n_blocks):
    """Counts, leaf counts, slot totals, due slots; the next chunk's bitmaps and lanes; the
    buffer's rows, bitmaps and packed rows after a chunk that wraps around its end (two
    runs). One block does all three in turn."""
    schema = Schema.from_cardinalities(list(cards)).with_missing(missing)
    rows = stream(cards, missing, 450, seed=n_blocks)
    chunk, ahead = rows[:300], rows[300:]
    results = []
    for staged in (False, True):
        f = random_forest(schema, np.random.default_rng(1), 60)
        leaves = f.leaves()
        st = LeafStats(f, capacity=leaves.size)
        st.activate(leaves[np.random.default_rng(2).random(leaves.size) < 0.8])
        buffer = empty_buffer(st, 500)
        pipeline.remember(
            rows[:400],
            leaf_counting.value_bits(rows[:400], f.max_card, not missing),
            *buffer,
            np.array([[0, 0, 400]]),
            f.cards,
            st.offsets,
        )
        runs = np.array([[0, 400, 100], [100, 0, 200]])  # the ring's end, then its start
        bits, lanes = st.prepare(chunk)
        n = f.n_nodes
        args = (
            chunk,
            bits,
            lanes,
            st.K,
            f.cards,
            np.arange(len(cards), dtype=np.int64),
            f.roots,
            f.links,
            f.tree[:n],
            f.depth[:n],
            f.slot,
            f.counts,
        )
        due = np.empty((n_blocks, st.slot_node.shape[0]), dtype=np.int64)
        count = leaf_counting.Count(*args, True, st.tot, st.stats, st.n, st.last_attempt, 3, due)
        if staged:
            ahead_bits = np.zeros((len(cards), f.max_card, 3), dtype=np.uint64)
            ahead_lanes = leaf_counting.aligned_zeros(150, lanes.shape[1])
            n_due = pipeline.count_and_stage(
                count,
                ahead,
                st.indicators(ahead),
                not missing,
                ahead_bits,
                ahead_lanes,
                *buffer,
                runs,
                st.offsets,
            )
            prepared_ahead = ahead_bits, ahead_lanes
        else:
            n_due = leaf_counting.accumulate(count)
            pipeline.remember(chunk, bits, *buffer, runs, f.cards, st.offsets)
            prepared_ahead = tuple(a.copy() for a in st.prepare(ahead))
        results.append(
            (f.counts, st.tot, st.stats, st.n, np.sort(due[0, :n_due]), *prepared_ahead, *buffer)
        )
    for one, other in zip(*results):
        np.testing.assert_array_equal(one, other)
    ring, ring_bits, ring_packed = results[1][-3:]
    held = np.concatenate([chunk[100:300], rows[200:400], chunk[:100]])  # ring order
    np.testing.assert_array_equal(ring, held)
    np.testing.assert_array_equal(
        ring_bits, leaf_counting.value_bits(held, f.max_card, not missing)
    )
    expected = np.zeros_like(ring_packed)
    replay.pack_rows(ring, 0, 500, f.cards, st.offsets, expected)
    np.testing.assert_array_equal(ring_packed, expected)


@pytest.mark.parametrize("cards,missing", CASES)
def test_a_grower_that_stages_chunks_learns_the_same_model(cards, missing, monkeypatch):
    """Default DTSL at two threads with every count parallel (so every chunk but a batch's
    last is counted with its side work) against one thread (every step in turn): the same
    trees and the same state, replay buffer included, over batches whose ends fall inside
    chunks and a buffer that wraps."""
    monkeypatch.setattr("streammn.trees.leaf_stats.PARALLEL_NS", 0)
    schema = Schema.from_cardinalities(list(cards)).with_missing(missing)
    rows = stream(cards, missing, 9_000, seed=3)
    models = []
    for n_threads in (1, 2):
        model = DTSL(schema, n_threads=n_threads, replay_rows=2_500)
        for start in range(0, rows.shape[0], 1_700):
            model.partial_fit(rows[start : start + 1_700])
        models.append(model)
    one, two = models
    assert one.forest.equals(two.forest)
    for key, value in one.get_state()[1].items():
        np.testing.assert_array_equal(value, two.get_state()[1][key])
