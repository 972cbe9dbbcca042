"""Named values in, named values out: vocabularies, bins, and every source that reads them."""

import importlib.util
import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streammn.connectors import open_source
from streammn.connectors.csv import CsvSource
from streammn.connectors.messages import MessageDecoder
from helpers.datasets import ROOT
from streammn.cli import main
from streammn.dtsl import DTSL
from streammn.schema.encoding import decode_rows, named_csv
from streammn.stream.engine import StreamLearner
from streammn.formats.native import read_json, write_json
from streammn.grafting.learner import EdgeGrafting
from streammn.schema import Schema, SchemaError, Variable
from streammn.schema.file import read_schema_file
from streammn.schema.inference import infer_schema
from streammn.stream.snapshot import list_snapshots, load_snapshot, read_snapshot

N_ROWS = 600


def event_columns(n=N_ROWS, seed=0):
    """Sessions: words, booleans, a number and blanks, with dependencies to learn."""
    rng = np.random.default_rng(seed)
    country = rng.choice(["US", "DE", "FR"], n)
    mobile = rng.random(n) < 0.5
    clicked = rng.random(n) < np.where(mobile, 0.2, 0.7)
    latency = np.round(rng.gamma(2.0, np.where(mobile, 90.0, 30.0)), 1)
    device = np.where(rng.random(n) < 0.05, None, np.where(mobile, "mobile", "desktop"))
    latency = np.where(rng.random(n) < 0.05, np.nan, latency)
    return {
        "country": country.tolist(),
        "device": device.tolist(),
        "clicked": clicked.tolist(),
        "latency": latency.tolist(),
    }


