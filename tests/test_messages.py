"""MessageDecoder: chunks of log payloads to rows, against a per-message reference decoding."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pyarrow as pa
import pytest

from streammn.connectors.messages import DeadLetterFile, MessageDecoder
from streammn.errors import SettingsError
from streammn.schema import Schema, SchemaError


def where(i):
    return {"topic": "t", "partition": 0, "offset": 100 + i}


def reference(values, format, schema):
    """Decode message by message with the standard library / one Arrow table each."""
    rows = []
    for v in values:
        if format == "csv":
            rows.extend([int(x) for x in r] for r in csv.reader(io.StringIO(v.decode())))
        elif format == "json":
            obj = json.loads(v)
            rows.append([obj[n] for n in schema.names])
        else:
            t = pa.ipc.open_stream(v).read_all()
            rows.extend(zip(*[t.column(n).to_pylist() for n in schema.names]))
    return np.array(rows, dtype=np.uint8).reshape(-1, schema.n_vars)


def encode(rows, format, schema, per_message=7):
    if format == "csv":
        return [",".join(map(str, r)).encode() for r in rows.tolist()]
    if format == "json":
        return [json.dumps(dict(zip(schema.names, r))).encode() for r in rows.tolist()]
    out = []
    for i in range(0, len(rows), per_message):
        t = pa.table({n: rows[i : i + per_message, j] for j, n in enumerate(schema.names)})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t)
        out.append(sink.getvalue().to_pybytes())
    return out


@pytest.mark.parametrize("format", ["csv", "json", "arrow"])
@pytest.mark.parametrize("cards", [[2] * 6, [2, 10, 3], [2, 11, 255, 4]])
def test_chunks_decode_like_messages_one_by_one(format, cards):
    """Both CSV paths (single digits: numpy; wider values: pyarrow) and JSON/Arrow agree with
    per-message decoding."""
    rng = np.random.default_rng(len(cards))
    schema = Schema.from_cardinalities(cards)
    rows = (rng.random((150, len(cards))) * np.array(cards)).astype(np.uint8)
    values = encode(rows, format, schema)
    got = MessageDecoder(format, schema).decode(values, where, 0)
    np.testing.assert_array_equal(got, reference(values, format, schema))
    np.testing.assert_array_equal(got, rows)
    assert got.flags.c_contiguous and got.dtype == np.uint8


def test_csv_accepts_trailing_newlines_and_spaces_like_pyarrow():
    schema = Schema.from_cardinalities([3, 3])
    got = MessageDecoder("csv", schema).decode([b"1,2\n", b"0,1\r\n", b"2,0"], where, 0)
    np.testing.assert_array_equal(got, [[1, 2], [0, 1], [2, 0]])


BAD_CSV = [
    (b"1,3,0", "out of range", 1),  # value too large for x1 (card 3)
    (b"1,x,0", "non-integer value 'x' for variable 'x1'", 1),  # not a number
    (b"1,1", "Expected 3 columns", None),
    (b"", "empty message", None),
    (b"1,1,0\n0,0,0", "2 rows", None),  # two rows in one message
    (b'1,"1,0', "non-integer value '\"1'", 1),  # quotes are data, never a multi-line field
    (b"1,,0", "null", 1),
]


@pytest.mark.parametrize("bad,text,column", BAD_CSV)
@pytest.mark.parametrize("position", [0, 5, 9])
def test_bad_csv_message_is_named_by_its_location(bad, text, column, position):
    schema = Schema.from_cardinalities([2, 3, 2])
    values = [b"0,1,1"] * 10
    values[position] = bad
    with pytest.raises(SchemaError) as info:
        MessageDecoder("csv", schema).decode(values, where, 1000)
    assert f"offset {100 + position}," in str(info.value)
    assert text in str(info.value)
    assert info.value.row == 1000 + position and info.value.column == column


def test_first_of_several_bad_messages_is_reported():
    schema = Schema.from_cardinalities([2, 2])
    values = [b"0,1", b"1,1", b"0,5", b"x,1", b"1,1", b"3,0"]
    with pytest.raises(SchemaError, match="offset 102"):
        MessageDecoder("csv", schema).decode(values, where, 0)
    json_values = [b'{"x0":0,"x1":1}', b'{"x0":0}', b'{"x0":0,"x1":9}']
    with pytest.raises(SchemaError, match="offset 101.*null"):
        MessageDecoder("json", schema).decode(json_values, where, 0)


def test_dead_letters_keep_the_rest_in_order(tmp_path):
    schema = Schema.from_cardinalities([2, 12])
    values = [b"0,11", b"1,12", b"0,3", None, b"\xff", b"1,10", b'{"x0":1}', b"1,0"]
    dead = DeadLetterFile(tmp_path / "dl.jsonl")
    got = MessageDecoder("csv", schema).decode(values, where, 0, dead)
    dead.close()
    np.testing.assert_array_equal(got, [[0, 11], [0, 3], [1, 10], [1, 0]])
    letters = [json.loads(x) for x in (tmp_path / "dl.jsonl").read_text().splitlines()]
    assert [d["offset"] for d in letters] == [101, 103, 104, 106]
    assert letters[0]["value"] == "1,12" and "out of range" in letters[0]["error"]
    assert letters[1]["value"] is None and letters[1]["error"] == "empty message"
    assert letters[2]["value_base64"] == "/w=="
    assert dead.count == 4


def test_arrow_messages_by_column_name_with_mixed_types():
    schema = Schema.from_cardinalities([2, 3])
    a = encode(np.array([[1, 2], [0, 1]], np.uint8), "arrow", schema)[0]
    t = pa.table({"x1": pa.array([0, 2], pa.int64()), "x0": pa.array([True, False])})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    b = sink.getvalue().to_pybytes()
    got = MessageDecoder("arrow", schema).decode([a, b], where, 0)
    np.testing.assert_array_equal(got, [[1, 2], [0, 1], [1, 0], [0, 2]])
    wrong = pa.table({"x0": [1], "y": [0]})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, wrong.schema) as w:
        w.write_table(wrong)
    with pytest.raises(SchemaError, match=r"offset 101.*missing \['x1'\], unknown \['y'\]"):
        MessageDecoder("arrow", schema).decode([a, sink.getvalue().to_pybytes()], where, 0)
    with pytest.raises(SchemaError, match="offset 100.*not an Arrow IPC stream"):
        MessageDecoder("arrow", schema).decode([b"1,2"], where, 0)


def test_decoder_rejects_unknown_format_and_missing_schema():
    with pytest.raises(ValueError, match="format"):
        MessageDecoder("xml", Schema.binary(2))
    with pytest.raises(SettingsError, match="Schema"):  # exit code 2
        MessageDecoder("csv", None)
