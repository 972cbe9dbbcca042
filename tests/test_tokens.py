"""Integer tokens, headers and odd first bytes of text sources (issue 42 findings 3, 4 and 5, in
part): one definition of a state in text (:mod:`streammn.connectors.tokens`) for CSV files,
``.data`` files and CSV messages; every refused cell located to file, row, column and variable and
shown as written; a header that names a column twice; a UTF-8 byte order mark; a one-column file."""

from __future__ import annotations

import gzip
import warnings

import numpy as np
import pyarrow as pa
import pytest

from streammn.connectors import open_source
from streammn.connectors.csv import CsvSource
from streammn.connectors.messages import MessageDecoder
from streammn.connectors.tokens import text_states
from streammn import Schema
from streammn.cli import main
from streammn.schema import SchemaError
from streammn.stream.snapshot import read_snapshot, resolve_snapshot
from streammn.trees.criterion import exact_threshold, significance_threshold

SCHEMA = Schema.from_cardinalities([2, 3, 2], names=["a", "b", "c"])
REFUSED = [
    "0x1",  # pyarrow's integer parser read hexadecimal: learned as 1
    "0X1",
    "0x10",  # learned as the state 16
    "+1",
    "-0",  # pyarrow read 0
    "-1",
    "0_1",  # Python's int() reads 1
    "\u0661",  # Arabic-Indic one
    "\uff11",  # full-width one
    "1.0",
    "1e0",
    "one",
    " ",
]
HUGE = "100000000000000000000000"  # printed as 1e+23 before


def _rows(n, seed=0):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(0, c, n) for c in SCHEMA.cardinalities]).astype(np.uint8)


def _write(path, rows, header=False, bad=None, prefix=b""):
    """Rows as a CSV (``header``) or ``.data`` file; ``bad = (row, column, token)`` replaces
    one cell."""
    lines = [",".join(SCHEMA.names)] if header else []
    for i, r in enumerate(rows.tolist()):
        cells = [str(v) for v in r]
        if bad is not None and i == bad[0]:
            cells[bad[1]] = bad[2]
        lines.append(",".join(cells))
    data = prefix + ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if str(path).endswith(".gz") else data)
    return path


def _read(source):
    """Every batch a source yields before its error, and the error."""
    got = []
    with pytest.raises(SchemaError) as e:
        for batch in source:
            got.append(batch.rows.copy())
    return (np.concatenate(got) if got else np.empty((0, 3), np.uint8)), e.value


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


# --- finding 3: one definition of an integer token ----------------------------------------------


@pytest.mark.parametrize("token", REFUSED)
@pytest.mark.parametrize("name,header", [("a.data", False), ("a.csv", True)])
@pytest.mark.parametrize("declared", [True, False])
def test_only_ascii_digits_are_states_in_a_small_file(tmp_path, token, name, header, declared):
    """In the first block, with the schema declared or inferred from that block: the cell is
    refused with its file, row, column, variable name and the token itself."""
    path = _write(tmp_path / name, _rows(30), header, bad=(12, 1, token))
    with pytest.raises(SchemaError) as e:
        source = CsvSource(path, schema=SCHEMA if declared else None)
        source.read_all()
    assert (e.value.row, e.value.column) == (12, 1)
    message = str(e.value)
    variable = "b" if header or declared else "x1"
    assert name in message and f"variable {variable!r}" in message and repr(token) in message


@pytest.mark.parametrize("token", ["0x1", "+1", "0_1", "\u0661", "\uff11", "-1"])
@pytest.mark.parametrize("name", ["a.data", "a.csv", "a.data.gz"])
def test_a_refused_token_past_the_first_block_keeps_every_row_before_it(tmp_path, token, name):
    """Past pyarrow's first block, where the stream stopped at the end of an earlier block and
    said only ``cannot parse``: every row before the bad one is delivered, then its error."""
    rows = _rows(5000)
    path = _write(tmp_path / name, rows, name.endswith(".csv"), bad=(3210, 2, token))
    got, error = _read(CsvSource(path, batch_size=1000, schema=SCHEMA, block_bytes=4096))
    assert (error.row, error.column) == (3210, 2) and repr(token) in str(error)
    np.testing.assert_array_equal(got, rows[:3210])


