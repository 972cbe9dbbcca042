"""Schema construction and row validation."""

import numpy as np
import pyarrow as pa
import pytest

from streammn.connectors.arrow import schema_from_arrow, schema_to_metadata
from streammn import Schema, SchemaError, Variable


def test_construction_and_round_trips(tmp_path):
    s = Schema.from_cardinalities([2, 3, 5], names=["a", "b", "c"])
    assert s.n_vars == 3 and s.names == ["a", "b", "c"] and s.index("b") == 1
    assert list(s.cardinalities) == [2, 3, 5]
    assert Schema.from_dict(s.to_dict()) == s
    (tmp_path / "x.schema").write_text("2,3,5\n")
    assert list(Schema.from_libra(tmp_path / "x.schema").cardinalities) == [2, 3, 5]
    assert s.libra_line() == "2,3,5"
    assert Schema.binary(4) == Schema.from_cardinalities([2, 2, 2, 2])


@pytest.mark.parametrize("bad", [[0], [256], [2.5]])
def test_bad_cardinality(bad):
    with pytest.raises(SchemaError, match="cardinality"):
        Schema.from_cardinalities(bad)


def test_duplicate_names_and_bad_libra_line():
    with pytest.raises(SchemaError, match="duplicate"):
        Schema([Variable("a"), Variable("a")])
    with pytest.raises(SchemaError, match="Libra schema"):
        Schema.from_libra_line("2,two,2")


def test_infer_takes_max_plus_one_at_least_two():
    rows = np.array([[0, 0, 4], [0, 2, 1]])
    assert list(Schema.infer(rows).cardinalities) == [2, 3, 5]


def test_validate_returns_contiguous_uint8():
    s = Schema.from_cardinalities([2, 3])
    for arr in (
        np.array([[1, 2], [0, 0]], dtype=np.int64),
        np.array([[1.0, 2.0], [0, 0]]),
        np.array([[True, False]]),
        np.array([[1, 2]], dtype=np.uint8),
        np.array([[1, 2], [0, None]], dtype=object)[:1],
    ):
        out = s.validate(arr)
        assert out.dtype == np.uint8 and out.flags.c_contiguous
        np.testing.assert_array_equal(out, np.asarray(arr, dtype=np.int64))


@pytest.mark.parametrize(
    "rows, message, row, column",
    [
        (np.array([[0, 1, 0]]), "expected 2 columns, got 3", 10, None),
        (np.array([[0, 1], [1, 3]]), "value 3 out of range 0..2", 11, 1),
        (np.array([[0, 1], [-1, 0]]), "value -1 out of range", 11, 0),
        (np.array([[0, 1], [0, 999]]), "value 999 out of range", 11, 1),
        (np.array([[0, 1], [0, np.nan]]), "null value", 11, 1),
        (np.array([[0.5, 1]]), "non-integer value 0.5", 10, 0),
        (np.array([[0, None]], dtype=object), "null value", 10, 1),
        (np.array([[0, "a"]], dtype=object), "non-integer value 'a'", 10, 1),
    ],
)
def test_validate_errors_name_row_and_column(rows, message, row, column):
    s = Schema.from_cardinalities([2, 3])
    with pytest.raises(SchemaError, match=message) as e:
        s.validate(rows, row_offset=10, source="f.data")
    assert e.value.row == row and e.value.column == column and e.value.source == "f.data"
    assert "f.data" in str(e.value) and f"row {row}" in str(e.value)


def test_schema_from_arrow():
    s = Schema.from_cardinalities([2, 7], names=["a", "b"])
    arrow = pa.schema([("a", pa.uint8()), ("b", pa.uint8())], metadata=schema_to_metadata(s))
    assert schema_from_arrow(arrow) == s
    assert schema_from_arrow(arrow, columns=["b", "a"]).names == ["b", "a"]
    plain = pa.schema([("a", pa.bool_()), ("b", pa.int32())])
    assert list(schema_from_arrow(plain, column_max={"b": 4}).cardinalities) == [2, 5]
    with pytest.raises(SchemaError, match="cardinality of column 'b' unknown"):
        schema_from_arrow(plain)
    with pytest.raises(SchemaError, match="no discrete states"):
        schema_from_arrow(pa.schema([("s", pa.string())]))


def test_one_state_variables_are_accepted_but_never_inferred():
    schema = Schema.from_cardinalities([2, 1, 3])  # Libra's msweb.mn has such variables
    assert schema.cardinalities.tolist() == [2, 1, 3]
    assert Schema.from_libra_line("2,1,3").cardinalities.tolist() == [2, 1, 3]
    with pytest.raises(SchemaError, match="out of range 0..0"):
        schema.validate(np.array([[0, 1, 0]]))
    # a column seen constant in a first chunk may vary later: inferred as binary
    assert Schema.infer(np.zeros((5, 2), np.uint8)).cardinalities.tolist() == [2, 2]
