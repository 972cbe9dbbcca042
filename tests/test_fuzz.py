"""Fuzz suite of the command line's input doors (issue 42): every input is learned or scored
right, or refused with exit 2, 3 or 4 and a message that names the place; never exit 1, a
traceback or a hang.

What is generated (hypothesis, derandomized, a bounded number of examples each):

- CSV files with a header and Libra ``.data`` files without one: header names (duplicates,
  empty, quoted, Unicode), cells (digits, blanks, signs, ``0x``, other Unicode digits, null
  tokens, floats, huge numbers, quotes, embedded delimiters, bytes that are not UTF-8), ragged
  rows, blank lines, ``\\r\\n`` and ``\\r``, a byte order mark, no last newline, gzip (whole or
  cut short); a Libra ``.schema`` beside some ``.data`` files (fitting, too small, another width,
  not a schema); some learned with ``--missing``;
- Parquet files: columns of every integer width, bool, float, string, dictionary and null
  type, nulls, no rows, no columns, one row group or many, statistics or not, and a streammn
  schema in the metadata that is right, wrong or not JSON;
- model files: valid ``.json``, ``.mn`` and ``.uai`` files (learned through ``learn`` and
  ``convert``, and written by hand with every factor form) mutated token by token: tokens
  dropped, repeated, swapped or replaced (``nan``, ``inf``, huge and negative numbers, brackets,
  keywords), lines dropped or repeated, the text cut short; JSON also value by value in its
  parsed tree.

Every file is run through ``streammn.cli.main`` in this process (``learn`` and ``score`` for
data; ``score``, ``convert``, ``inspect`` and ``sample -n 5`` for models) under a per-command
time limit. An *escape* fails the example: exit 1 or any other code outside 0/2/3/4, an
exception out of ``main``, a command over the time limit, a refusal whose message does not name
the file (and, for a bad cell or row the generator planted, its row), or a success that a cheap
check proves wrong. Those checks, by what the generator knows of a file:

- a *clean* file (every cell a state, every row as wide as the header) is learned, with
  ``rows_seen`` its row count, and the learned snapshot scores it: that many rows, a finite
  PLL <= 0;
- a file with *one planted fault* (a bad cell, a ragged row, a duplicated header name, a null,
  ...) is refused with exit 3, naming the file and the fault's row;
- a *wild* file (anything goes) may be learned or refused; learned, its own snapshot scores it
  with the same row count (learn and score read a file alike);
- scored by a fixed model, a clean file of the model's width and names scores exactly its rows,
  or is refused at the first row holding a value beyond the model's cardinalities;
- a refused ``.mn`` or ``.uai`` file is named with the line at fault (unless the fault is of
  no line: the weights' total);
- a model that ``score`` reads prints strict JSON: a finite PLL, or ``null`` only where the model
  gives a row probability 0 (a ``-inf`` weight), never for an overflow; converted to another
  format it scores the same; ``inspect --json`` is strict JSON; ``sample -n 5`` prints 5 rows
  of states.

Snapshots are written without ``fsync`` here, and the argument parser is built once per command
(both patched for the module: neither is what is fuzzed, and they cost two thirds of a tiny
``learn``). The escapes the suite found are fixed in the library, each with a plain regression
test at the end of this module.
"""

from __future__ import annotations

import copy
import functools
import gzip
import io
import json
import math
import os
import re
import signal
import tempfile
import traceback
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streammn.connectors import open_source
from streammn.cli import parser as cli
from streammn.cli import main
from streammn.formats import read_model
from streammn.model_spec import load_model
from test_formats_libra import ALL_FORMS

# per command: a tiny file takes milliseconds; the fixtures make the first calls, untimed, which
# compile the kernels when numba's cache is cold (a fresh checkout, a kernel just edited)
TIMEOUT_S = 60
MAX_ROWS, MAX_COLS = 30, 6
LOCATED_CODES = (2, 3, 4)


def fuzz_settings(n: int):
    """``n`` examples, the same ones every run (no example database, no deadline)."""
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )


