"""Missing mode (issue 19 item 4): nulls are learned from when the schema opts in."""

import numpy as np
import pytest

from streammn.demo import planted_network
from streammn.dtsl import DTSL
from streammn.inference import sample
from streammn.schema import MISSING, Schema, SchemaError


@pytest.fixture(scope="module")
def data():
    planted, _ = planted_network(10, seed=0)
    rows = sample(planted, 16000, seed=1)
    holed = rows.astype(float)
    holed[np.random.default_rng(5).random(rows.shape) < 0.2] = np.nan
    return planted.schema, rows[:12000], holed[:12000], rows[12000:]


def test_default_rejects_null_with_the_same_error():
    schema = Schema.binary(3)
    with pytest.raises(SchemaError, match=r"row 7, column 1: null value for variable 'x1'"):
        schema.validate(np.array([[0, np.nan, 1]]), row_offset=7)
    with pytest.raises(SchemaError, match="out of range"):
        schema.validate(np.array([[0, 255, 1]]))


def test_missing_mode_maps_nulls_and_round_trips():
    schema = Schema.binary(3).with_missing()
    out = schema.validate(np.array([[0, np.nan, 1], [1, 1, 0]]))
    assert out.tolist() == [[0, MISSING, 1], [1, 1, 0]]
    out = schema.validate(np.array([[None, 1, 0]], dtype=object))
    assert out.tolist() == [[MISSING, 1, 0]]
    with pytest.raises(SchemaError, match="out of range"):
        schema.validate(np.array([[0, 2, 1]]))
    assert Schema.from_dict(schema.to_dict()) == schema != Schema.binary(3)
    assert "missing" not in Schema.binary(3).to_dict()


@pytest.mark.parametrize("mode", ["hoeffding", "exact"])
def test_complete_rows_give_the_default_trees(data, mode):
    schema, rows, _, _ = data
    a = DTSL(schema, mode=mode).fit(rows)
    b = DTSL(schema.with_missing(), mode=mode).fit(rows)
    sa, sb = a.forest.get_state(), b.forest.get_state()
    assert all(np.array_equal(sa[k], sb[k]) for k in sa)


def test_trees_count_only_observed_targets(data):
    schema, _, holed, _ = data
    sm = schema.with_missing()
    rows = sm.validate(holed)
    model = DTSL(sm, mode="exact", max_depth=0).fit(rows)
    f = model.forest
    for t in range(schema.n_vars):
        observed = rows[rows[:, t] != MISSING, t]
        assert f.counts[f.roots[t]].tolist() == np.bincount(observed, minlength=2).tolist()
    assert f.observed[f.roots].tolist() == f.counts[f.roots].tolist()
    assert model.rows_seen == max(int((rows[:, t] != MISSING).sum()) for t in range(10))


@pytest.mark.parametrize("mode", ["hoeffding", "exact"])
def test_twenty_percent_missing_stays_close(data, mode):
    schema, rows, holed, test = data
    sm = schema.with_missing()
    full = DTSL(schema, mode=mode).fit(rows).to_dependency_network().pll(test)
    dn = DTSL(sm, mode=mode).fit(sm.validate(holed)).to_dependency_network()
    gap = (full - dn.pll(test)) / abs(full)
    assert gap < 0.02, gap  # measured 0.4% (issue 19 target: within 2%)
    terms = dn.pll_terms(sm.validate(holed[:50]))
    assert np.all(terms[np.isnan(holed[:50])] == 0.0)  # missing targets are skipped


def test_resume_identity_with_missing_values(data):
    schema, _, holed, _ = data
    sm = schema.with_missing()
    rows = sm.validate(holed[:6000])
    straight = DTSL(sm).partial_fit(rows)
    first = DTSL(sm).partial_fit(rows[:2500])
    resumed = DTSL.from_bytes(first.to_bytes()).partial_fit(rows[2500:])
    assert resumed.equals(straight)


def _csv(tmp_path, text):
    path = tmp_path / "rows.csv"
    path.write_text(text)
    return str(path)


def test_csv_empty_cells_and_token(tmp_path):
    from streammn.connectors.csv import CsvSource

    path = _csv(tmp_path, "a,b\n1,0\n,1\n0,\n")
    with pytest.raises(SchemaError, match="row 1, column 0: null value for variable 'a'"):
        CsvSource(path, schema=Schema.from_cardinalities([2, 2], ["a", "b"])).read_all()
    source = CsvSource(path, missing=True)
    assert source.schema.missing and source.read_all().tolist() == [
        [1, 0],
        [MISSING, 1],
        [0, MISSING],
    ]
    path = _csv(tmp_path, "a,b\n1,0\n?,1\n")
    assert CsvSource(path, missing_token="?").read_all().tolist() == [[1, 0], [MISSING, 1]]


def test_parquet_nulls(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    from streammn.connectors.parquet import ParquetSource

    path = str(tmp_path / "rows.parquet")
    pq.write_table(
        pa.table(
            {"a": pa.array([1, None, 0], pa.int64()), "b": pa.array([0, 1, None], pa.int64())}
        ),
        path,
    )
    schema = Schema.from_cardinalities([2, 2], ["a", "b"])
    with pytest.raises(SchemaError, match="row 1, column 0: null value for variable 'a'"):
        ParquetSource(path, schema=schema).read_all()
    rows = ParquetSource(path, schema=schema, missing=True).read_all()
    assert rows.tolist() == [[1, 0], [MISSING, 1], [0, MISSING]]


@pytest.mark.parametrize("make", ["grafting", "et", "csgs"])
def test_other_learners_refuse_missing_mode(make):
    from streammn.csgs import CSGS
    from streammn.et import EnsembleOfTrees
    from streammn.errors import SettingsError
    from streammn.grafting import EdgeGrafting

    cls = {"grafting": EdgeGrafting, "et": EnsembleOfTrees, "csgs": CSGS}[make]
    with pytest.raises(SettingsError, match=f"{make} cannot learn from missing values"):
        cls(Schema.binary(3).with_missing())


def test_markov_network_scores_complete_rows_only(data):
    schema, rows, holed, test = data
    sm = schema.with_missing()
    mn = DTSL(sm, mode="exact").fit(sm.validate(holed)).to_markov_network()
    assert np.isfinite(mn.pll(test))
    with pytest.raises(SchemaError, match="missing value"):
        mn.pll(sm.validate(holed[:20]))
