"""Sources yield exactly the rows of their files, in order, across batches, files and seeks;
bad input raises the named error with file, row and column."""

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streammn.connectors import (
    ArraySource,
    Batch,
    CsvSource,
    ParquetSource,
    SourceError,
    SourceUnavailable,
    open_source,
    write_parquet,
)
from streammn import Schema, SchemaError
from streammn.stream.source import Lookahead

from helpers.datasets import DATA

NLTCS = str(DATA / "nltcs" / "nltcs.valid.data")


@pytest.fixture(scope="module")
def nltcs():
    return np.loadtxt(NLTCS, delimiter=",", dtype=np.uint8)


def random_rows(seed, n, cards):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, c, n) for c in cards], axis=1).astype(np.uint8)


def write_split_parquet(directory, rows, schema, parts, row_group_size):
    os.makedirs(directory, exist_ok=True)
    for k, chunk in enumerate(np.array_split(rows, parts)):
        write_parquet(
            os.path.join(directory, f"part-{k:03d}.parquet"),
            chunk,
            schema,
            row_group_size=row_group_size,
        )


def check_batches(source, expected, batch_size):
    """All rows in order; every batch ends at a multiple of batch_size within its file."""
    got = []
    for b in source:
        assert isinstance(b, Batch) and b.rows.dtype == np.uint8 and b.rows.flags.c_contiguous
        assert 0 < len(b) <= batch_size
        assert b.start == sum(len(x) for x in got)
        got.append(b.rows)
    np.testing.assert_array_equal(np.concatenate(got), expected)


@pytest.mark.parametrize("batch_size", [1, 7, 500, 100_000])
def test_csv_data_file_exact(nltcs, batch_size):
    src = CsvSource(NLTCS, batch_size=batch_size)
    assert src.schema == Schema.binary(16)
    if batch_size == 1:
        nltcs, src = nltcs[:50], ArraySource(nltcs[:50], batch_size=1)
    check_batches(src, nltcs, batch_size)


@pytest.mark.parametrize("batch_size", [1, 333, 4096, 10**6])
def test_parquet_directory_exact(tmp_path, batch_size):
    schema = Schema.from_cardinalities([2, 3, 5, 2, 4])
    rows = random_rows(0, 9000, schema.cardinalities)
    write_split_parquet(tmp_path / "d", rows, schema, parts=3, row_group_size=1000)
    src = ParquetSource(tmp_path / "d", batch_size=batch_size)
    assert src.schema == schema and src.num_rows() == 9000
    if batch_size == 1:
        src = ParquetSource(str(tmp_path / "d" / "part-000.parquet"), batch_size=1)
        rows = rows[:3000]
    check_batches(src, rows, batch_size)


def test_parquet_glob_and_column_selection(tmp_path):
    schema = Schema.from_cardinalities([2, 3, 5], names=["a", "b", "c"])
    rows = random_rows(1, 2000, schema.cardinalities)
    write_split_parquet(tmp_path, rows, schema, parts=2, row_group_size=300)
    src = ParquetSource(str(tmp_path / "part-*.parquet"), columns=["c", "a"])
    assert src.schema.names == ["c", "a"] and list(src.schema.cardinalities) == [5, 2]
    np.testing.assert_array_equal(src.read_all(), rows[:, [2, 0]])


def test_parquet_bool_and_int_columns_inferred_from_statistics(tmp_path):
    rng = np.random.default_rng(2)
    n = 1500
    table = pa.table(
        {
            "flag": pa.array(rng.random(n) < 0.3),
            "level": pa.array(rng.integers(0, 4, n).astype(np.int32)),
            "big": pa.array(rng.integers(0, 7, n).astype(np.int64)),
        }
    )
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=400)
    src = ParquetSource(tmp_path / "t.parquet", batch_size=256)
    assert list(src.schema.cardinalities) == [2, 4, 7]
    expected = np.stack([table.column(k).to_numpy().astype(np.uint8) for k in range(3)], axis=1)
    np.testing.assert_array_equal(src.read_all(), expected)


@pytest.mark.parametrize("make", ["parquet", "csv", "array"])
def test_seek_to_every_batch_end_resumes_identically(tmp_path, make, nltcs):
    rows = nltcs[:1000]
    schema = Schema.binary(16)
    if make == "parquet":
        write_split_parquet(tmp_path / "p", rows, schema, parts=2, row_group_size=128)
        open_ = lambda: ParquetSource(tmp_path / "p", batch_size=100)  # noqa: E731
    elif make == "csv":
        for k, chunk in enumerate(np.array_split(rows, 2)):
            np.savetxt(tmp_path / f"part{k}.data", chunk, fmt="%d", delimiter=",")
        open_ = lambda: CsvSource(tmp_path, batch_size=100)  # noqa: E731
    else:
        open_ = lambda: ArraySource(rows, batch_size=100)  # noqa: E731
    full = list(open_())
    for k, b in enumerate(full):
        src = open_()
        src.seek(b.end)
        rest = list(src)
        assert [len(x) for x in rest] == [len(x) for x in full[k + 1 :]]
        assert [x.end for x in rest] == [x.end for x in full[k + 1 :]]
        tail = np.concatenate([x.rows for x in rest]) if rest else rows[:0]
        np.testing.assert_array_equal(tail, rows[sum(len(x) for x in full[: k + 1]) :])
    src = open_()
    list(src)
    src.rewind()
    np.testing.assert_array_equal(src.read_all(), rows)