@pytest.fixture(scope="module", autouse=True)
def fast_commands():
    """No ``fsync``, and the command's argument parser built once per command (building it
    takes ~15 ms of each call; parsing with it is unchanged)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "fsync", lambda fd: None)
        mp.setattr(cli, "_parser", functools.lru_cache(cli._parser))
        yield


# --- running a command --------------------------------------------------------------------------


class Hang(BaseException):
    """Raised by the alarm of a command over its time limit (not an ``Exception``, so that
    ``main`` does not turn it into an exit code)."""


def _alarm(signum, frame):
    raise Hang


@dataclass
class Outcome:
    argv: list[str]
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"streammn {' '.join(self.argv)} -> exit {self.code}\n{self.err}{self.out[:2000]}"


def run(*argv, timeout: float | None = TIMEOUT_S) -> Outcome:
    """``main(argv)`` with its output captured and a time limit (None: none); a hang or an
    exception out of ``main`` fails the example."""
    argv = [str(a) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout or 0)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(argv)
    except Hang:
        pytest.fail(f"hang: streammn {' '.join(argv)} ran over {TIMEOUT_S} s")
    except BaseException:
        pytest.fail(f"traceback: streammn {' '.join(argv)}\n{traceback.format_exc()}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return Outcome(argv, code, out.getvalue(), err.getvalue())


def check_exit(outcome: Outcome, *names: str) -> None:
    """No escape: exit 0, or 2/3/4 with a message naming one of ``names`` (file names)."""
    assert outcome.code == 0 or outcome.code in LOCATED_CODES, f"escape (exit code): {outcome}"
    if outcome.code:
        assert any(os.path.basename(n) in outcome.err for n in names), (
            f"escape (message names none of {[os.path.basename(n) for n in names]}): {outcome}"
        )


def check_refused(outcome: Outcome, path: str, row: int | None = None, code: int = 3) -> None:
    """Refused with ``code``, naming ``path`` and, when given, data row ``row``."""
    check_exit(outcome, path)
    assert outcome.code == code, f"expected exit {code}: {outcome}"
    if row is not None:
        assert re.search(rf"\brow {row}\b", outcome.err), f"expected row {row} named: {outcome}"


def rows_seen(outcome: Outcome) -> int:
    m = re.search(r"^snapshot .*: ([\d,]+) rows", outcome.out, re.MULTILINE)
    assert m, f"learn exit 0 without its closing line: {outcome}"
    return int(m.group(1).replace(",", ""))


def strict_json(text: str):
    """``text`` parsed as JSON that every parser reads (no NaN, Infinity)."""

    def refuse(constant):
        raise AssertionError(f"non-JSON number {constant} in {text!r}")

    return json.loads(text, parse_constant=refuse)


def check_score(outcome: Outcome, model: str, data: str, n_rows: int | None = None) -> dict | None:
    """A ``score --json`` outcome: no escape; a success prints strict JSON, its row count
    (``n_rows`` if known) and a PLL that is finite and <= 0, or null only for rows of
    probability 0 (a -inf weight), never NaN."""
    check_exit(outcome, model, data)
    if outcome.code:
        return None
    result = strict_json(outcome.out)
    assert isinstance(result.get("rows"), int) and result["rows"] > 0, f"bad rows: {outcome}"
    if n_rows is not None:
        assert result["rows"] == n_rows, f"scored {result['rows']} rows, not {n_rows}: {outcome}"
    pll = result.get("pll")
    if pll is None:
        assert _impossible_rows(model, data), f"null PLL, no row of probability 0: {outcome}"
    else:
        assert isinstance(pll, float) and math.isfinite(pll), f"bad PLL: {outcome}"
        assert pll <= 1e-9, f"positive PLL: {outcome}"
    return result


def _impossible_rows(model: str, data: str) -> bool:
    """Whether the model gives some row of ``data`` probability 0 (a log score of -inf)."""
    network, _ = load_model(model)
    with open_source(data, schema=network.schema) as source:
        return any(np.isneginf(network.log_score(batch)).any() for batch in source)


# --- text files: cells, headers, rows -----------------------------------------------------------

# a state as written: ASCII digits, blanks around them allowed, quoted or not (0..254); the
# large ones rare (a column of 255 states costs a learn 100 ms)
STATE_CELLS = ["0", "1", "2", "1", "0", "1", "0", "3", " 1", "2 ", "\t1 ", '"1"', '"0"', "007"] * 8
STATE_CELLS += ["12", "254"]
# null tokens: a bad cell, unless learned with --missing (an empty cell is one only in a row of
# two cells or more: a one-cell row of it is a blank line)
NULL_CELLS = ["NA", "N/A", "*", "nan", "NaN", "null", "NULL", "None"]
# never a state, in any column of any width
BAD_CELLS = [
    "+1", "-0", "-1", "0x1", "0X10", "0b1", "0_1", "1_000", "\u0661", "\uff11", "\u00b2",
    "1.0", "1e0", "1.5", "-1.5", "inf", "255", "256", "99999999999999999999999", "abc",
    "\u00e9", "\u221e", "\x00", " ", "1 2", "\ufeff1", "NAN", "na",
]  # fmt: skip
BAD_BYTES = [b"\xe9", b"\xff\xfe", b"1\x80"]  # not UTF-8
# no promise either way: the quoting, line-break and delimiter corners
ODD_CELLS = ['"1,1"', '"', '"1""2"', "'1'", '"\n1"', "1\r", "\\N", "#", "1;2", '""', "\r", "0,"]

CLEAN_NAMES = ["a", "b", "c", "x0", "x1", "rain", "wet", "\u00e9t\u00e9", "\u53d8\u91cf", "n_2"]
ODD_NAMES = ["", " a", "b ", '"a"', '"q,r"', "a b", "\u00a0", "\ufeff", "#", "NA", "1", "0x1",
             "x" * 40, "\U0001f600", "d\te"]  # fmt: skip


@dataclass
class TextCase:
    """A generated CSV or ``.data`` file and what the generator knows of it."""

    suffix: str  # ".csv", ".data", ".csv.gz", ".data.gz"
    content: bytes
    n_rows: int  # data rows (non-empty lines after the header)
    n_cols: int
    names: list[str] | None  # the header (None for .data)
    kind: str  # "clean", "fault", "wild" or "cut" (a gzip cut short)
    fault_row: int | None = None  # the row a planted fault is on (None: not about a row)
    values: list[list[int | None]] = field(default_factory=list)  # the states (None: not one)
    missing: bool = False  # learned with --missing
    schema: bytes | None = None  # a Libra .schema file beside a .data file
    declared: list[int] | None = None  # ... and its cardinalities, when it is one

    def first_beyond(self, cards: list[int]) -> int | None:
        """The first row holding a state beyond ``cards`` (None: every state is within)."""
        return next(
            (r for r, row in enumerate(self.values) if any(
                v is not None and v >= c for v, c in zip(row, cards))),
            None,
        )  # fmt: skip


def _state(cell) -> int | None:
    return int(cell.strip(' \t"')) if cell in STATE_CELLS else None


@st.composite
def text_cases(draw, header: bool):
    n_cols = draw(st.integers(1, MAX_COLS))
    n_rows = draw(st.integers(0, MAX_ROWS))
    kind = draw(st.sampled_from(["clean", "clean", "fault", "fault", "wild"]))
    missing = draw(st.integers(0, 5)) == 0
    names = None
    if header:
        names = draw(
            st.lists(st.sampled_from(CLEAN_NAMES), min_size=n_cols, max_size=n_cols, unique=True)
        )
    cell = st.sampled_from(STATE_CELLS)
    if kind == "wild":
        cell = st.one_of(
            st.sampled_from(STATE_CELLS),
            st.sampled_from(STATE_CELLS),
            st.sampled_from(BAD_CELLS + NULL_CELLS + ODD_CELLS + [""]),
            st.sampled_from(BAD_BYTES),
            st.text(max_size=4),
        )
        if header:
            names = draw(
                st.lists(
                    st.one_of(st.sampled_from(CLEAN_NAMES + ODD_NAMES), st.text(max_size=5)),
                    min_size=1,
                    max_size=MAX_COLS + 1,
                )
            )
    rows = [[draw(cell) for _ in range(n_cols)] for _ in range(n_rows)]
    if kind == "wild":  # ragged rows
        for r in draw(st.lists(st.integers(0, max(n_rows - 1, 0)), max_size=2)):
            if rows:
                rows[r] = rows[r][: draw(st.integers(0, n_cols + 1))] + draw(
                    st.lists(cell, max_size=2)
                )
    fault_row = None
    if kind == "fault":
        faults = ["cell", "bytes", "wide"] + (["narrow"] if n_cols > 1 else [])
        faults += ["empty"] if n_cols > 1 and not missing else []
        faults += ["duplicate name"] if header and n_cols > 1 else []
        if n_rows == 0:
            faults = ["no rows"]
        fault = draw(st.sampled_from(faults))
        if fault in ("wide", "narrow") and not header and n_rows < 2:
            fault = "cell"  # a headerless file's first row sets its width: a one-row file fits
        if fault != "no rows" and fault != "duplicate name":
            first = 1 if fault in ("wide", "narrow") and not header else 0
            fault_row = draw(st.integers(first, n_rows - 1))
            j = draw(st.integers(0, n_cols - 1))
            row = rows[fault_row]
            if fault == "cell":
                row[j] = draw(st.sampled_from(BAD_CELLS + ([] if missing else NULL_CELLS)))
            elif fault == "bytes":
                row[j] = draw(st.sampled_from(BAD_BYTES))
            elif fault == "empty":
                row[j] = ""
            elif fault == "wide":
                row.append(draw(st.sampled_from(STATE_CELLS)))
            else:  # narrow
                del row[j]
        elif fault == "duplicate name":
            i, j = draw(st.lists(st.integers(0, n_cols - 1), min_size=2, max_size=2, unique=True))
            names[j] = names[i]
    newline = draw(st.sampled_from([b"\n", b"\n", b"\r\n"] + ([b"\r"] if kind == "wild" else [])))
    lines = []
    if header:
        lines.append(b",".join(n.encode() for n in names))
    for row in rows:
        lines.append(b",".join(c if isinstance(c, bytes) else c.encode() for c in row))
        if draw(st.integers(0, 9)) == 0:
            lines.append(b"")  # a blank line: not a row
    content = newline.join(lines) + (newline if draw(st.booleans()) else b"")
    if draw(st.integers(0, 4)) == 0:
        content = b"\xef\xbb\xbf" + content
    suffix = ".csv" if header else ".data"
    if draw(st.integers(0, 7)) == 0:
        suffix += ".gz"
        content = gzip.compress(content, mtime=0)
        if draw(st.booleans()):  # cut short: a truncated download
            content = content[: draw(st.integers(0, len(content) - 1))]
            kind, fault_row = "cut", None
    case = TextCase(suffix, content, n_rows, n_cols, names, kind, fault_row, missing=missing)
    case.values = [[_state(c) for c in row] for row in rows]
    if not header and draw(st.integers(0, 5)) == 0:
        case.schema, case.declared = draw(libra_schemas(case))
    return case


@st.composite
def libra_schemas(draw, case: TextCase):
    """A Libra ``.schema`` file for ``case`` and its cardinalities: declaring enough states for
    every column, maybe too few, another width, or not a schema at all (cardinalities None)."""
    highest = [
        max([row[j] for row in case.values if j < len(row) and row[j] is not None], default=1)
        for j in range(case.n_cols)
    ]
    choice = draw(st.sampled_from(["fits", "fits", "few", "width", "text", "bytes"]))
    if choice == "fits":
        cards = [min(v + 1 + draw(st.integers(0, 2)), 255) for v in highest]
    elif choice == "few":
        cards = [max(v + draw(st.integers(-1, 1)), 1) for v in highest]
    elif choice == "width":
        cards = [2] * draw(st.integers(1, MAX_COLS + 1).filter(lambda n: n != case.n_cols))
    elif choice == "text":
        text = draw(st.sampled_from(["", "x", "2;2", "2, x", "0,2", "256", "-1", "2,,2", "\n2"]))
        return text.encode(), None
    else:
        return b"\xff\xfe2", None
    text = ",".join(map(str, cards)) + draw(st.sampled_from(["\n", "", "\r\n"]))
    return text.encode(), cards


def _write(directory: str, name: str, content: bytes) -> str:
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(content)
    return path


def check_text_case(case: TextCase, fixed: dict) -> None:
    """Learn ``case``'s file, score it with the learned and with a fixed model, and check."""
    with tempfile.TemporaryDirectory() as d:
        path = _write(d, "fuzz" + case.suffix, case.content)
        places = [path]
        if case.schema is not None:  # Libra's convention: fuzz.schema beside fuzz.data
            places.append(_write(d, "fuzz.schema", case.schema))
        missing = ["--missing"] if case.missing else []
        learned = run("learn", path, "--out", os.path.join(d, "snaps"), "--quiet", *missing)
        check_exit(learned, *places)
        check_learned(case, learned, path)
        if learned.code == 0:
            assert 0 < rows_seen(learned) <= case.n_rows + 2 * MAX_ROWS, f"{learned}"
            if case.kind == "cut":  # a truncated gzip learned whole or not at all
                assert rows_seen(learned) == case.n_rows, f"cut gzip learned: {learned}"
            snaps = os.path.join(d, "snaps")
            scored = run("score", snaps, path, "--json")
            check_score(scored, snaps, path, rows_seen(learned))
        model = fixed["csv" if case.names is not None else "data"]
        check_fixed_score(case, run("score", model["path"], path, "--json"), model, path)


