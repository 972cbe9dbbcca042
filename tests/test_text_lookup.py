"""The exact-match lookup of text cells (streammn.schema.text_lookup) against pyarrow's
index_in, the general path it stands in for."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from streammn.schema.text_lookup import exact_states
from streammn.schema.vocabulary import name_text

# short names (the common case) and names longer than the 8 bytes hashed, sharing prefixes
name_text_st = st.one_of(
    st.text("ab", min_size=0, max_size=3),
    st.text("ab", min_size=7, max_size=12).map(lambda t: "prefix__" + t),
    st.text(min_size=1, max_size=10),
)


def _index_in(cells: pa.Array, names) -> np.ndarray:
    keys = pa.array([name_text(n) for n in names], pa.string())
    return pc.index_in(cells, value_set=keys).fill_null(-1).to_numpy(zero_copy_only=False)


@settings(max_examples=200, deadline=None)
@given(
    names=st.lists(name_text_st, min_size=1, max_size=40, unique=True),
    picks=st.lists(st.one_of(st.none(), st.integers(0, 10**6)), max_size=60),
    stray=st.one_of(st.none(), name_text_st),
    start=st.integers(0, 3),
)
def test_matches_index_in_and_refuses_any_cell_that_is_no_name(names, picks, stray, start):
    cells = [None if p is None else names[p % len(names)] for p in picks]
    if stray is not None and picks:
        cells[len(cells) // 2] = stray
    column = pa.array(["pad"] * start + cells, pa.string()).slice(start)  # a sliced column
    got = exact_states(column, tuple(names))
    expected = _index_in(column, names)
    nulls = np.array([c is None for c in cells], bool)
    if (expected[~nulls] < 0).any():
        assert got is None
    else:
        assert got is not None
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, np.where(nulls, 0, expected))


def test_booleans_and_codes_match_their_written_text_only():
    assert exact_states(pa.array(["true", None, "false"]), (False, True)).tolist() == [1, 0, 0]
    assert exact_states(pa.array(["404", "200"]), (200, 404)).tolist() == [1, 0]
    # spelled otherwise: left to the general path (trimmed, lower-cased)
    assert exact_states(pa.array(["True"]), (False, True)) is None
    assert exact_states(pa.array([" 404"]), (200, 404)) is None
    # (False, True) == (0, 1) in Python: the lookup must not mix their texts up
    assert exact_states(pa.array(["0", "1"]), (0, 1)).tolist() == [0, 1]
    assert exact_states(pa.array(["0", "1"]), (False, True)) is None


def test_columns_it_does_not_answer_for():
    assert exact_states(pa.array([1, 2]), (1, 2)) is None  # not text
    assert exact_states(pa.array(["a"], pa.large_string()), ("a",)) is None
    assert exact_states(pa.array(["1"]), ("1", 1)) is None  # two names, one text
    assert exact_states(pa.array([], pa.string()), ("a",)).size == 0