@pytest.mark.parametrize("spelled", [" 1", "1 ", "\t1", "01", "001", '"1"', " 01 "])
def test_blanks_leading_zeros_and_quotes_spell_the_same_state(tmp_path, spelled):
    rows = _rows(300)
    rows[[5, 250], 1] = 1
    path = _write(tmp_path / "a.csv", rows, header=True, bad=(250, 1, spelled))
    np.testing.assert_array_equal(CsvSource(path, schema=SCHEMA).read_all(), rows)
    np.testing.assert_array_equal(CsvSource(path).read_all(), rows)  # inferred schema too


@pytest.mark.parametrize("declared", [True, False])
@pytest.mark.parametrize("at", [7, 3210])
def test_a_huge_integer_is_shown_as_written(tmp_path, declared, at):
    rows = _rows(5000)
    path = _write(tmp_path / "a.data", rows, bad=(at, 0, f" {HUGE} "))
    schema = SCHEMA if declared else None
    if at > 1000 or declared:
        got, error = _read(CsvSource(path, batch_size=1000, schema=schema, block_bytes=4096))
        np.testing.assert_array_equal(got, rows[:at])
    else:  # in the first block of an undeclared schema: the error comes before any row
        with pytest.raises(SchemaError) as e:
            CsvSource(path, batch_size=1000, block_bytes=4096)
        error = e.value
    assert (error.row, error.column) == (at, 0)
    assert f"value {HUGE} out of range" in str(error) and "e+" not in str(error)


def test_the_earliest_bad_row_of_a_block_wins_and_the_rows_before_it_are_kept(tmp_path):
    """Columns are checked one after another: a bad cell in a later column and an earlier row
    is the error, and the rows before it are delivered."""
    rows = _rows(400)
    lines = [",".join(map(str, r)) for r in rows.tolist()]
    lines[300] = "7," + lines[300].split(",", 1)[1]  # column a, out of range
    lines[100] = lines[100].rsplit(",", 1)[0] + ",5"  # column c, out of range, earlier
    path = tmp_path / "a.data"
    path.write_text("\n".join(lines) + "\n")
    got, error = _read(CsvSource(path, batch_size=64, schema=SCHEMA))
    assert (error.row, error.column) == (100, 2)
    np.testing.assert_array_equal(got, rows[:100])


@pytest.mark.parametrize("token", ["0x1", "+1", "\uff11"])
def test_learn_stops_just_before_a_refused_token(tmp_path, capsys, token):
    """Through the command: exit 3, the cell located and shown, and the error snapshot's
    position just before the bad row (README's promise)."""
    path = _write(tmp_path / "t.data", _rows(6000), bad=(4321, 1, token))
    (tmp_path / "t.schema").write_text("2,3,2\n")
    out = tmp_path / "o"
    code, err = _run(
        capsys, "learn", path, "--schema", tmp_path / "t.schema", "--out", out, "--quiet",
        "--batch-size", "500",
    )  # fmt: skip
    assert code == 3, err
    assert f"t.data, row 4321, column 1: non-integer value {token!r} for variable 'x1'" in err
    manifest = read_snapshot(resolve_snapshot(out)).manifest
    assert manifest["rows_seen"] == 4321 and manifest["reason"] == "error"


@pytest.mark.parametrize("token", ["0x1", "+1", "0_1", "\u0661", " "])
def test_csv_messages_read_tokens_like_files(token):
    schema = Schema.from_cardinalities([2, 12])
    values = [b"0,11", b"1,10", ("1," + token).encode(), b"0,1"]
    where = lambda i: {"topic": "t", "partition": 0, "offset": i}  # noqa: E731
    with pytest.raises(SchemaError) as e:
        MessageDecoder("csv", schema).decode(values, where, 0)
    assert "offset 2" in str(e.value) and repr(token) in str(e.value)
    assert (e.value.row, e.value.column) == (2, 1)


def test_text_states_agree_with_python_on_every_state():
    """Both paths (single digits: bytes; any other: pyarrow's string kernels) against int()."""
    values = np.arange(256)
    for cells in (
        [str(v) for v in values[:10]],
        [str(v) for v in values],
        [f" {v:03d}\t" for v in values],
    ):
        got = text_states(pa.array(cells), "x", 0, 0)
        np.testing.assert_array_equal(got, [int(c) for c in cells])
    sliced = pa.array(["9", "x", "1", "2"]).slice(2)  # an array that starts at an offset
    np.testing.assert_array_equal(text_states(sliced, "x", 0, 0), [1, 2])