def check_learned(case: TextCase, learned: Outcome, path: str) -> None:
    """What ``learn`` must do with what the generator planted: learn a clean file, all its rows,
    and refuse a fault at its row (with a Libra schema: one that declares enough states, or
    too few, at the first row beyond them)."""
    if case.kind not in ("clean", "fault"):
        return
    row = case.fault_row
    if case.schema is not None:
        if case.declared is None or len(case.declared) != case.n_cols:
            assert learned.code == 3, f"a bad Libra schema is not refused: {learned}"
            return
        beyond = case.first_beyond(case.declared)
        if beyond is not None:  # a state beyond the declared ones: refused there, or earlier
            row = beyond if row is None or case.kind == "clean" else None
    if case.kind == "clean" and case.n_rows and row is None:
        assert learned.code == 0, f"a clean file is refused: {learned}"
        assert rows_seen(learned) == case.n_rows, f"rows_seen != {case.n_rows}: {learned}"
    else:
        check_refused(learned, path, row)


def check_fixed_score(case: TextCase, outcome: Outcome, model: dict, path: str) -> None:
    """``case`` scored by a fixed model: a clean file of its width (and names) scores all its
    rows, or is refused at its first row with a value beyond the model's cardinalities."""
    check_score(outcome, model["path"], path, None)
    fits = (
        case.kind == "clean"
        and case.n_rows
        and case.n_cols == len(model["cards"])
        and (case.names is None or case.names == model["names"])
    )
    if not fits:
        return
    beyond = case.first_beyond(model["cards"])
    if beyond is not None:
        check_refused(outcome, path, beyond)
    else:
        assert outcome.code == 0 and strict_json(outcome.out)["rows"] == case.n_rows, outcome