def test_seek_refuses_a_position_of_other_files(tmp_path, nltcs):
    write_split_parquet(tmp_path / "p", nltcs[:100], Schema.binary(16), 2, 50)
    src = ParquetSource(tmp_path / "p")
    with pytest.raises(SourceError, match="input files changed"):
        src.seek({"file_index": 1, "file": "/elsewhere/x.parquet", "row": 0, "offset": 50})
    with pytest.raises(ValueError):
        src.seek({"row": 3})


def test_headed_csv_with_column_selection(tmp_path):
    (tmp_path / "t.csv").write_text("a,b,c\n0,1,2\n1,0,1\n1,1,0\n")
    src = CsvSource(tmp_path / "t.csv", columns=["c", "a"])
    assert src.schema.names == ["c", "a"] and list(src.schema.cardinalities) == [3, 2]
    np.testing.assert_array_equal(src.read_all(), [[2, 0], [1, 1], [0, 1]])
    np.testing.assert_array_equal(
        open_source(tmp_path / "t.csv").read_all(), [[0, 1, 2], [1, 0, 1], [1, 1, 0]]
    )


# ---------------------------------------------------------------------------------------------
# bad input


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize(
    "bad_line, message, column",
    [
        ("0,1", "expected 3 columns, got 2", None),
        ("0,1,0,1", "expected 3 columns, got 4", None),
        ("0,*,1", "null value", 1),
        ("0,,1", "null value", 1),
        ("0,1,x", "non-integer value 'x'", 2),
        ("0,1,1.5", "non-integer value '1.5'", 2),
        ("0,1,2", "value 2 out of range 0..1", 2),
    ],
)
def test_csv_bad_row_named(tmp_path, bad_line, message, column):
    good = ["0,1,0", "1,1,1"] * 40
    path = write_lines(tmp_path / "bad.data", good + [bad_line] + good)
    src = CsvSource(path, batch_size=16, schema=Schema.binary(3), block_bytes=100)
    seen = []
    with pytest.raises(SchemaError, match=message) as e:
        for b in src:
            seen.append(b.rows.copy())
    assert e.value.row == 80 and e.value.column == column and "bad.data" in str(e.value)
    # every row before the bad one was yielded (the last batch shorter), exactly the file's
    assert [len(s) for s in seen] == [16] * 5
    np.testing.assert_array_equal(np.concatenate(seen), np.array([[0, 1, 0], [1, 1, 1]] * 40))


def test_csv_truncated_last_line(tmp_path):
    path = tmp_path / "trunc.data"
    path.write_text("0,1,0\n1,1,1\n0,1")
    with pytest.raises(SchemaError, match="expected 3 columns, got 2") as e:
        CsvSource(path, schema=Schema.binary(3)).read_all()
    assert e.value.row == 2


def test_csv_value_beyond_inferred_schema(tmp_path):
    lines = ["0,1"] * 10 + ["0,3"]
    src = CsvSource(write_lines(tmp_path / "grow.data", lines), batch_size=4)
    src.schema = Schema.infer(np.array([[0, 1]]))  # as if inferred from the first chunk
    with pytest.raises(SchemaError, match="value 3 out of range 0..1") as e:
        src.read_all()
    assert (e.value.row, e.value.column) == (10, 1)


def test_parquet_null_out_of_range_and_float(tmp_path):
    schema = Schema.from_cardinalities([2, 3], names=["a", "b"])
    cases = {
        "null": (pa.array([0, 1, None, 1], pa.int8()), "null value", 2),
        "range": (pa.array([0, 1, 2, 5], pa.int8()), "value 5 out of range 0..2", 3),
        "float": (pa.array([0.0, 1.0, 1.5, 1.0]), "non-integer value 1.5", 2),
    }
    for name, (col, message, row) in cases.items():
        pq.write_table(
            pa.table({"a": pa.array([0, 1, 0, 1], pa.int8()), "b": col}),
            tmp_path / f"{name}.parquet",
            row_group_size=2,
        )
        with pytest.raises(SchemaError, match=message) as e:
            ParquetSource(tmp_path / f"{name}.parquet", schema=schema, batch_size=2).read_all()
        assert (e.value.row, e.value.column) == (row, 1)
        assert f"{name}.parquet" in str(e.value)