# --- finding 4: a header naming a column twice; a UTF-8 byte order mark ------------------------


def test_a_header_naming_a_column_twice_is_a_located_schema_error(tmp_path, capsys):
    path = tmp_path / "dup.csv"
    path.write_text("a,b,a\n0,1,0\n1,0,1\n")
    with pytest.raises(SchemaError, match="the header names two columns 'a'") as e:
        open_source(path)
    assert e.value.source == str(path) and e.value.column == 2
    code, err = _run(capsys, "learn", path, "--out", tmp_path / "o", "--quiet")
    assert code == 3 and "dup.csv" in err and "'a'" in err and "Traceback" not in err
    good = _write(tmp_path / "good.csv", _rows(50), header=True)
    assert _run(capsys, "learn", good, "--out", tmp_path / "m", "--quiet")[0] == 0
    code, err = _run(capsys, "score", tmp_path / "m", path)
    assert code == 3 and "dup.csv" in err and "two columns 'a'" in err


@pytest.mark.parametrize("name", ["bom.csv", "bom.csv.gz"])
def test_a_utf8_byte_order_mark_is_skipped_by_learn_and_score(tmp_path, capsys, name):
    rows = _rows(200)
    bom = _write(tmp_path / name, rows, header=True, prefix=b"\xef\xbb\xbf")
    plain = _write(tmp_path / "plain.csv", rows, header=True)
    assert CsvSource(bom).schema == CsvSource(plain).schema  # names without the mark
    np.testing.assert_array_equal(CsvSource(bom).read_all(), rows)
    for learned_from in (bom, plain):
        out = tmp_path / f"from-{learned_from.name}"
        assert _run(capsys, "learn", learned_from, "--out", out, "--quiet")[0] == 0
        for scored in (bom, plain):
            code, err = _run(capsys, "score", out, scored)
            assert code == 0, err


def test_a_utf8_byte_order_mark_before_a_headerless_file(tmp_path):
    rows = _rows(3000)
    path = _write(tmp_path / "bom.data", rows, prefix=b"\xef\xbb\xbf")
    np.testing.assert_array_equal(open_source(path).read_all(), rows)
    source = CsvSource(path, batch_size=97, schema=SCHEMA, block_bytes=256)
    batches = list(source)
    resumed = CsvSource(path, batch_size=97, schema=SCHEMA, block_bytes=256)
    resumed.seek(batches[3].end)  # positions count rows, whatever the first bytes
    np.testing.assert_array_equal(np.concatenate([b.rows for b in resumed]), rows[4 * 97 :])
    # the error path re-reads the file line by line: the mark is no cell of row 0 there either
    bad = _write(tmp_path / "bad.data", rows[:50], bad=(5, 2, "x"), prefix=b"\xef\xbb\xbf")
    with pytest.raises(SchemaError) as e:
        open_source(bad)
    assert (e.value.row, e.value.column) == (5, 2)


# --- finding 5: a one-column file ---------------------------------------------------------------


def test_a_leaf_without_candidate_tests_never_splits_and_divides_by_nothing():
    with np.errstate(all="raise"):
        assert significance_threshold(0.05, np.array([2]), np.array([0]))[0] == np.inf
        assert significance_threshold(0.05, np.array([2]), np.array([0]), np.array([3]))[0] == (
            np.inf
        )
        assert exact_threshold("auto", 0.05, np.array([2]), 1000)[0] == np.inf


@pytest.mark.parametrize("mode", ["hoeffding", "exact"])
def test_a_one_column_file_learns_without_a_warning(tmp_path, capsys, mode):
    path = tmp_path / "one.data"
    np.savetxt(path, np.random.default_rng(0).integers(0, 2, (600, 1)), fmt="%d")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning would fail the run, not just print
        code, err = _run(capsys, "learn", path, "--out", tmp_path / "o", "--quiet", "--mode", mode)
    assert code == 0 and "warning" not in err, err