# fixed models, learned once: three variables of cardinality 3, named a, b, c in a CSV
FIXED_ROWS = [[0, 1, 2], [1, 0, 0], [2, 2, 1], [0, 0, 0], [1, 1, 1]] * 4


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    d = tmp_path_factory.mktemp("fixed")
    body = "\n".join(",".join(map(str, row)) for row in FIXED_ROWS) + "\n"
    models = {}
    for key, first_line, names in (("csv", "a,b,c\n", ["a", "b", "c"]), ("data", "", None)):
        path = d / f"fixed{'.csv' if key == 'csv' else '.data'}"
        path.write_text(first_line + body)
        out = d / f"snaps-{key}"
        assert run("learn", path, "--out", out, "--quiet", timeout=None).code == 0
        assert run("score", out, path, "--json", timeout=None).code == 0
        models[key] = {"path": str(out), "cards": [3, 3, 3], "names": names}
    missing = d / "missing.data"  # compile the missing-mode kernels
    missing.write_text("0,1\n*,1\n1,0\n")
    assert run("learn", missing, "--out", d / "m", "--missing", "--quiet", timeout=None).code == 0
    return models


@fuzz_settings(450)
@given(case=text_cases(header=True))
def test_fuzz_csv(case, fixed):
    check_text_case(case, fixed)


@fuzz_settings(450)
@given(case=text_cases(header=False))
def test_fuzz_data(case, fixed):
    check_text_case(case, fixed)


# --- Parquet ------------------------------------------------------------------------------------

INT_TYPES = {
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32(), "uint64": pa.uint64(),
}  # fmt: skip
OTHER_TYPES = {
    "bool": pa.bool_(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "large_string": pa.large_string(),
    "dict_int": pa.dictionary(pa.int8(), pa.int64()),
    "dict_string": pa.dictionary(pa.int32(), pa.string()),
    "null": pa.null(),
    "date32": pa.date32(),
}
CLEAN_TYPES = [*INT_TYPES, "bool", "float32", "float64"]


def _values(kind: str, wild: bool):
    """A strategy of one column's values of type ``kind``: mostly states, some anything."""
    small = st.integers(0, 3)
    if kind in INT_TYPES:
        t = INT_TYPES[kind]
        lo, hi = (-(2 ** (t.bit_width - 1)), 2 ** (t.bit_width - 1) - 1)
        if pa.types.is_unsigned_integer(t):
            lo, hi = 0, 2**t.bit_width - 1
        return st.one_of(small, small, st.integers(lo, hi)) if wild else small
    if kind == "bool":
        return st.booleans()
    if kind.startswith("float"):
        anything = st.floats(width=32 if kind == "float32" else 64)
        return st.one_of(small.map(float), anything) if wild else small.map(float)
    if kind.endswith("string"):
        return st.one_of(st.sampled_from(["0", "1", "2"]), st.text(max_size=3))
    if kind == "dict_int":
        return st.one_of(small, st.integers(-3, 300)) if wild else small
    if kind == "null":
        return st.none()
    return st.integers(0, 3)  # date32: days


@dataclass
class ParquetCase:
    table: pa.Table
    kind: str  # "clean", "fault", "wild"
    fault_row: int | None
    row_group_size: int
    statistics: bool


@st.composite
def parquet_cases(draw):
    kind = draw(st.sampled_from(["clean", "clean", "fault", "wild", "wild"]))
    n_rows = draw(st.integers(0, MAX_ROWS))
    n_cols = draw(st.integers(0 if kind == "wild" else 1, MAX_COLS))
    types = CLEAN_TYPES if kind != "wild" else [*INT_TYPES, *OTHER_TYPES]
    names = draw(
        st.lists(st.sampled_from(CLEAN_NAMES), min_size=n_cols, max_size=n_cols, unique=True)
    )
    if kind == "wild":
        names = [draw(st.sampled_from(CLEAN_NAMES + ["", " a"])) for _ in names]
    kinds = [draw(st.sampled_from(types)) for _ in range(n_cols)]
    nullable = kind == "wild" and draw(st.booleans())
    columns = []
    for k in kinds:
        values = _values(k, kind == "wild")
        if nullable:
            values = st.one_of(values, st.none())
        columns.append([draw(values) for _ in range(n_rows)])
    fault_row = None
    if kind == "fault":
        if n_rows == 0:
            fault_row = None  # no rows: refused, naming the file
        else:
            fault_row = draw(st.integers(0, n_rows - 1))
            j = draw(st.integers(0, n_cols - 1))
            t = kinds[j]
            bad = [None]
            if t.startswith("int"):
                bad.append(-1)
            if t.startswith("float"):
                bad += [1.5, math.nan, -1.0]
            columns[j][fault_row] = draw(st.sampled_from(bad))
    arrays = [pa.array(col, type=_arrow_type(k)) for col, k in zip(columns, kinds)]
    table = pa.Table.from_arrays(arrays, names=names) if arrays else pa.table({})
    if kind == "wild" and draw(st.integers(0, 3)) == 0:
        table = table.replace_schema_metadata({b"streammn.schema": draw(_stored_schemas(names))})
    return ParquetCase(table, kind, fault_row, draw(st.integers(1, MAX_ROWS)), draw(st.booleans()))


def _arrow_type(kind: str) -> pa.DataType:
    return INT_TYPES.get(kind) or OTHER_TYPES[kind]


@st.composite
def _stored_schemas(draw, names):
    """A streammn schema in Parquet metadata: fitting the columns, of other names or
    cardinalities, or not a schema at all."""
    choice = draw(st.sampled_from(["fits", "names", "cards", "junk", "json"]))
    if choice == "junk":
        return draw(st.binary(max_size=12))
    if choice == "json":
        return json.dumps(draw(st.sampled_from([[], {}, {"variables": 3}, None, "x"]))).encode()
    variables = [{"name": n, "cardinality": 256} for n in names]
    if choice != "cards":
        variables = [{"name": n, "cardinality": draw(st.integers(1, 255))} for n in names]
    if choice == "names":
        variables = [{"name": n + "_", "cardinality": 2} for n in names]
    return json.dumps({"variables": variables}).encode()


def check_parquet_case(case: ParquetCase, fixed_parquet: dict) -> None:
    t = case.table
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "fuzz.parquet")
        pq.write_table(
            t, path, row_group_size=case.row_group_size, write_statistics=case.statistics
        )
        learned = run("learn", path, "--out", os.path.join(d, "snaps"), "--quiet")
        check_exit(learned, path)
        if case.kind == "clean" and t.num_rows:
            assert learned.code == 0, f"a clean Parquet file is refused: {learned}"
        elif case.kind != "wild":
            check_refused(learned, path, case.fault_row)
        if learned.code == 0:
            assert rows_seen(learned) == t.num_rows, f"rows_seen != {t.num_rows}: {learned}"
            snaps = os.path.join(d, "snaps")
            check_score(run("score", snaps, path, "--json"), snaps, path, t.num_rows)
        scored = run("score", fixed_parquet["path"], path, "--json")
        check_score(scored, fixed_parquet["path"], path, None)
        if scored.code == 0:
            assert strict_json(scored.out)["rows"] == t.num_rows, scored


