"""Learners built without a schema (issue 38): ``fit`` infers it from all of its data,
``partial_fit`` from the first batch and then grows where the learner can add values; where a
schema is truly needed the error says so. (Round trips and the model for every learner:
``tests/test_conformance.py``.)"""

import numpy as np
import pyarrow as pa
import pytest

from streammn.connectors import ArraySource, open_source
from streammn.csgs import CSGS
from streammn.dtsl import DTSL
from streammn.errors import EngineError, NotFittedError, SettingsError
from streammn.et import EnsembleOfTrees
from streammn.grafting import EdgeGrafting
from streammn.schema import Schema, SchemaError
from streammn.schema.inference import infer_schema
from streammn.stream.engine import StreamLearner

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def frame():
    """12,000 rows of a country, a click and a latency; Brazil first appears at row 11,000,
    past the 10,000 rows a file's inference reads."""
    rng = np.random.default_rng(0)
    n = 12_000
    country = rng.choice(["DE", "FR", "US"], n)
    country[11_000:11_050] = "BR"
    clicked = (country == "US") | (rng.random(n) < 0.1)
    latency = np.round(rng.gamma(2.0, 20.0, n), 1)
    return pd.DataFrame({"country": country, "clicked": clicked, "latency": latency})


def test_fit_infers_from_all_rows_of_a_frame(frame):
    learner = DTSL(kappa=0.01).fit(frame)
    schema = learner.schema
    assert schema.names == ["country", "clicked", "latency"]
    assert schema["country"].states == ("BR", "DE", "FR", "US")  # seen after row 10,000
    assert schema["clicked"].states == (False, True) and schema["latency"].bins is not None
    assert schema == infer_schema(pa.Table.from_pandas(frame), first_rows=None)
    declared = DTSL(schema, kappa=0.01).fit(frame)
    assert learner.to_markov_network().features.equals(declared.to_markov_network().features)
    assert learner.score(frame) == declared.score(frame)
    assert learner.get_params()["schema"] is None


def test_a_column_of_one_word_is_a_name_in_memory_not_in_a_file(tmp_path):
    """In a frame a column's values are typed: one word is a state name (a constant), where a
    file's single word may be a stray cell in a column of states (refused where it is)."""
    frame = pd.DataFrame({"country": ["US"] * 40, "x": [0, 1] * 20})
    assert DTSL().fit(frame).schema["country"].states == ("US",)
    path = tmp_path / "one.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(SchemaError, match="'US'"):
        open_source(str(path)).read_all()


def test_each_fit_infers_anew_and_partial_fit_continues():
    learner = DTSL(kappa=0.01)
    learner.fit(np.zeros((50, 3), dtype=np.uint8))
    assert learner.schema == Schema.binary(3)
    rows = np.random.default_rng(1).integers(0, 4, (300, 5))
    assert learner.fit(rows).schema == Schema.from_cardinalities([4] * 5)
    learner.partial_fit(rows[:10])  # continues over the schema fit took: fixed, no growth
    with pytest.raises(SchemaError, match="value 4 out of range"):
        learner.partial_fit(np.full((1, 5), 4))
    assert learner.rows_seen == 310


def test_partial_fit_grows_by_value_and_by_name():
    learner = DTSL(kappa=0.01, grace_period=50)
    rng = np.random.default_rng(2)
    learner.partial_fit(rng.integers(0, 2, (200, 4)))
    assert learner.schema.grows and learner.schema.cardinalities.tolist() == [2, 2, 2, 2]
    assert learner.schema.max_cardinalities.tolist() == [255] * 4
    later = rng.integers(0, 2, (200, 4))
    later[50, 2] = 6  # a new value: states 2..6 of x2 appear
    learner.partial_fit(later)
    assert learner.schema.cardinalities.tolist() == [2, 2, 7, 2] and learner.rows_seen == 400
    with pytest.raises(SchemaError, match="255"):
        learner.partial_fit(np.array([[0, 0, 255, 0]]))

    named = DTSL(kappa=0.01)
    named.partial_fit(pd.DataFrame({"country": ["DE", "US"], "clicked": [True, False]}))
    named.partial_fit(pd.DataFrame({"country": ["BR"], "clicked": [True]}))
    assert named.schema["country"].states == ("DE", "US", "BR")  # new names numbered after
    assert named.schema["clicked"].states == (False, True)  # booleans never grow
    terms = named.pll_terms(pd.DataFrame({"country": ["BR"], "clicked": [False]}))
    assert terms.shape == (1, 2) and np.isfinite(terms).all()


@pytest.mark.parametrize("cls", [EdgeGrafting, CSGS, EnsembleOfTrees])
def test_learners_that_cannot_add_values_keep_the_first_batchs_schema(cls):
    learner = cls()
    assert not learner.adds_values
    learner.partial_fit(np.zeros((20, 3), dtype=np.uint8))
    assert learner.schema == Schema.binary(3)
    with pytest.raises(SchemaError, match="row 20, column 1: value 2 out of range"):
        learner.partial_fit(np.array([[0, 2, 0]]))


def test_regressions_keep_a_fixed_schema():
    learner = DTSL(cpd="lr")
    assert not learner.adds_values
    learner.partial_fit(np.random.default_rng(3).integers(0, 2, (100, 3)))
    assert not learner.schema.grows
    assert DTSL(cpd="auto").partial_fit(np.zeros((5, 3), dtype=np.uint8)).schema.grows


def test_where_a_schema_is_needed_the_error_says_so(tmp_path):
    with pytest.raises(EngineError, match=r"no schema: .*DTSL\(source.schema"):
        StreamLearner(ArraySource(np.zeros((10, 2), dtype=np.uint8)), DTSL(), tmp_path / "o")
    batches = (np.zeros((5, 2), dtype=np.uint8) for _ in range(2))
    with pytest.raises(SettingsError, match="takes it from rows in memory .* partial_fit"):
        DTSL().fit(batches)
    with pytest.raises(NotFittedError, match="DTSL has no schema yet"):
        DTSL().to_markov_network()
    with pytest.raises(SettingsError, match="schema must be a streammn Schema"):
        DTSL([2, 2])
    source = ArraySource(np.eye(4, dtype=np.uint8))  # a source brings its own schema
    assert EdgeGrafting().fit(source).schema is source.schema
    assert DTSL().set_params(schema=source.schema).schema is source.schema