def test_parquet_wrong_columns(tmp_path):
    pq.write_table(pa.table({"a": pa.array([0, 1], pa.int8())}), tmp_path / "one.parquet")
    with pytest.raises(SchemaError, match="no column named 'b'"):
        ParquetSource(tmp_path / "one.parquet", columns=["a", "b"])


def test_truncated_parquet_raises_source_error_naming_file(tmp_path, nltcs):
    good = tmp_path / "good.parquet"
    write_parquet(good, nltcs, Schema.binary(16), row_group_size=500)
    data = good.read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match="cut.parquet"):
        ParquetSource(tmp_path / "cut.parquet", schema=Schema.binary(16))
    # corrupt a data page in the middle: footer intact, decoding fails mid-stream
    corrupt = bytearray(data)
    mid = len(data) // 4
    corrupt[mid : mid + 200] = bytes(200)
    (tmp_path / "corrupt.parquet").write_bytes(bytes(corrupt))
    src = ParquetSource(tmp_path / "corrupt.parquet", batch_size=500)
    got = []
    with pytest.raises((SourceError, SchemaError), match="corrupt.parquet"):
        for b in src:
            got.append(b.rows)
    if got:
        np.testing.assert_array_equal(np.concatenate(got), nltcs[: sum(len(g) for g in got)])


def test_open_source_dispatch_and_errors(tmp_path, nltcs):
    write_parquet(tmp_path / "x.parquet", nltcs[:10], Schema.binary(16))
    assert isinstance(open_source(tmp_path / "x.parquet"), ParquetSource)
    assert isinstance(open_source(f"file://{tmp_path}/x.parquet"), ParquetSource)
    assert isinstance(open_source(tmp_path), ParquetSource)
    assert isinstance(open_source(NLTCS, batch_size=10), CsvSource)
    (tmp_path / "toy.schema").write_text("2,3\n")
    (tmp_path / "toy.train.data").write_text("0,1\n1,0\n")
    assert list(open_source(tmp_path / "toy.train.data").schema.cardinalities) == [2, 3]
    with pytest.raises(SourceUnavailable, match="no such file"):
        open_source(tmp_path / "missing.parquet")
    with pytest.raises(SourceError, match="unsupported source scheme 'ftp'"):
        open_source("ftp://host/x.parquet")
    (tmp_path / "x.xlsx").write_text("")
    with pytest.raises(SourceError, match="unknown file type"):
        open_source(tmp_path / "x.xlsx")


def test_array_source_validates_and_seeks():
    with pytest.raises(SchemaError, match="row 1, column 0"):
        ArraySource(np.array([[0, 1], [3, 1]]), schema=Schema.binary(2))
    src = ArraySource(np.arange(10).reshape(5, 2) % 2, batch_size=2)
    src.seek(3)
    np.testing.assert_array_equal(src.read_all(), [[0, 1], [0, 1]])


def test_lookahead_yields_every_batch_and_knows_the_end_before_it_is_asked_for():
    rows = np.arange(10, dtype=np.uint8).reshape(5, 2) % 2
    batches = Lookahead(ArraySource(rows, schema=Schema.binary(2), batch_size=2))
    seen = [next(batches).rows]
    assert not batches.at_end() and not batches.at_end()  # a look reads one batch, once
    seen.append(next(batches).rows)
    seen.append(next(batches).rows)
    assert batches.at_end()
    with pytest.raises(StopIteration):
        next(batches)
    assert np.array_equal(np.concatenate(seen), rows)


def test_lookahead_raises_a_read_error_where_the_batch_would_have_been():
    def batches():
        yield Batch(np.zeros((2, 2), dtype=np.uint8), end=2)
        raise SourceError("row 3: truncated")

    source = ArraySource(np.zeros((1, 2), dtype=np.uint8), schema=Schema.binary(2))
    source._batches = batches
    ahead = Lookahead(source)
    next(ahead)
    assert not ahead.at_end()  # the error is not the end
    with pytest.raises(SourceError, match="row 3"):
        next(ahead)


@pytest.mark.parametrize(
    "values, type_",
    [
        ([True, False, True, True, False, False, True, False, True, True], pa.bool_()),
        (list(range(20)), pa.int16()),
        ([-5, 7, 9, 0], pa.int8()),
        (list(range(250)), pa.uint8()),
        ([1.5, 2.5, -3.0, 0.0], pa.float64()),
        ([1.5, 2.5, -3.0, 0.0], pa.float32()),
    ],
)
def test_plain_values_read_the_buffers_as_to_numpy_does(values, type_):
    from streammn.connectors.arrow import plain_values

    for offset in (0, 1, 3):
        column = pa.array(values, type_).slice(offset)
        got, want = plain_values(column), column.to_numpy(zero_copy_only=False)
        assert got.dtype == want.dtype and not got.flags.writeable
        np.testing.assert_array_equal(got, want)