@pytest.fixture(scope="module")
def fixed_parquet(tmp_path_factory):
    d = tmp_path_factory.mktemp("fixed-parquet")
    rows = np.array(FIXED_ROWS)
    path = d / "fixed.parquet"
    table = pa.table({n: pa.array(rows[:, j], pa.int8()) for j, n in enumerate("abc")})
    pq.write_table(table, path)
    assert run("learn", path, "--out", d / "snaps", "--quiet", timeout=None).code == 0
    assert run("score", d / "snaps", path, "--json", timeout=None).code == 0
    return {"path": str(d / "snaps")}


@fuzz_settings(400)
@given(case=parquet_cases())
def test_fuzz_parquet(case, fixed_parquet):
    check_parquet_case(case, fixed_parquet)


# --- model files --------------------------------------------------------------------------------

# every factor form of Libra's .mn, hard zeros included
HAND_MN = ALL_FORMS
HAND_UAI = """MARKOV
3
2 3 2
3
1 0
2 0 1
2 1 2

2
 0.5 2.0
6
 1 0 1.5 2 0.25 1
6
 1 1 3.0 0 1 0.125
"""
HAND_DATA = "0,0,0\n1,1,1\n0,2,0\n1,0,1\n0,1,1\n"


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    """Valid model files to mutate, each with a few rows of its schema to score: the files a
    snapshot of a learned run holds (.json, and .mn, .uai by ``convert``), and by hand."""
    d = tmp_path_factory.mktemp("seeds")
    rng = np.random.default_rng(0)
    n = 400
    x0 = rng.integers(0, 2, n)
    x2 = rng.integers(0, 3, n)
    x4 = rng.integers(0, 2, n)
    columns = [
        x0,
        np.where(rng.random(n) < 0.9, x0, 1 - x0),
        x2,
        np.where(rng.random(n) < 0.8, x2 % 2, rng.integers(0, 2, n)),
        x4,
        (x4 + x0) % 2,
    ]
    rows = np.stack(columns, axis=1)
    np.savetxt(d / "train.data", rows, fmt="%d", delimiter=",")
    np.savetxt(d / "learned.data", rows[:8], fmt="%d", delimiter=",")
    assert run("learn", d / "train.data", "--out", d / "snaps", "--quiet", timeout=None).code == 0
    texts = {}
    for suffix in ("json", "mn", "uai"):
        assert run("convert", d / "snaps", d / f"learned.{suffix}", timeout=None).code == 0
        texts[f"learned.{suffix}"] = (d / f"learned.{suffix}").read_text()
    (d / "hand.data").write_text(HAND_DATA)
    texts["hand.mn"] = HAND_MN
    texts["hand.uai"] = HAND_UAI
    hand = _write(str(d), "hand.mn", HAND_MN.encode())
    assert run("convert", hand, d / "hand.json", timeout=None).code == 0
    texts["hand.json"] = (d / "hand.json").read_text()
    for argv in (["score", hand, d / "hand.data"], ["inspect", hand], ["sample", hand, "-n", 5]):
        assert run(*argv, timeout=None).code == 0  # untimed first calls (see TIMEOUT_S)
    return {name: (text, str(d / (name.split(".")[0] + ".data"))) for name, text in texts.items()}


MN_TOKENS = ["-inf", "inf", "nan", "1e400", "-1e400", "1e308", "-1", "0", "2", "255", "256",
             "99999999999999999999", "+v0_1", "-v0_9", "+v99_0", "+v1_2", "v0_1", "v0_7", "(",
             ")", "{", "}", "features", "table", "tree", "w", "MN", "DN", "EOF", "2,2", "2,3,2",
             "2,2,2,2,2,2,2", "0,2", "2,256", "x", "\u00e9", "0x1"]  # fmt: skip
UAI_TOKENS = ["MARKOV", "BAYES", "0", "1", "2", "3", "5", "-1", "nan", "inf", "-inf", "1e400",
              "1e-400", "0.5", "1e308", "-0", "99999999999", "254", "255", "256", "x", "0x1",
              "\u00e9"]  # fmt: skip
JSON_VALUES = [0, 1, -1, 2, 255, 256, 10**20, 0.5, -0.5, math.nan, math.inf, -math.inf, "-inf",
               "inf", "nan", "x", "", None, True, [], {}, [0], [1, 2], {"name": "x0"},
               "streammn-mn", 1e308]  # fmt: skip


