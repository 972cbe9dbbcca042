"""Saved states: any arrays round-trip exactly, 0/1 byte arrays are stored as bits."""

import io
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from streammn.packed_state import BITS_FROM, pack_state, unpack_state

ARRAYS = st.dictionaries(
    st.text("abcdefghij_", min_size=1, max_size=8),
    st.one_of(
        hnp.arrays(np.uint8, hnp.array_shapes(max_dims=3, max_side=40), elements=st.integers(0, 1)),
        hnp.arrays(np.uint8, hnp.array_shapes(max_dims=2, max_side=90), elements=st.integers(0, 3)),
        hnp.arrays(np.int64, hnp.array_shapes(max_dims=2, max_side=10)),
        hnp.arrays(np.float64, st.integers(0, 20)),
    ),
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(ARRAYS, st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))
def test_states_round_trip_exactly(arrays, meta):
    got_meta, got = unpack_state(pack_state(meta, arrays))
    assert got_meta == meta and set(got) == set(arrays)
    for name, array in arrays.items():
        assert got[name].dtype == array.dtype and got[name].shape == array.shape
        np.testing.assert_array_equal(got[name], array)


def stored_sizes(data: bytes) -> dict:
    return {i.filename: i.file_size for i in zipfile.ZipFile(io.BytesIO(data)).infolist()}


def test_binary_rows_are_stored_as_bits_and_others_as_they_are():
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 2, size=(1000, 100), dtype=np.uint8)  # a replay buffer's rows
    counts = rng.integers(0, 3, size=(1000, 100), dtype=np.uint8)  # not 0/1: stored whole
    small = np.ones(BITS_FROM - 1, dtype=np.uint8)  # too small to bother
    data = pack_state({}, {"rows": rows, "counts": counts, "small": small})
    sizes = stored_sizes(data)
    assert "rows.npy" not in sizes and sizes["rows.bits.npy"] < rows.nbytes / 8 + 200
    assert sizes["counts.npy"] > counts.nbytes and "small.npy" in sizes
    _, got = unpack_state(data)
    assert set(got) == {"rows", "counts", "small"}
    np.testing.assert_array_equal(got["rows"], rows)


def test_states_written_before_bits_still_load():
    rows = np.ones((100, 100), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(b'{"a": 1}', dtype=np.uint8), rows=rows)
    meta, got = unpack_state(buf.getvalue())
    assert meta == {"a": 1}
    np.testing.assert_array_equal(got["rows"], rows)


def test_bits_without_their_shape_are_refused():
    data = pack_state({}, {"rows": np.ones((100, 100), dtype=np.uint8)})
    archive = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as out:
        for info in archive.infolist():
            if info.filename != "rows.shape.npy":
                out.writestr(info, archive.read(info))
    with pytest.raises(ValueError, match="KeyError"):
        unpack_state(buf.getvalue())
