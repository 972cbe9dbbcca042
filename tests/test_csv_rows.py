"""CSV / .data sources: seeking to any row past pyarrow's first block, blank lines, bytes that are
not UTF-8 and non-integer tokens located to the row (issue 17 item 4, issue 20 findings 6, 7,
10)."""

import gzip
import io

import numpy as np
import pytest

from streammn.connectors import open_source
from streammn.connectors.csv import CsvSource
from streammn.connectors.lines import data_lines, next_line, open_at, skip_rows
from streammn.schema import Schema, SchemaError

SCHEMA = Schema.from_cardinalities([2, 3, 2])


def _rows(n, seed=0):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(0, c, n) for c in SCHEMA.cardinalities]).astype(np.uint8)


def _write(path, rows, header=False, blank_every=0, crlf=False):
    end = "\r\n" if crlf else "\n"
    lines = [",".join(SCHEMA.names)] if header else []
    for i, r in enumerate(rows):
        if blank_every and i % blank_every == 0:
            lines.append("")
        lines.append(",".join(map(str, r)))
    text = end.join(lines) + end
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt", newline="") as f:
            f.write(text)
    else:
        path.write_bytes(text.encode())
    return path


@pytest.mark.parametrize(
    "name,header,blank_every,crlf",
    [
        ("a.data", False, 0, False),
        ("a.csv", True, 0, True),
        ("a.data", False, 7, False),
        ("a.data.gz", False, 5, True),
        ("a.csv.gz", True, 0, False),
    ],
)
def test_seek_past_the_first_block_to_any_batch_end(tmp_path, name, header, blank_every, crlf):
    rows = _rows(3000)
    path = _write(tmp_path / name, rows, header, blank_every, crlf)
    # 256-byte pyarrow blocks: pyarrow's own skip_rows failed past the first block
    source = CsvSource(path, batch_size=97, schema=SCHEMA, block_bytes=256)
    batches = list(source)
    assert np.array_equal(np.concatenate([b.rows for b in batches]), rows)
    for k in (1, 5, len(batches) - 2, len(batches) - 1):
        resumed = CsvSource(path, batch_size=97, schema=SCHEMA, block_bytes=256)
        resumed.seek(batches[k].end)
        rest = list(resumed)
        assert [b.end for b in rest] == [b.end for b in batches[k + 1 :]]
        assert np.array_equal(
            np.concatenate([b.rows for b in rest] + [rows[:0]]), rows[batches[k].end["row"] :]
        )


def test_skip_rows_counts_rows_as_pyarrow_does():
    text = b"\n1,0\r\n\r\n\n2,2\n3,3"
    for n, expect_rest in [(0, b""), (1, b"\r\n\n2,2\n3,3"), (2, b"3,3"), (3, b"")]:
        skipped, rest = skip_rows(io.BytesIO(text), n)
        assert skipped == n and rest == expect_rest
    assert skip_rows(io.BytesIO(text), 5) == (3, b"")
    assert list(data_lines(io.BytesIO(text))) == [b"1,0", b"2,2", b"3,3"]
    assert next_line(io.BytesIO(text)) == (b"1,0", b"\r\n\n2,2\n3,3")


def test_open_at_past_the_end_of_a_compressed_file_stops_at_its_end(tmp_path):
    path = tmp_path / "a.data.gz"
    path.write_bytes(gzip.compress(b"1,0\n0,1\n"))  # not seekable: open_at reads past
    with open_at(str(path), 4) as stream:
        assert stream.read() == b"0,1\n"
    with open_at(str(path), 100) as stream:  # shortened since it was measured: no endless loop
        assert stream.read() == b""


def test_seek_beyond_a_shortened_file_says_the_input_changed(tmp_path):
    path = _write(tmp_path / "a.data", _rows(50))
    source = CsvSource(path, batch_size=10, schema=SCHEMA)
    source.seek({"file_index": 0, "file": str(path), "row": 60, "offset": 60})
    with pytest.raises(Exception, match="changed"):
        list(source)


def test_blank_first_line_is_skipped_like_any_blank_line(tmp_path):
    path = tmp_path / "a.data"
    path.write_text("\n\n1,2,0\n\n0,0,1\n")
    source = open_source(path)
    assert source.schema.cardinalities.tolist() == [2, 3, 2]
    assert source.read_all().tolist() == [[1, 2, 0], [0, 0, 1]]


@pytest.mark.parametrize("bad", [b"\xe9", b"\x8b\x08", b"1\xff"])
def test_bytes_that_are_not_utf8_are_located(tmp_path, bad):
    rows = _rows(5000)
    text = "\n".join(",".join(map(str, r)) for r in rows).encode().split(b"\n")
    text[3210] = b"1," + bad + b",0"
    path = tmp_path / "a.data"
    path.write_bytes(b"\n".join(text) + b"\n")
    source = CsvSource(path, batch_size=1000, schema=SCHEMA, block_bytes=4096)
    got = []
    with pytest.raises(SchemaError) as e:
        for b in source:
            got.append(b.rows)
    assert e.value.row == 3210 and "UTF-8" in str(e.value)
    assert sum(len(g) for g in got) == 3210  # every good row before it was delivered


def test_a_binary_file_named_data_is_a_located_schema_error(tmp_path):
    path = tmp_path / "a.data"
    path.write_bytes(gzip.compress(b"1,0\n0,1\n" * 100))
    with pytest.raises(SchemaError, match="UTF-8"):
        open_source(path)


@pytest.mark.parametrize("header", [False, True])
def test_schema_inference_names_a_non_integer_token(tmp_path, header):
    path = tmp_path / ("a.csv" if header else "a.data")
    lines = (["a,b,c"] if header else []) + ["1,0,1"] * 20 + ["1,x,0"] + ["0,0,0"] * 5
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SchemaError) as e:
        open_source(path)
    assert (e.value.row, e.value.column) == (20, 1) and "'x'" in str(e.value)


def test_unbalanced_quote_is_located(tmp_path):
    rows = _rows(400)
    lines = [",".join(map(str, r)) for r in rows]
    lines[300] = '1,"0,1'
    path = tmp_path / "a.data"
    path.write_text("\n".join(lines) + "\n")
    source = CsvSource(path, batch_size=100, schema=SCHEMA)
    with pytest.raises(SchemaError) as e:
        source.read_all()
    assert e.value.row == 300