# a weight or potential as written: special values, the edges of float64, any float
NUMBER_TEXTS = st.one_of(
    st.sampled_from(["0", "-0", "1", "-inf", "inf", "nan", "1e-320", "5e-324", "-745", "709",
                     "710", "1e150", "-1e150", "1e200", "-1e201", "1e-300", "0.0"]),
    st.floats().map(repr),
)  # fmt: skip
_FLOAT_TOKEN = re.compile(r"[-+]?(?:[0-9]*\.[0-9]+|[0-9]+\.?)(?:[eE][-+]?[0-9]+)?|[-+]?inf")


@st.composite
def token_mutations(draw, text: str, pool: list[str]) -> str:
    """``text`` with 1-3 mutations, keeping its lines. A third of the texts have only their
    numbers changed (a weight or a potential: one of :data:`NUMBER_TEXTS`), which keeps most
    files readable; the others have tokens dropped, repeated, replaced by one of ``pool`` or
    swapped, numbers changed, lines dropped or repeated, the text cut short or a byte added."""
    lines = [line.split() for line in text.split("\n")]
    # the numbers of weights and potentials: a decimal point or exponent, or a UAI table line
    numbers = [
        (i, j)
        for i, (raw, line) in enumerate(zip(text.split("\n"), lines))
        for j, tok in enumerate(line)
        if _FLOAT_TOKEN.fullmatch(tok) and (raw.startswith(" ") or not tok.isdigit())
    ]
    if draw(st.integers(0, 2)) == 0 and numbers:
        for _ in range(draw(st.sampled_from([1, 1, 2, 3]))):
            i, j = draw(st.sampled_from(numbers))
            lines[i][j] = draw(NUMBER_TEXTS)
        return "\n".join(" ".join(line) for line in lines) + "\n"
    cut = None
    for _ in range(draw(st.sampled_from([1, 1, 2, 3]))):
        op = draw(st.sampled_from(["drop", "repeat", "replace", "replace", "swap", "number",
                                   "drop line", "repeat line", "cut", "byte"]))  # fmt: skip
        spots = [(i, j) for i, line in enumerate(lines) for j in range(len(line))]
        if not spots:
            break
        i, j = draw(st.sampled_from(spots))
        if op == "drop":
            del lines[i][j]
        elif op == "repeat":
            lines[i].insert(j, lines[i][j])
        elif op == "replace":
            lines[i][j] = draw(st.sampled_from(pool))
        elif op == "swap":
            k, m = draw(st.sampled_from(spots))
            lines[i][j], lines[k][m] = lines[k][m], lines[i][j]
        elif op == "number":
            ints = [(a, b) for a, b in spots if re.fullmatch(r"[-+]?[0-9.e+-]+", lines[a][b])]
            if ints:
                a, b = draw(st.sampled_from(ints))
                lines[a][b] = draw(st.sampled_from(["nan", "-7", "0", "1", "3", "300", "1e9"]))
        elif op == "drop line":
            del lines[i]
        elif op == "repeat line":
            lines.insert(i, list(lines[i]))
        elif op == "cut":
            cut = draw(st.floats(0, 1))
        else:
            lines[i][j] = lines[i][j] + draw(st.sampled_from(["\u00e9", "\x00", "\x7f", "\t"]))
    out = "\n".join(" ".join(line) for line in lines) + "\n"
    return out[: int(len(out) * cut)] if cut is not None else out


@st.composite
def json_mutations(draw, text: str) -> str:
    """A JSON model mutated in its parsed tree: a third only in its numbers (a weight, a
    variable, value, pointer or flag of a condition, a cardinality: most stay readable), the
    others by a value replaced or removed, a list entry repeated or dropped; or token by token
    in its text."""
    tree = json.loads(text)
    if draw(st.integers(0, 2)) == 0:
        features = tree["features"]
        for _ in range(draw(st.sampled_from([1, 1, 2, 3]))):
            columns = ["weights", "weights", "ptr", "var", "val", "eq", "card"]
            column = draw(st.sampled_from(columns))
            if column == "card":
                variable = draw(st.sampled_from(tree["schema"]["variables"]))
                variable["cardinality"] = draw(st.integers(0, 6))
            elif features[column]:
                k = draw(st.integers(0, len(features[column]) - 1))
                value = NUMBER_TEXTS.map(float) if column == "weights" else st.integers(-1, 6)
                features[column][k] = draw(st.one_of(value, st.just("-inf")))
        return json.dumps(tree)
    if draw(st.integers(0, 3)) == 0:
        tokens = re.findall(r'"(?:[^"\\]|\\.)*"|[-0-9.eE+]+|[{}\[\]:,]|\w+|\s+', text)
        pool = ["0", "-1", "1e400", "NaN", "Infinity", "-Infinity", '"-inf"', "null", "[", "]",
                "{", "}", ",", ":", "true", '"x"', "99999999999999999999"]  # fmt: skip
        for _ in range(draw(st.integers(1, 3))):
            k = draw(st.integers(0, len(tokens) - 1))
            op = draw(st.sampled_from(["drop", "repeat", "replace"]))
            if op == "drop":
                del tokens[k]
            elif op == "repeat":
                tokens.insert(k, tokens[k])
            else:
                tokens[k] = draw(st.sampled_from(pool))
        out = "".join(tokens)
        return out[: draw(st.integers(0, len(out)))] if draw(st.integers(0, 4)) == 0 else out
    for _ in range(draw(st.integers(1, 3))):
        spots = list(_json_spots(tree, ()))
        path = draw(st.sampled_from(spots))
        parent = tree
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        op = draw(st.sampled_from(["replace", "replace", "remove", "repeat"]))
        if op == "replace":
            parent[key] = copy.deepcopy(draw(st.sampled_from(JSON_VALUES)))
        elif op == "remove":
            del parent[key]
        elif isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
    return json.dumps(tree)  # NaN and Infinity as Python writes them


