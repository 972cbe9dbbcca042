"""MarginalCounts and PairCounts against direct numpy counting; merge, bytes, errors."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from streammn.connectors import ArraySource, Batch
from streammn import Schema, SchemaError
from streammn.stats import MarginalCounts, PairCounts, StatsFormatError, StatsMergeError, from_bytes


def random_data(seed, cards, n_rows):
    rng = np.random.default_rng(seed)
    schema = Schema.from_cardinalities(cards)
    # skewed per-variable distributions so that tables are not all alike
    cols = [rng.choice(c, size=n_rows, p=rng.dirichlet(np.ones(c))) for c in cards]
    rows = np.ascontiguousarray(np.stack(cols, axis=1).astype(np.uint8)).reshape(n_rows, len(cards))
    return schema, rows


def brute_table(rows, i, j, ci, cj):
    out = np.zeros((ci, cj), dtype=np.int64)
    np.add.at(out, (rows[:, i], rows[:, j]), 1)
    return out


def brute_marginal(rows, i, c):
    return np.bincount(rows[:, i], minlength=c).astype(np.int64)


# hypothesis: a schema, rows, and a split point --------------------------------------------
@st.composite
def data_and_split(draw, max_vars=6, max_card=5, max_rows=60):
    cards = draw(st.lists(st.integers(2, max_card), min_size=1, max_size=max_vars))
    n_rows = draw(st.integers(0, max_rows))
    split = draw(st.integers(0, n_rows))
    seed = draw(st.integers(0, 2**32 - 1))
    schema, rows = random_data(seed, cards, n_rows)
    return schema, rows, split


MIXED = [2, 3, 2, 5, 2, 7, 4, 2, 255]


def test_marginal_counts_exact():
    schema, rows = random_data(1, MIXED, 3000)
    m = MarginalCounts(schema)
    for batch in ArraySource(rows, schema, batch_size=701):
        m.update(batch)
    assert m.n_rows == 3000
    for i, c in enumerate(MIXED):
        np.testing.assert_array_equal(m.counts(i), brute_marginal(rows, i, c))
    assert m.flat.sum() == 3000 * len(MIXED)


def test_marginal_probabilities_libra_smoothing():
    schema, rows = random_data(2, [2, 3, 5], 40)
    m = MarginalCounts(schema).update(rows)
    for i, c in enumerate([2, 3, 5]):
        counts = brute_marginal(rows, i, c)
        np.testing.assert_allclose(m.probabilities(i, smoothing=1.0), (counts + 1 / c) / 41)
        np.testing.assert_allclose(m.probabilities(smoothing=0.0)[i], counts / 40)
        assert m.probabilities(i, smoothing=2.5).sum() == pytest.approx(1.0)
    with pytest.raises(ValueError):
        MarginalCounts(schema).probabilities(0)
    with pytest.raises(ValueError):
        m.probabilities(0, smoothing=-1)


@pytest.mark.parametrize("chunk_rows", [None, 1, 64, 1000])
def test_pair_counts_exact_mixed_cardinalities(chunk_rows):
    schema, rows = random_data(3, MIXED, 2500)
    p = PairCounts(schema, chunk_rows=chunk_rows)
    for batch in ArraySource(rows, schema, batch_size=999):
        p.update(batch)
    assert p.n_rows == 2500
    for i, ci in enumerate(MIXED):
        np.testing.assert_array_equal(p.counts(i), brute_marginal(rows, i, ci))
        np.testing.assert_array_equal(p.table(i, i), np.diag(brute_marginal(rows, i, ci)))
        for j, cj in enumerate(MIXED):
            if i != j:
                np.testing.assert_array_equal(p.table(i, j), brute_table(rows, i, j, ci, cj))


def test_pair_counts_joint_is_one_hot_gram():
    schema, rows = random_data(4, MIXED, 800)
    p = PairCounts(schema).update(rows)
    offsets = np.concatenate([[0], np.cumsum(MIXED)])
    onehot = np.zeros((800, offsets[-1]), dtype=np.int64)
    for i in range(len(MIXED)):
        onehot[np.arange(800), offsets[i] + rows[:, i]] = 1
    np.testing.assert_array_equal(p.joint(), onehot.T @ onehot)
    marg = p.to_marginals()
    np.testing.assert_array_equal(marg.flat, MarginalCounts(schema).update(rows).flat)
    assert marg.n_rows == 800


def test_pair_counts_binary_only_and_single_variable():
    schema, rows = random_data(5, [2] * 30, 500)
    p = PairCounts(schema).update(rows)
    np.testing.assert_array_equal(p.table(3, 17), brute_table(rows, 3, 17, 2, 2))
    one = PairCounts(Schema.from_cardinalities([4])).update(rows[:, :1] * 2)
    np.testing.assert_array_equal(
        one.table(0, 0), np.diag(np.bincount(rows[:, 0] * 2, minlength=4))
    )
    with pytest.raises(IndexError):
        p.table(0, 30)


def test_empty_store_tables_are_zero():
    schema = Schema.from_cardinalities([3, 2])
    p = PairCounts(schema).update(np.empty((0, 2), dtype=np.uint8))
    assert p.table(0, 1).tolist() == [[0, 0], [0, 0], [0, 0]]
    assert (p.joint() == 0).all()


def test_rows_are_validated():
    schema = Schema.from_cardinalities([2, 3])
    bad = np.array([[0, 3]], dtype=np.uint8)
    for store in (MarginalCounts(schema), PairCounts(schema)):
        with pytest.raises(SchemaError):
            store.update(bad)
        with pytest.raises(SchemaError):
            store.update(Batch(bad, end=1))
        with pytest.raises(SchemaError):
            store.update(np.zeros((2, 3), dtype=np.uint8))
        assert store.n_rows == 0


def test_chunk_rows_bounds():
    schema = Schema.binary(3)
    with pytest.raises(ValueError):
        PairCounts(schema, chunk_rows=0)
    with pytest.raises(ValueError):
        PairCounts(schema, chunk_rows=2**24 + 1)


@settings(max_examples=60, deadline=None)
@given(data_and_split())
def test_merge_of_halves_equals_whole(case):
    schema, rows, split = case
    for cls in (MarginalCounts, PairCounts):
        whole = cls(schema).update(rows)
        merged = cls(schema).update(rows[:split]).merge(cls(schema).update(rows[split:]))
        assert merged.n_rows == whole.n_rows == rows.shape[0]
        if cls is MarginalCounts:
            np.testing.assert_array_equal(merged.flat, whole.flat)
        else:
            np.testing.assert_array_equal(merged.joint(), whole.joint())


@settings(max_examples=60, deadline=None)
@given(data_and_split())
def test_bytes_round_trip_lossless(case):
    schema, rows, split = case
    for cls in (MarginalCounts, PairCounts):
        store = cls(schema).update(rows)
        data = store.to_bytes()
        back = cls.from_bytes(data)
        assert type(from_bytes(data)) is cls
        assert back.schema == schema and back.n_rows == store.n_rows
        assert back.to_bytes() == data
        if cls is PairCounts:
            np.testing.assert_array_equal(back.joint(), store.joint())
            # the restored store keeps counting correctly
            back.update(rows[:split])
            store.update(rows[:split])
            np.testing.assert_array_equal(back.joint(), store.joint())
        else:
            np.testing.assert_array_equal(back.flat, store.flat)


def test_merge_rejects_other_schema_or_kind():
    a = PairCounts(Schema.from_cardinalities([2, 3]))
    with pytest.raises(StatsMergeError, match="different schemas"):
        a.merge(PairCounts(Schema.from_cardinalities([2, 4])))
    with pytest.raises(StatsMergeError, match="different schemas"):
        a.merge(PairCounts(Schema.from_cardinalities([2, 3], names=["a", "b"])))
    with pytest.raises(StatsMergeError):
        a.merge(MarginalCounts(Schema.from_cardinalities([2, 3])))
    with pytest.raises(StatsMergeError):
        MarginalCounts(Schema.binary(2)).merge(MarginalCounts(Schema.binary(3)))


def corruptions(data: bytes):
    """Truncations, a flipped payload byte, a flipped header byte, bad magic, extra bytes."""
    yield data[:10]
    yield data[: len(data) // 2]
    yield data[:-1]
    yield data + b"\x00"
    flipped = bytearray(data)
    flipped[-20] ^= 0xFF
    yield bytes(flipped)
    flipped = bytearray(data)
    flipped[30] ^= 0x01
    yield bytes(flipped)
    yield b"NOTSTATS" + data[8:]
    yield b""


@pytest.mark.parametrize("cls", [MarginalCounts, PairCounts])
def test_corrupt_bytes_raise(cls):
    schema, rows = random_data(6, [2, 3, 4], 100)
    data = cls(schema).update(rows).to_bytes()
    for bad in corruptions(data):
        with pytest.raises(StatsFormatError):
            cls.from_bytes(bad)
    other = MarginalCounts if cls is PairCounts else PairCounts
    with pytest.raises(StatsFormatError, match="not a"):
        other.from_bytes(data)
