"""streammn's JSON model format: lossless round trips and clear errors."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings

from helpers.formats_strategies import models
from streammn import Schema
from streammn.features import FeatureSet
from streammn.formats import ModelFormatError, read_json, read_model, write_json, write_model


def identical(a, b):
    return a.equals(b) and np.array_equal(a.weights.view(np.int64), b.weights.view(np.int64))


@settings(max_examples=60, deadline=None)
@given(models(named=True, canonical=False))
def test_round_trip_is_identical(tmp_path_factory, model):
    schema, fs = model
    path = tmp_path_factory.mktemp("json") / "m.json"
    write_json(path, schema, fs)
    schema2, fs2 = read_json(path)
    assert schema2 == schema and schema2.names == schema.names
    assert identical(fs, fs2)
    json.loads(path.read_text())  # strict JSON: -inf is not a bare token


def test_known_file_layout(tmp_path):
    schema = Schema.from_cardinalities([2, 3], ["a", "b"])
    fs = FeatureSet.from_features(schema, [(0.1, [(1, 2, False)]), (-math.inf, [(0, 1, True)])])
    write_model(tmp_path / "m.json", schema, fs)
    d = json.loads((tmp_path / "m.json").read_text())
    assert d["format"] == "streammn-mn" and d["version"] == 1
    assert d["features"] == {
        "weights": [0.1, "-inf"],
        "ptr": [0, 1, 2],
        "var": [1, 0],
        "val": [2, 1],
        "eq": [0, 1],
    }


GOOD = {
    "format": "streammn-mn",
    "version": 1,
    "schema": {"variables": [{"name": "a", "cardinality": 2}]},
    "features": {"weights": [1.0], "ptr": [0, 1], "var": [0], "val": [1], "eq": [1]},
}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"version": 2}, "unsupported streammn-mn version 2"),
        ({"format": "other"}, "not a streammn model"),
        ({"schema": {"vars": []}}, "bad schema"),
        ({"features": {"weights": [1.0]}}, "must hold the lists"),
        ({"features": {**GOOD["features"], "weights": ["x"]}}, "bad feature column"),
        ({"features": {**GOOD["features"], "weights": [float("nan")]}}, "not allowed"),
        ({"features": {**GOOD["features"], "weights": [float("inf")]}}, "not allowed"),
        ({"features": {**GOOD["features"], "ptr": [0, 2]}}, "inconsistent features"),
        ({"features": {**GOOD["features"], "val": [2]}}, "inconsistent features"),
        ({"features": {**GOOD["features"], "eq": [3]}}, "eq flags"),
        ({"features": {**GOOD["features"], "var": [2**32]}}, "conditions need variables 0..0"),
    ],
)
def test_malformed_files_are_rejected(tmp_path, change, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**GOOD, **change}))
    with pytest.raises(ModelFormatError, match=message) as err:
        read_json(path)
    assert str(path) in str(err.value)


def test_invalid_json_names_the_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"format": "streammn-mn",\n "version": 1,\n oops}\n')
    with pytest.raises(ModelFormatError) as err:
        read_json(path)
    assert err.value.line == 3 and "line 3" in str(err.value)


def test_writers_refuse_nan_and_leave_no_file(tmp_path):
    schema = Schema.binary(2)
    fs = FeatureSet.from_features(schema, [(float("nan"), [(0, 1, True)])])
    for suffix in (".json", ".mn", ".uai"):
        with pytest.raises(ModelFormatError, match="feature 0 has weight nan") as err:
            write_model(tmp_path / f"m{suffix}", schema, fs)
        assert str(tmp_path / f"m{suffix}") in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_suffix_dispatch_errors(tmp_path):
    schema = Schema.binary(2)
    with pytest.raises(ModelFormatError, match="suffix '.txt'"):
        write_model(tmp_path / "m.txt", schema, FeatureSet.empty(schema))
    with pytest.raises(ModelFormatError, match="suffix '.bn'"):
        read_model(tmp_path / "m.bn")
    with pytest.raises(ModelFormatError, match="no such model file"):
        read_model(tmp_path / "missing.mn")
    write_model(tmp_path / "m.json", schema, FeatureSet.empty(schema))
    with pytest.raises(ModelFormatError, match="differs"):
        read_model(tmp_path / "m.json", schema=Schema.binary(3))
