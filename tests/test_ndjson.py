"""Newline-delimited JSON files: the same events as CSV give the same model, resume, errors."""

import csv
import json

import numpy as np
import pytest

from streammn.connectors import CsvSource, JsonLinesSource, open_source
from streammn import DTSL, Schema
from streammn.errors import SettingsError
from streammn.schema import SchemaError

from tests.test_cli import ROOT, run_cli

EVENTS = ROOT / "examples" / "events.csv"


def events_as_ndjson(path, blank="absent"):
    """``examples/events.csv`` as JSON lines: words as strings, booleans and numbers as JSON
    values, a blank cell as an absent key (or ``null``)."""
    with open(EVENTS, newline="") as f, open(path, "w") as out:
        for record in csv.DictReader(f):
            obj = {}
            for key, cell in record.items():
                if cell == "":
                    if blank == "null":
                        obj[key] = None
                    continue
                if cell in ("true", "false"):
                    obj[key] = cell == "true"
                elif key == "latency_ms":
                    obj[key] = float(cell)
                else:
                    obj[key] = cell
            out.write(json.dumps(obj) + "\n")
            if blank == "null":
                out.write("\n")  # empty lines are not rows
    return path


@pytest.mark.parametrize("blank", ["absent", "null"])
def test_the_same_events_as_csv_give_the_same_schema_rows_and_model(tmp_path, blank):
    path = events_as_ndjson(tmp_path / "events.ndjson", blank)
    with CsvSource(EVENTS, missing=True) as c, JsonLinesSource(path, missing=True) as j:
        assert j.schema.to_dict() == c.schema.to_dict()
        rows_csv, rows_json = c.read_all(), j.read_all()
    np.testing.assert_array_equal(rows_json, rows_csv)
    a = DTSL(c.schema, cpd="tree").fit(rows_csv)
    b = DTSL(j.schema, cpd="tree").fit(rows_json)
    assert a.to_bytes() == b.to_bytes()


def test_state_numbers_resume_mid_file_and_across_files(tmp_path):
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 3, size=(2500, 4))
    names = ["a", "b", "c", "d"]
    for k, part in enumerate((rows[:1700], rows[1700:])):
        with open(tmp_path / f"part{k}.jsonl", "w") as f:
            f.writelines(json.dumps(dict(zip(names, map(int, r)))) + "\r\n" for r in part)
    source = open_source(tmp_path, batch_size=300)
    assert isinstance(source, JsonLinesSource) and source.schema == Schema.from_cardinalities(
        [3, 3, 3, 3], names
    )
    batches = list(source)
    np.testing.assert_array_equal(np.concatenate([b.rows for b in batches]), rows)
    resumed = JsonLinesSource(str(tmp_path / "*.jsonl"), batch_size=300, schema=source.schema)
    resumed.seek(batches[6].end)  # inside the first file
    np.testing.assert_array_equal(resumed.read_all(), rows[batches[6].end["offset"] :])


def test_a_bad_line_is_located_and_a_csv_token_refused(tmp_path):
    path = tmp_path / "bad.ndjson"
    path.write_text('{"a": 0, "b": 1}\n\n{"a": 1, "b": 0}\n{"a": 1, "b": "x"}\n')
    schema = Schema.from_cardinalities([2, 2], ["a", "b"])
    with pytest.raises(SchemaError) as error:
        JsonLinesSource(path, schema=schema).read_all()
    assert error.value.row == 2 and "bad.ndjson" in str(error.value)
    with pytest.raises(SettingsError, match="null"):
        JsonLinesSource(path, missing_token="?")
    (tmp_path / "empty.ndjson").write_text("\n")
    with pytest.raises(SchemaError, match="no rows"):
        JsonLinesSource(tmp_path / "empty.ndjson")


def test_learn_reads_ndjson_from_the_command_line(tmp_path):
    path = events_as_ndjson(tmp_path / "events.ndjson")
    run_cli("learn", path, "--out", tmp_path / "s", "--missing", "--quiet")
    manifest = json.loads((tmp_path / "s" / "snap-000001" / "manifest.json").read_text())
    assert manifest["rows_seen"] == 400 and "country" in manifest["vocabulary"]
