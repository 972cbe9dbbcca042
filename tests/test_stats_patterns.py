"""PatternCounts: conjunctive queries against direct counting, merge, cuts, sampled fallback."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from streammn import Schema
from streammn.stats import PatternCounts, StatsFormatError, StatsMergeError, from_bytes

SCHEMA = Schema.from_cardinalities([2, 3, 2, 4, 2, 2])


def random_rows(n, seed, schema=SCHEMA):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, c, n) for c in schema.cardinalities], axis=1).astype(np.uint8)


def direct_table(rows, a, b, context, cards):
    mask = np.ones(len(rows), dtype=bool)
    for v, x in context.items():
        mask &= rows[:, v] == x
    out = np.zeros(tuple(cards[list(a) + list(b)]), dtype=np.int64)
    for r in rows[mask]:
        out[tuple(r[list(a) + list(b)])] += 1
    return out


def test_queries_match_direct_counting():
    rows = random_rows(3000, 0)
    store = PatternCounts(SCHEMA).update(rows)
    assert store.exact and store.n_rows == 3000
    assert store.n_patterns == len(np.unique(rows, axis=0))
    assert store.counts.sum() == 3000
    rng = np.random.default_rng(1)
    cards = SCHEMA.cardinalities
    for _ in range(60):
        perm = rng.permutation(SCHEMA.n_vars)
        na, nb, nw = rng.integers(1, 3), rng.integers(0, 2), rng.integers(0, 3)
        a, b = perm[:na].tolist(), perm[na : na + nb].tolist()
        w = perm[na + nb : na + nb + nw].tolist()
        context = {v: int(rng.integers(0, cards[v])) for v in w}
        np.testing.assert_array_equal(
            store.table(a, b, context), direct_table(rows, a, b, context, cards)
        )


def test_patterns_in_first_occurrence_order_and_cut_independent():
    rows = random_rows(2000, 2)
    whole = PatternCounts(SCHEMA).update(rows)
    _, first = np.unique(rows, axis=0, return_index=True)
    np.testing.assert_array_equal(whole.patterns, rows[np.sort(first)])
    cut = PatternCounts(SCHEMA)
    for a, b in [(0, 1), (1, 700), (700, 701), (701, 2000)]:
        cut.update(rows[a:b])
    assert cut.to_bytes() == whole.to_bytes()


def test_bad_queries_and_rows():
    store = PatternCounts(SCHEMA).update(random_rows(10, 3))
    with pytest.raises(ValueError, match="disjoint"):
        store.table([0], [0])
    with pytest.raises(IndexError):
        store.table([9])
    with pytest.raises(ValueError, match="context value"):
        store.table([0], [], {1: 3})
    before = store.to_bytes()
    with pytest.raises(ValueError):
        store.update(np.full((2, 6), 5, dtype=np.uint8))
    assert store.to_bytes() == before


@settings(max_examples=40, deadline=None)
@given(
    n_a=st.integers(0, 200),
    n_b=st.integers(0, 200),
    seed=st.integers(0, 10**6),
    narrow=st.booleans(),
)
def test_merge_equals_counting_both(n_a, n_b, seed, narrow):
    schema = Schema.binary(3) if narrow else SCHEMA
    a_rows, b_rows = random_rows(n_a, seed, schema), random_rows(n_b, seed + 1, schema)
    a = PatternCounts(schema).update(a_rows)
    b = PatternCounts(schema).update(b_rows)
    both = PatternCounts(schema).update(np.concatenate([a_rows, b_rows]))
    assert a.merge(b).to_bytes() == both.to_bytes()
    # and back through bytes
    assert from_bytes(both.to_bytes()).to_bytes() == both.to_bytes()


def test_merge_checks_settings():
    with pytest.raises(StatsMergeError):
        PatternCounts(SCHEMA, max_patterns=5).merge(PatternCounts(SCHEMA, max_patterns=6))


def test_sampled_fallback_at_the_exact_row():
    rows = random_rows(5000, 4)
    cap = 50
    # the row at which the 51st distinct pattern first appears
    seen, switch = set(), None
    for r, row in enumerate(map(bytes, rows)):
        if row not in seen and len(seen) == cap:
            switch = r
            break
        seen.add(row)
    whole = PatternCounts(SCHEMA, max_patterns=cap, seed=7).update(rows)
    assert not whole.exact and whole.n_seen == 5000 and whole.n_rows == cap
    assert whole.counts.sum() == cap
    cut = PatternCounts(SCHEMA, max_patterns=cap, seed=7)
    for a, b in [(0, switch - 1), (switch - 1, switch + 3), (switch + 3, 5000)]:
        cut.update(rows[a:b])
    assert cut.to_bytes() == whole.to_bytes()
    # every sampled row is a real row; queries answer from the sample
    real = {bytes(r) for r in rows}
    assert all(bytes(p) in real for p in whole.patterns)
    assert whole.table([0]).sum() == cap
    restored = from_bytes(whole.to_bytes())
    restored.update(rows[:100])
    whole.update(rows[:100])
    assert restored.to_bytes() == whole.to_bytes()


def test_sampled_is_uniform_over_the_multiset():
    """Switching draws rows without replacement from the counted multiset: a pattern holding
    90% of the rows holds about 90% of the sample."""
    rows = np.zeros((20000, 6), dtype=np.uint8)
    rows[::10] = random_rows(2000, 5)
    store = PatternCounts(SCHEMA, max_patterns=100, seed=1).update(rows)
    assert not store.exact
    zero = store.table(list(range(6)))[0, 0, 0, 0, 0, 0]
    assert 80 < zero < 97


def test_corrupt_bytes():
    data = bytearray(PatternCounts(SCHEMA).update(random_rows(50, 6)).to_bytes())
    data[-3] ^= 0xFF
    with pytest.raises(StatsFormatError):
        PatternCounts.from_bytes(bytes(data))