def cell(value) -> str:
    """A value as a CSV of events writes it: blank for a null, ``true``/``false``."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def write_csv(path, columns):
    lines = [",".join(columns)] + [",".join(map(cell, row)) for row in zip(*columns.values())]
    path.write_text("\n".join(lines) + "\n")
    return path


def arrow_table(columns):
    return pa.table(
        {
            "country": pa.array(columns["country"]).dictionary_encode(),
            "device": pa.array(columns["device"], pa.string()),
            "clicked": pa.array(columns["clicked"]),
            "latency": pa.array(columns["latency"], pa.float64(), from_pandas=True),
        }
    )


@pytest.fixture
def events(tmp_path):
    columns = event_columns()
    csv_path = write_csv(tmp_path / "events.csv", columns)
    pq.write_table(arrow_table(columns), tmp_path / "events.parquet", row_group_size=250)
    return columns, csv_path, tmp_path / "events.parquet"


def learned(source):
    return DTSL(source.schema, grace_period=50).fit(source)


def test_a_schema_carries_names_and_bins_through_its_description():
    schema = Schema(
        [
            Variable("country", states=("DE", "US")),
            Variable("clicked", states=(False, True)),
            Variable("status", states=(200, 404, 500)),
            Variable("latency", bins=(12.5, 40)),
            Variable("n", 3),
        ]
    )
    assert schema.cardinalities.tolist() == [2, 2, 3, 3, 3]
    assert schema[3].state_names == ("(-inf, 12.5)", "[12.5, 40)", "[40, inf)")
    assert Schema.from_dict(json.loads(schema.to_json())) == schema
    assert Schema.from_dict(schema.to_dict()) != Schema.from_cardinalities([2, 2, 3, 3, 3])


@pytest.mark.parametrize(
    "kwargs, says",
    [
        ({"states": ("a", 1)}, "all of one kind"),
        ({"states": ("a", "a")}, "named twice"),
        ({"states": (1.5, 2.5)}, "strings, booleans or integers"),
        ({"bins": (3, 1)}, "strictly increasing"),
        ({"bins": (1, float("nan"))}, "finite"),
        ({"states": ("a", "b"), "cardinality": 3}, "cardinality 3 for 2 states"),
    ],
)
def test_a_bad_vocabulary_is_refused(kwargs, says):
    with pytest.raises(SchemaError, match=says):
        Variable("v", **kwargs)


def test_csv_names_round_trip(events):
    columns, csv_path, _ = events
    with CsvSource(csv_path, missing=True, batch_size=128) as source:
        schema = source.schema
        rows = source.read_all()
    assert schema["country"].states == ("DE", "FR", "US")
    assert schema["device"].states == ("desktop", "mobile")
    assert schema["clicked"].states == (False, True)
    assert schema["latency"].bins is not None and schema["latency"].cardinality == 4
    back = decode_rows(rows, schema).to_pydict()
    assert back["country"] == columns["country"]
    assert back["device"] == columns["device"]
    assert back["clicked"] == columns["clicked"]
    edges = np.array(schema["latency"].bins)
    labels = schema["latency"].state_names
    expected = [
        None if np.isnan(v) else labels[int(np.searchsorted(edges, v, side="right"))]
        for v in columns["latency"]
    ]
    assert back["latency"] == expected


def test_csv_parquet_and_a_table_give_the_same_learner(events):
    columns, csv_path, parquet_path = events
    with CsvSource(csv_path, missing=True, batch_size=100) as csv_source:
        from_csv = learned(csv_source)
    with open_source(parquet_path, missing=True, batch_size=100) as pq_source:
        assert pq_source.schema == csv_source.schema
        from_parquet = learned(pq_source)
    assert from_parquet.to_bytes() == from_csv.to_bytes()
    schema = csv_source.schema
    from_table = DTSL(schema, grace_period=50).fit(arrow_table(columns))
    assert from_table.to_bytes() == from_csv.to_bytes()
    assert infer_schema(arrow_table(columns)).with_missing() == schema


def test_kafka_json_events_give_the_csv_learner(events):
    """The same events as JSON messages on a Kafka topic (the mock cluster): nulls and NaN as
    JSON null, booleans and numbers as JSON's own. Byte-identical to the CSV's learner."""
    pytest.importorskip("confluent_kafka", reason="the 'kafka' extra is not installed")
    from confluent_kafka import Producer

    from streammn.connectors.kafka import KafkaSource
    from streammn.connectors.kafka_mock import MockKafkaCluster

    columns, csv_path, _ = events
    with CsvSource(csv_path, missing=True, batch_size=100) as csv_source:
        from_csv = learned(csv_source)

    def value(v):
        return None if isinstance(v, float) and np.isnan(v) else v

    messages = [
        json.dumps({k: value(v) for k, v in zip(columns, row)}).encode()
        for row in zip(*columns.values())
    ]
    with MockKafkaCluster() as mock:
        mock.create_topic("events", 1)
        producer = Producer({"bootstrap.servers": mock.bootstrap, "linger.ms": 5})
        for m in messages:
            producer.produce("events", m, partition=0)
        assert producer.flush(30) == 0
        with KafkaSource(
            mock.bootstrap,
            "events",
            "g",
            schema=csv_source.schema,
            format="json",
            batch_size=100,
            stop_at_end=True,
        ) as kafka_source:
            from_kafka = learned(kafka_source)
    assert from_kafka.to_bytes() == from_csv.to_bytes()


def test_a_pandas_frame_is_rows(events):
    pd = pytest.importorskip("pandas")
    columns, csv_path, _ = events
    with CsvSource(csv_path, missing=True) as source:
        expected = source.read_all()
        schema = source.schema
    frame = pd.DataFrame(columns)
    assert np.array_equal(schema.validate(frame), expected)
    assert DTSL(schema).partial_fit(frame).rows_seen == N_ROWS


def test_model_json_keeps_the_names_and_sample_writes_them(events, tmp_path):
    _, csv_path, _ = events
    with CsvSource(csv_path, missing=True) as source:
        model = learned(source).to_markov_network()
    write_json(tmp_path / "model.json", model.schema, model.features)
    schema, _ = read_json(tmp_path / "model.json")
    assert schema["country"].states == ("DE", "FR", "US")
    text = named_csv(np.array([[2, 1, 1, 0], [0, 0, 0, 3]], np.uint8), schema)
    assert text.splitlines()[0] == '"country","device","clicked","latency"'
    assert text.splitlines()[1].startswith('"US","mobile",true,"(-inf, ')


def test_cli_learn_sample_inspect_speak_names(events, tmp_path, capsys):
    _, csv_path, _ = events
    out = tmp_path / "snaps"
    assert main(["learn", str(csv_path), "--out", str(out), "--missing", "--quiet"]) == 0
    manifest = read_snapshot(list_snapshots(out)[-1]).manifest
    assert manifest["vocabulary"]["country"]["states"] == ["DE", "FR", "US"]
    capsys.readouterr()
    assert main(["sample", str(out), "-n", "20", "--seed", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == '"country","device","clicked","latency"' and len(lines) == 21
    assert {line.split(",")[0] for line in lines[1:]} <= {'"DE"', '"FR"', '"US"'}
    assert main(["inspect", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["states"]["clicked"] == [False, True]


def test_a_schema_file_declares_names_and_bins(events, tmp_path, capsys):
    _, csv_path, _ = events
    declared = {
        "variables": [
            {"name": "country", "states": ["US", "DE", "FR"]},
            {"name": "device", "states": ["mobile", "desktop"]},
            {"name": "clicked", "states": [False, True]},
            {"name": "latency", "bins": [50, 100]},
        ]
    }
    path = tmp_path / "events.json"
    path.write_text(json.dumps(declared))
    out = tmp_path / "snaps"
    argv = ["learn", str(csv_path), "--out", str(out), "--missing", "--quiet"]
    assert main(argv + ["--schema", str(path)]) == 0
    schema = load_snapshot(out).schema
    assert schema["country"].states == ("US", "DE", "FR")
    assert schema["latency"].state_names == ("(-inf, 50)", "[50, 100)", "[100, inf)")


def test_an_unknown_name_is_a_located_error(events, tmp_path):
    columns, _, _ = events
    columns["country"][400] = "JP"
    path = write_csv(tmp_path / "jp.csv", columns)
    schema = Schema.from_dict(
        {
            "variables": [
                {"name": "country", "states": ["DE", "FR", "US"]},
                {"name": "device", "states": ["desktop", "mobile"]},
                {"name": "clicked", "states": [False, True]},
                {"name": "latency", "bins": [50, 100]},
            ]
        }
    )
    with CsvSource(path, schema=schema, missing=True, batch_size=128) as source:
        with pytest.raises(SchemaError, match="unknown value 'JP' for variable 'country'") as e:
            source.read_all()
    assert (e.value.row, e.value.column, e.value.source) == (400, 0, str(path))
    table = arrow_table(columns)
    with pytest.raises(SchemaError, match="'JP'") as e:
        schema.with_missing().validate(table, row_offset=1000, source="frame")
    assert (e.value.row, e.value.column) == (1400, 0)


@pytest.mark.parametrize(
    "text, message, row, column",
    [
        ("a,1.5\nb,2e3\na,twelve\n", "not a number: 'twelve' for variable 'latency'", 2, 1),
        ("a,1.5\n,2\n", "null value for variable 'kind'", 1, 0),  # not in missing mode
    ],
)
def test_an_unparsable_number_or_a_null_is_a_located_error(tmp_path, text, message, row, column):
    path = tmp_path / "bad.csv"
    path.write_text("kind,latency\n" + text)
    schema = Schema([Variable("kind", states=("a", "b")), Variable("latency", bins=(10,))])
    with CsvSource(path, schema=schema) as source:
        with pytest.raises(SchemaError, match=message) as e:
            source.read_all()
    assert (e.value.row, e.value.column, e.value.source) == (row, column, str(path))


def grown_columns():
    """Countries that appear one after another down the stream."""
    columns = event_columns(1200, seed=3)
    rng = np.random.default_rng(4)
    later = rng.choice(["JP", "BR"], 1200)
    country = np.array(columns["country"], dtype=object)
    country[500:] = np.where(rng.random(700) < 0.3, later[500:], country[500:])
    columns["country"] = country.tolist()
    return columns


def test_new_names_grow_in_the_order_they_appear(tmp_path):
    columns = grown_columns()
    path = write_csv(tmp_path / "grows.csv", {k: v[:400] for k, v in columns.items()})
    with CsvSource(path, missing=True) as first:
        schema = first.schema.with_growth({"country": 6})
    model = DTSL(schema, grace_period=50)
    model.partial_fit(arrow_table(columns))
    first_new = columns["country"].index("JP"), columns["country"].index("BR")
    order = ["JP", "BR"] if first_new[0] < first_new[1] else ["BR", "JP"]
    assert model.schema["country"].states == ("DE", "FR", "US", *order)
    assert model.schema.version == 2  # one growth event per new name: they start apart
    with pytest.raises(SchemaError, match="unknown value 'XX'"):
        row = {k: [v[0]] for k, v in columns.items()} | {"country": ["XX"]}
        schema.fixed().validate(pa.table(row))


@pytest.mark.parametrize("cut", [0, 1])  # before the new names, and after them
def test_resume_with_a_growing_vocabulary_is_identical(tmp_path, cut):
    columns = grown_columns()
    path = write_csv(tmp_path / "grows.csv", columns)

    def engine(out):
        declared = Schema([Variable("country", states=("DE", "FR", "US"))]).with_missing()
        with CsvSource(path, missing=True) as first:  # the vocabulary of the first 500 rows
            declared = Schema([declared[0], *list(first.schema)[1:]]).with_growth({"country": 8})
        source = CsvSource(path, schema=declared, missing=True, batch_size=100)
        return StreamLearner(
            source,
            DTSL(source.schema, grace_period=50),
            tmp_path / out,
            every_rows=300,
            keep=10,
            progress=None,
            background=False,
        )

    whole = engine("whole")
    whole.run()
    snaps = list_snapshots(tmp_path / "whole")
    (tmp_path / "cut").mkdir()
    shutil.copytree(snaps[cut], tmp_path / "cut" / snaps[cut].name)  # stopped there
    resumed = engine("cut")
    assert resumed.resume()
    assert resumed.learner.schema["country"].cardinality == [3, 5][cut]
    resumed.run()
    assert resumed.learner.schema["country"].states == whole.learner.schema["country"].states
    assert resumed.learner.to_bytes() == whole.learner.to_bytes()


def test_the_example_events_file_is_what_its_script_writes(tmp_path):
    spec = importlib.util.spec_from_file_location("make_events", ROOT / "examples/make_events.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = module.main(tmp_path / "events.csv")
    assert written.read_bytes() == (ROOT / "examples" / "events.csv").read_bytes()


def test_integer_codes_are_names_and_may_grow(tmp_path):
    path = tmp_path / "status.csv"
    path.write_text("status,ok\n200,true\n 404 ,false\n200,TRUE\n500,false\n404,False\n")
    schema = Schema([Variable("status", states=(200, 404)), Variable("ok", states=(False, True))])
    with CsvSource(path, schema=schema) as source:
        with pytest.raises(SchemaError, match="unknown value '500' for variable 'status'") as e:
            source.read_all()
    assert e.value.row == 3
    growing = schema.with_growth(4)
    with CsvSource(path, schema=growing) as source:
        rows = source.read_all()
    assert rows.tolist() == [[0, 1], [1, 0], [0, 1], [2, 0], [1, 0]]
    assert growing.known_states(0) == (200, 404, 500)
    assert growing.grown_to([3, 2])["status"].states == (200, 404, 500)


def test_a_schema_file_may_give_kinds_only(tmp_path):
    path = tmp_path / "zips.csv"
    path.write_text("zip,age,n\n02134,31,0\n10001,45,1\n02134,7,2\n94105,60,1\n")
    with CsvSource(path) as source:
        assert source.schema["zip"].bins is not None  # read as numbers when nothing is said
        assert source.schema["age"].cardinality == 61  # small integers: state numbers
    declared = tmp_path / "kinds.json"
    declared.write_text(
        json.dumps(
            {
                "variables": [
                    {"name": "zip", "kind": "category"},
                    {"name": "age", "kind": "number", "bins": 2},
                ]
            }
        )
    )
    schema, kinds = read_schema_file(declared)
    assert schema is None
    with CsvSource(path, kinds=kinds) as source:
        assert source.schema["zip"].states == ("02134", "10001", "94105")
        assert source.schema["age"].bins == (31.0,)  # the median, a value of the column
        assert source.schema["n"].cardinality == 3
        assert source.read_all().tolist() == [[0, 1, 0], [1, 1, 1], [0, 0, 2], [2, 1, 1]]


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"variables": [{"name": "a", "kind": "word"}]}', "kind 'word' is not one of"),
        ('{"variables": [{"name": "a"}]}', "give its states, bins, cardinality or kind"),
        ('{"variables": [{"name": "a", "kind": "number", "bins": 1}]}', "a count in 2..255"),
        ('{"variables": [{"name": "a", "states": ["x", 1]}]}', "all of one kind"),
        ('{"columns": []}', "not a JSON schema file"),
        ("{", "not a JSON schema file"),
    ],
)
def test_a_bad_schema_file_is_refused_naming_it(tmp_path, text, says):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(SchemaError, match=says) as e:
        read_schema_file(path)
    assert e.value.source == str(path)


def test_csv_and_json_messages_carry_names_booleans_and_numbers():
    schema = Schema(
        [
            Variable("country", states=("DE", "US")),
            Variable("ok", states=(0, 1)),
            Variable("mobile", states=(False, True)),
            Variable("latency", bins=(10.0,)),
        ]
    )
    where = lambda i: {"offset": i}  # noqa: E731
    csv = MessageDecoder("csv", schema)
    rows = csv.decode([b"US,1,true,3.5\n", b"DE,0,false,12", b"US,0,true,10\n"], where, 0)
    assert rows.tolist() == [[1, 1, 1, 0], [0, 0, 0, 1], [1, 0, 1, 1]]
    events = [
        {"country": "US", "ok": 1, "mobile": True, "latency": 3.5},
        {"country": "DE", "ok": 0, "mobile": False, "latency": 12},
        {"country": "US", "ok": 0, "mobile": True, "latency": 10.0},
    ]
    decoder = MessageDecoder("json", schema)
    assert (
        decoder.decode([json.dumps(e).encode() for e in events], where, 0).tolist() == rows.tolist()
    )
    bad = [json.dumps(events[0]).encode(), json.dumps({**events[1], "country": "JP"}).encode()]
    with pytest.raises(SchemaError, match="'JP'") as e:
        decoder.decode(bad, lambda i: {"offset": i}, 40)
    assert e.value.row == 41


def test_a_kind_for_a_column_the_file_lacks_is_refused(events, tmp_path):
    _, csv_path, parquet_path = events
    for path in (csv_path, parquet_path):
        with pytest.raises(SchemaError, match="names 'zip', which is no column") as e:
            open_source(path, kinds={"zip": {"name": "zip", "kind": "category"}})
        assert e.value.source == str(path)


def test_sampled_rows_read_back_as_the_same_states(events, tmp_path):
    _, csv_path, _ = events
    with CsvSource(csv_path, missing=True) as source:
        model = learned(source).to_markov_network()
    rows = np.array([[2, 1, 1, 0], [0, 0, 0, 3], [1, 1, 0, 2]], np.uint8)
    path = tmp_path / "sampled.csv"
    path.write_text(named_csv(rows, model.schema))
    with CsvSource(path, schema=model.schema) as back:
        assert back.read_all().tolist() == rows.tolist()


def test_grafting_learns_from_a_table_too(events):
    columns, csv_path, _ = events
    with CsvSource(csv_path, missing=False, columns=["country", "clicked"]) as source:
        schema = source.schema
        expected = EdgeGrafting(schema, seed=0).fit(source.read_all())
    from_table = EdgeGrafting(schema, seed=0).fit(arrow_table(columns).select(schema.names))
    assert from_table.to_bytes() == expected.to_bytes()


def test_anything_with_the_arrow_stream_interface_is_rows(events):
    """Polars frames, DuckDB results...: here a record batch reader stands in for them."""
    columns, csv_path, _ = events
    with CsvSource(csv_path, missing=True) as source:
        schema, expected = source.schema, source.read_all()
    table = arrow_table(columns)
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=100))
    assert np.array_equal(schema.validate(reader), expected)


def test_river_takes_dict_rows_of_names_booleans_and_numbers():
    from streammn.river import MarkovNetworkAnomalyDetector

    schema = Schema(
        [
            Variable("country", states=("US", "DE", "FR")),
            Variable("mobile", states=(False, True)),
            Variable("latency", bins=(10.0, 50.0)),
        ]
    )
    detector = MarkovNetworkAnomalyDetector(DTSL(schema), batch_size=64)
    rng = np.random.default_rng(0)
    for _ in range(600):  # mobile exactly when the country is US
        country = ["US", "DE", "FR"][rng.integers(3)]
        latency = float(rng.gamma(2.0, 20.0))
        detector.learn_one({"country": country, "mobile": country == "US", "latency": latency})
    usual = {"country": "US", "mobile": True, "latency": 12.5}
    odd = {"country": "US", "mobile": False, "latency": 12.5}
    assert detector.score_one(odd) > detector.score_one(usual)
    with pytest.raises(SchemaError, match="unknown value 'JP' for variable 'country'") as e:
        detector.learn_one({"country": "JP", "mobile": True, "latency": 1.0})
    assert (e.value.row, e.value.column) == (600, 0)