def _json_spots(node, path):
    """Every path to a value of a JSON tree (dict keys and list indexes)."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        yield path + (key,)
        if isinstance(value, (dict, list)):
            yield from _json_spots(value, path + (key,))


def check_model_case(name: str, text: str, data: str) -> None:
    """Score, convert, inspect and sample a (mutated) model file; check each outcome."""
    with tempfile.TemporaryDirectory() as d:
        path = _write(d, "fuzz-" + name, text.encode("utf-8", "surrogatepass"))
        try:
            schema, _ = read_model(path)
        except Exception:  # noqa: BLE001 (the commands must refuse it, checked below)
            schema = None
        scored = run("score", path, data, "--json")
        result = check_score(scored, path, data)
        target = os.path.join(d, "converted" + {".json": ".mn", ".mn": ".uai", ".uai": ".json"}[
            os.path.splitext(name)[1]])  # fmt: skip
        converted = run("convert", path, target)
        check_exit(converted, path, target)
        if converted.code == 0 and result is not None and result.get("pll") is not None:
            again = check_score(run("score", target, data, "--json"), target, data)
            assert again is not None, f"a converted model cannot be scored: {converted}"
            assert again["pll"] is not None and math.isclose(
                again["pll"], result["pll"], rel_tol=1e-6, abs_tol=1e-9
            ), f"converted scores {again} not {result}: {converted}"
        inspected = run("inspect", path, "--json")
        check_exit(inspected, path)
        if inspected.code == 3 and not name.endswith(".json"):  # JSON errors are of its tree
            assert re.search(r"\bline \d+", inspected.err) or "weights sum" in inspected.err, (
                f"a refused .mn or .uai file's line not named: {inspected}"
            )
        if inspected.code == 0:
            strict_json(inspected.out)
        sampled = run("sample", path, "-n", 5, "--burn-in", 5)
        check_exit(sampled, path)
        if sampled.code == 0:
            assert schema is not None, f"sampled a model read_model refuses: {sampled}"
            rows = [line.split(",") for line in sampled.out.split()]
            assert len(rows) == 5 and all(len(r) == schema.n_vars for r in rows), sampled
            values = np.array(rows, dtype=np.int64)
            assert ((values >= 0) & (values < schema.cardinalities)).all(), sampled
        if schema is None:  # a file the reader refuses: every command refuses it
            for outcome in (scored, converted, inspected, sampled):
                assert outcome.code == 3, f"read_model refuses it, the command not: {outcome}"


@fuzz_settings(350)
@given(data=st.data())
def test_fuzz_json_models(data, seeds):
    name = data.draw(st.sampled_from(["learned.json", "hand.json"]))
    text, rows = seeds[name]
    check_model_case(name, data.draw(json_mutations(text)), rows)


@fuzz_settings(350)
@given(data=st.data())
def test_fuzz_mn_models(data, seeds):
    name = data.draw(st.sampled_from(["learned.mn", "hand.mn"]))
    text, rows = seeds[name]
    check_model_case(name, data.draw(token_mutations(text, MN_TOKENS)), rows)


@fuzz_settings(350)
@given(data=st.data())
def test_fuzz_uai_models(data, seeds):
    name = data.draw(st.sampled_from(["learned.uai", "hand.uai"]))
    text, rows = seeds[name]
    check_model_case(name, data.draw(token_mutations(text, UAI_TOKENS)), rows)


def test_seeds_are_valid(seeds, tmp_path):
    """The unmutated seeds are read, scored, converted, inspected and sampled."""
    for name, (text, rows) in seeds.items():
        check_model_case(name, text, rows)
        assert read_model(_write(str(tmp_path), name, text.encode()))


# --- regressions: the escapes the fuzzer found, one plain test each -----------------------------


def _learn(tmp_path, name: str, content: bytes | None = None, *options) -> Outcome:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    return run("learn", path, "--out", tmp_path / "snaps", "--quiet", *options)


def _parquet(tmp_path, table: pa.Table, **options) -> str:
    path = tmp_path / "fuzz.parquet"
    pq.write_table(table, path, **options)
    return str(path)


def test_bom_opening_the_first_row_after_a_header_is_a_refused_cell(tmp_path):
    """pyarrow drops a byte order mark at the start of what it reads, which starts after the
    header: ``\\ufeff1`` was learned as 1 there and refused in every other row."""
    for name, text in (("fuzz.csv", "a,b\n\ufeff1,0\n0,0\n"), ("fuzz.data", "\ufeff\ufeff1,0\n")):
        learned = _learn(tmp_path, name, text.encode())
        check_refused(learned, name, row=0)
        assert "'\\ufeff1'" in learned.err


def test_libra_schema_with_a_cardinality_out_of_range_names_its_file(tmp_path):
    """A sibling ``.schema`` of ``-1`` or ``0,2`` was refused without naming the file."""
    (tmp_path / "fuzz.data").write_text("0,1\n1,0\n")
    for text in ("0,2", "2,256", "-1", "2,\u0662"):
        (tmp_path / "fuzz.schema").write_text(text + "\n")
        check_refused(_learn(tmp_path, "fuzz.data"), "fuzz.schema")


def test_parquet_without_columns_names_its_file(tmp_path):
    """It was refused as ``a schema needs at least one variable``, naming no file."""
    path = _parquet(tmp_path, pa.table({}))
    check_refused(run("learn", path, "--out", tmp_path / "snaps"), path)


def test_parquet_float_infinity_is_refused(tmp_path):
    """Exit 1: ``cannot convert float infinity to integer`` (its footer statistics' maximum)."""
    for statistics in (True, False):
        table = pa.table({"a": pa.array([0.0, math.inf]), "b": pa.array([0, 1], pa.int8())})
        path = _parquet(tmp_path, table, write_statistics=statistics)
        learned = run("learn", path, "--out", tmp_path / "snaps")
        check_refused(learned, path)
        assert "inf" in learned.err


def test_parquet_metadata_that_is_no_schema_names_its_file(tmp_path):
    """A ``streammn.schema`` metadata entry that is not UTF-8 or not JSON exited 1; one that
    lacks a column, or declares a bad cardinality, was refused without naming the file."""
    for stored in (
        b"\xa0\x01",
        b"{garbage",
        b"[]",
        json.dumps({"variables": [{"name": "z", "cardinality": 2}]}).encode(),
        json.dumps({"variables": [{"name": "a", "cardinality": 256}]}).encode(),
    ):
        table = pa.table({"a": pa.array([0, 1], pa.int8())})
        path = _parquet(tmp_path, table.replace_schema_metadata({b"streammn.schema": stored}))
        learned = run("learn", path, "--out", tmp_path / "snaps")
        check_refused(learned, path)
        assert "metadata" in learned.err


def test_parquet_bool_beyond_a_stored_cardinality_is_refused_at_its_row(tmp_path):
    """A bool column was taken as states without a range check: ``True`` in a variable the
    stored schema gives one state was learned (exit 0), and ``score`` then exited 1 (``could
    not broadcast input array from shape (5,) into shape (4,)``)."""
    stored = json.dumps({"variables": [{"name": n, "cardinality": 1} for n in "ab"]})
    table = pa.table({"a": pa.array([False, True]), "b": pa.array([False, False])})
    path = _parquet(tmp_path, table.replace_schema_metadata({b"streammn.schema": stored}))
    learned = run("learn", path, "--out", tmp_path / "snaps")
    check_refused(learned, path, row=1)
    assert "value 1 out of range 0..0 for variable 'a'" in learned.err


def test_parquet_naming_a_column_twice_is_refused_as_such(tmp_path):
    """It was refused, but as ``no column named 'a'``."""
    table = pa.Table.from_arrays([pa.array([0, 1]), pa.array([1, 0])], names=["a", "a"])
    path = _parquet(tmp_path, table)
    learned = run("learn", path, "--out", tmp_path / "snaps")
    check_refused(learned, path)
    assert "names two columns 'a'" in learned.err


def _json_model(tmp_path, column: str, k: int, value) -> str:
    schema = {"variables": [{"name": "x0", "cardinality": 2}, {"name": "x1", "cardinality": 2}]}
    features = {"weights": [0.5, -0.25], "ptr": [0, 1, 3], "var": [0, 0, 1], "val": [1, 0, 1],
                "eq": [1, 1, 1]}  # fmt: skip
    features[column][k] = value
    path = tmp_path / "model.json"
    doc = {"format": "streammn-mn", "version": 1, "schema": schema, "features": features}
    path.write_text(json.dumps(doc))
    return str(path)


def test_json_model_condition_entries_must_be_integers(tmp_path):
    """``-Infinity`` in ``var`` exited 1 (``cannot convert float infinity to integer``), and
    ``1.5`` was cut to 1 without a word."""
    data = tmp_path / "rows.data"
    data.write_text("0,1\n1,1\n")
    assert run("score", _json_model(tmp_path, "val", 0, 1), data).code == 0
    for column, value in (("var", -math.inf), ("val", 1.5), ("ptr", True), ("eq", "1")):
        path = _json_model(tmp_path, column, 1, value)
        for argv in (["score", path, data], ["inspect", path], ["convert", path, path + ".mn"]):
            outcome = run(*argv)
            check_refused(outcome, path)
            assert f'bad feature column "{column}"' in outcome.err


def test_model_weights_that_overflow_float64_are_refused(tmp_path):
    """A finite weight of ``1e308`` was read: ``score`` printed a PLL of null (an overflow,
    with a numpy warning), though every row has a positive probability."""
    data = tmp_path / "rows.data"
    data.write_text("0,1\n1,1\n")
    mn = tmp_path / "model.mn"
    mn.write_text("2,2\nMN {\n1e308 +v0_1\n-0.5 +v0_0 +v1_1\n}\n")
    check_refused(run("score", mn, data, "--json"), str(mn))
    path = _json_model(tmp_path, "weights", 0, 1e201)
    check_refused(run("score", path, data, "--json"), path)


def test_uai_refuses_potentials_that_underflow(tmp_path):
    """A weight of -745 was written to UAI as the potential 5e-324 (a subnormal: the state's
    PLL changed from -281.38 to -281.34), one of -1e150 as 0 (a possible state made
    impossible: PLL null); the .mn file it came from scores finite."""
    data = tmp_path / "rows.data"
    data.write_text("0,1\n1,1\n0,0\n")
    for weight in ("-745", "-1e150"):
        mn = tmp_path / "model.mn"
        mn.write_text(f"2,2\nMN {{\n{weight} +v0_1\n-0.5 +v0_0 +v1_1\n}}\n")
        assert check_score(run("score", mn, data, "--json"), str(mn), str(data))["pll"] < 0
        converted = run("convert", mn, tmp_path / "model.uai")
        check_refused(converted, "model.uai")
        assert "underflows" in converted.err


def test_missing_value_scored_is_located(tmp_path):
    """A model learned with --missing scores complete rows only; a row with a missing value is
    refused at its file and row (it was ``row 1, column 1: missing value: ...``, no file, the
    row counted from its batch's start)."""
    data = tmp_path / "m.csv"
    data.write_text("a,b\n0,1\n1,NA\n1,1\n0,0\n")
    assert run("learn", data, "--out", tmp_path / "snaps", "--missing", "--quiet").code == 0
    check_refused(run("score", tmp_path / "snaps", data, "--json"), str(data), row=1)


def test_missing_model_exits_4(tmp_path):
    """A model file or snapshot directory that is not there is unavailable (exit 4, as README's
    table says of a missing file), as a missing data file is; it exited 3, and a missing
    snapshot directory was refused as ``cannot read a model with suffix '(none)'``."""
    data = tmp_path / "rows.data"
    data.write_text("0,1\n")
    for name in ("snaps", "model.json", "model.mn", "model.uai"):
        model = str(tmp_path / name)
        for argv in (["score", model, data], ["inspect", model], ["sample", model, "-n", 1]):
            outcome = run(*argv)
            check_refused(outcome, model, code=4)
            assert "no such model file" in outcome.err


def test_missing_density_file_exits_4(tmp_path):
    """``score missing.et rows.data`` exits 1 (``[Errno 2] No such file or directory``)."""
    data = tmp_path / "rows.data"
    data.write_text("0,1\n")
    check_refused(run("score", tmp_path / "missing.et", data), "missing.et", code=4)


def test_mn_byte_that_is_not_ascii_names_its_line(tmp_path):
    """A .mn file with a byte that is not ASCII was refused as ``not an ASCII text file``,
    naming no line."""
    mn = tmp_path / "model.mn"
    mn.write_bytes(b"2,2\r\nMN {\r\n0.5 +v0_1\r\n-1 +v1_0\xe9\r\n}\r\n")
    outcome = run("inspect", mn)
    check_refused(outcome, str(mn))
    assert "line 4: byte 0xe9 is not ASCII text" in outcome.err
