"""New values mid-stream (issue 19 item 3): a growing schema adds values up to a maximum."""

import numpy as np
import pytest

from streammn.connectors import ArraySource
from streammn import Schema, SchemaError, load_snapshot, read_snapshot
from streammn.demo import planted_network
from streammn.dtsl import DTSL, DTSLError
from streammn.stream.engine import EngineError, StreamLearner
from streammn.inference import sample
from streammn.planted import LogisticBN
from streammn.schema import GrowthUnsupported
from streammn.stream.snapshot import list_snapshots
from streammn.trees.growth import extend_state, first_new_value

NEW_AT = 3000  # row where variable 3 first takes the new value 2


@pytest.fixture(scope="module")
def stream():
    """Rows of a planted binary network; from ``NEW_AT`` on, x3 is 2 where x0 = x1 = 1 (a
    new value with its own dependence), and from ``2 * NEW_AT`` x5 is sometimes 3."""
    planted, _ = planted_network(8, seed=0)
    rows = sample(planted, 9000, seed=1)
    rng = np.random.default_rng(2)
    late = np.arange(rows.shape[0]) >= NEW_AT
    rows[late & (rows[:, 0] == 1) & (rows[:, 1] == 1) & (rng.random(rows.shape[0]) < 0.9), 3] = 2
    rows[(np.arange(rows.shape[0]) >= 2 * NEW_AT) & (rng.random(rows.shape[0]) < 0.05), 5] = 3
    rows[NEW_AT, 3], rows[2 * NEW_AT, 5] = 2, 3
    return planted.schema, rows


def learn(schema, rows, cuts, **params):
    model = DTSL(schema, **params)
    for start in range(0, rows.shape[0], cuts):
        model.partial_fit(rows[start : start + cuts])
    return model


def test_default_schema_is_unchanged():
    schema = Schema.binary(3)
    assert not schema.grows and schema.fixed() is schema and schema.ceiling() is schema
    assert schema.to_dict() == {
        "variables": [{"name": f"x{i}", "cardinality": 2} for i in range(3)]
    }
    with pytest.raises(
        SchemaError,
        match=r"src, row 7, column 1: value 2 out of range 0\.\.1 "
        r"for variable 'x1'",
    ):
        schema.validate(np.array([[0, 2, 1]]), row_offset=7, source="src")


def test_growing_schema_validates_against_its_maxima_and_round_trips():
    schema = Schema.binary(3).with_growth({"x1": 4})
    assert schema.max_cardinalities.tolist() == [2, 4, 2] and schema.version == 0
    assert schema.validate(np.array([[0, 3, 1]])).tolist() == [[0, 3, 1]]
    with pytest.raises(
        SchemaError,
        match=r"f\.data, row 12, column 1: value 4 beyond the 4 "
        r"values variable 'x1' may grow to \(0\.\.3\)",
    ):
        schema.validate(np.array([[0, 4, 1]]), row_offset=12, source="f.data")
    with pytest.raises(SchemaError, match="out of range|beyond"):
        schema.validate(np.array([[0, 1, 2]]))  # x2 cannot grow
    grown = schema.grown_to([2, 3, 2])
    assert grown.cardinalities.tolist() == [2, 3, 2] and grown.version == 1
    assert grown.grown_to([1, 2, 2]) is grown
    assert Schema.from_dict(grown.to_dict()) == grown != schema
    assert grown.same_stream(schema) and not grown.same_stream(Schema.binary(3))
    assert grown.fixed() == Schema.from_cardinalities([2, 3, 2])
    assert grown.ceiling() == Schema.from_cardinalities([2, 4, 2])
    with pytest.raises(SchemaError, match="maximum cardinality"):
        Schema.from_cardinalities([3, 2]).with_growth(2)


def test_first_new_value_finds_the_row():
    schema = Schema.from_cardinalities([2, 2]).with_growth(5).with_missing()
    rows = np.array([[1, 1], [0, 255], [1, 3], [4, 1]], dtype=np.uint8)
    row, cards = first_new_value(schema, rows)
    assert row == 2 and cards.tolist() == [2, 4]
    assert first_new_value(schema, rows[:2])[0] is None


def test_extension_equals_a_learner_declared_with_the_values(stream):
    """Grown at a row, the state is the one a learner declared with the grown cardinalities
    has after the same rows (zero counts for the new value, indicator columns inserted in the
    kernels' layout), under settings where the declared cardinality of the grown variable
    does not change what is learned before: fixed kappa, budget and no replay, and a
    variable that already had 3 values (growing a binary one makes ``X = 0`` a test distinct
    from ``X = 1``, so a tie between them may go the other way)."""
    schema, rows = stream
    rows = rows[NEW_AT : 2 * NEW_AT].copy()  # x3 in 0..2
    at = 1500
    rows[at:][
        (rows[at:, 2] == 1) & (np.random.default_rng(3).random(rows.shape[0] - at) < 0.3), 3
    ] = 3
    rows[at, 3] = 3
    # trees (a growing schema's cpd='auto' keeps them; a declared one would fit regressions)
    params = dict(kappa=0.01, grace_period=100, max_leaves=64, replay_rows=0, cpd="tree")
    cards = [2, 2, 2, 3, 2, 2, 2, 2]
    grown = DTSL(Schema.from_cardinalities(cards).with_growth({"x3": 4}), **params)
    grown.partial_fit(rows[: at + 1])
    cards[3] = 4
    declared = DTSL(Schema.from_cardinalities(cards), **params).partial_fit(rows[: at + 1])
    (meta_a, a), (meta_b, b) = grown.get_state(), declared.get_state()
    assert (
        meta_a["schema"]["version"] == 1
        and meta_a["schema"]["variables"] == meta_b["schema"]["variables"]
    )
    assert a.keys() == b.keys() and grown.forest.n_nodes > 2 * schema.n_vars
    for key in a:
        assert np.array_equal(a[key], b[key]), key
    assert grown.partial_fit(rows[at + 1 :]).forest.equals(
        declared.partial_fit(rows[at + 1 :]).forest
    )


def test_extend_state_inserts_zero_indicators():
    old = Schema.from_cardinalities([2, 3, 2]).with_growth(4)
    new = old.grown_to([2, 4, 3])
    stats = np.arange(2 * 3 * 4).reshape(2, 3, 4)  # columns x0=1 | x1=1, x1=2 | x2=1
    out = extend_state({"slot_stats": stats, "node_counts": np.ones((5, 3))}, old, new)
    assert out["slot_stats"].shape == (2, 4, 6) and out["node_counts"].shape == (5, 4)
    assert np.array_equal(out["slot_stats"][:, :3, [0, 1, 2, 4]], stats)
    assert not out["slot_stats"][:, :, [3, 5]].any() and not out["slot_stats"][:, 3].any()


@pytest.mark.parametrize(
    "params",
    [{}, {"drift": "page-hinkley"}, {"half_life": 4000}],
    ids=["default", "drift", "decay"],
)
def test_batch_cuts_and_resume_do_not_change_the_model(stream, params):
    schema, rows = stream
    growing = schema.with_growth(4)
    one = learn(growing, rows, 1000, **params)
    assert one.schema.cardinalities.tolist() == [2, 2, 2, 3, 2, 4, 2, 2]
    assert one.schema.version == 2
    assert learn(growing, rows, 777, **params).equals(one)
    first = learn(growing, rows[:4500], 1500, **params)  # after the first growth
    resumed = DTSL.from_bytes(first.to_bytes())
    assert resumed.schema == first.schema and resumed.schema.version == 1
    assert resumed.partial_fit(rows[4500:]).equals(one)


def test_new_value_is_learned_and_scored(stream):
    schema, rows = stream
    model = DTSL(schema.with_growth({"x3": 3, "x5": 4})).partial_fit(rows[:NEW_AT])
    before = rows[NEW_AT : NEW_AT + 1]
    term = model.pll_terms(before)[0, 3]  # not added yet: the leaf's prior share
    leaf = model.forest.route(before)[0, 3]
    n = model.forest.counts[leaf].sum()
    assert term == pytest.approx(np.log((model.prior / 3) / (n + model.prior)))
    model.partial_fit(rows[NEW_AT:])
    assert model.schema.cardinalities[3] == 3 and model.schema.cardinalities[5] == 4
    # x3's tree learned where the new value lives: it predicts 2 when x0 = x1 = 1
    test = rows[-1000:]
    p_seen = np.exp(model.pll_terms(test)[:, 3])
    assert p_seen[test[:, 3] == 2].mean() > 2 * (test[:, 3] == 2).mean()
    # the snapshot model has the grown cardinalities and scores as well as a learner that
    # was declared with them from the start
    mn = model.to_markov_network()
    assert mn.schema == Schema.from_cardinalities([2, 2, 2, 3, 2, 4, 2, 2]) and not mn.schema.grows
    declared = DTSL(Schema.from_cardinalities([2, 2, 2, 3, 2, 4, 2, 2])).partial_fit(rows)
    assert mn.pll(test) == pytest.approx(declared.to_markov_network().pll(test), rel=0.02)


def test_other_learners_and_exact_mode_refuse_growth():
    from streammn.csgs import CSGS
    from streammn.et import EnsembleOfTrees
    from streammn.grafting import EdgeGrafting

    schema = Schema.binary(4).with_growth(3)
    for make in (CSGS, EnsembleOfTrees, EdgeGrafting):
        with pytest.raises(GrowthUnsupported, match="--grow-values"):
            make(schema)
    with pytest.raises(DTSLError, match="hoeffding"):
        DTSL(schema, mode="exact")


def test_engine_snapshots_record_the_version_and_resume(stream, tmp_path):
    schema, rows = stream
    rows = rows[:6000]
    growing = schema.with_growth(4)

    def engine(out, n):
        source = ArraySource(rows[:n], schema=growing, batch_size=500)
        return StreamLearner(
            source,
            DTSL(growing, grace_period=100),
            tmp_path / out,
            every_rows=2000,
            progress=None,
            validation=rows[-500:],
        )

    whole = engine("whole", 6000)
    whole.run()
    manifests = [read_snapshot(p).manifest for p in list_snapshots(tmp_path / "whole")]
    assert [m["schema"]["version"] for m in manifests] == [0, 1, 1]
    assert [m["schema"]["cardinalities"][3] for m in manifests] == [2, 3, 3]
    assert all(m["scores"]["validation_pll"] is not None for m in manifests)
    first_mn = load_snapshot(list_snapshots(tmp_path / "whole")[0])
    assert first_mn.schema.cardinalities[3] == 2  # the values learned so far
    assert load_snapshot(tmp_path / "whole").schema.cardinalities[3] == 3
    first = engine("cut", 3500)
    first.run()
    again = engine("cut", 6000)
    assert again.resume() and again.learner.schema.version == 1
    again.run()
    assert again.learner.to_bytes() == whole.learner.to_bytes()
    other = StreamLearner(
        ArraySource(rows, schema=schema.with_growth(5), batch_size=500),
        DTSL(schema.with_growth(5), grace_period=100),
        tmp_path / "cut",
        progress=None,
    )
    with pytest.raises(EngineError, match="schema"):
        other.resume()


def test_growth_mode_without_new_values_changes_nothing(stream):
    schema, rows = stream
    plain = learn(schema, rows[:NEW_AT], 1000)
    growing = learn(schema.with_growth(4), rows[:NEW_AT], 1000)
    assert growing.schema.version == 0 and growing.forest.equals(plain.forest)
    assert np.array_equal(growing.pll_terms(rows[:500]), plain.pll_terms(rows[:500]))


def test_parquet_source_reads_new_values_up_to_the_maximum(tmp_path):
    from streammn.connectors import ParquetSource, write_parquet

    rows = np.array([[0, 1], [1, 2], [1, 0], [0, 3]], dtype=np.uint8)
    write_parquet(tmp_path / "r.parquet", rows, Schema.from_cardinalities([2, 4]))
    growing = Schema.binary(2).with_growth({"x1": 4})
    assert (
        ParquetSource(tmp_path / "r.parquet", schema=growing).read_all().tolist() == rows.tolist()
    )
    capped = Schema.binary(2).with_growth({"x1": 3})
    with pytest.raises(
        SchemaError,
        match=r"r\.parquet, row 3, column 1: value 3 beyond the 3 "
        r"values variable 'x1' may grow to",
    ):
        ParquetSource(tmp_path / "r.parquet", schema=capped).read_all()


def test_growth_with_missing_values(stream):
    schema, rows = stream
    holed = rows.copy()
    holed[np.random.default_rng(6).random(rows.shape) < 0.1] = 255
    growing = schema.with_missing().with_growth(4)
    one = learn(growing, holed, 1000)
    assert one.schema.cardinalities.tolist() == [2, 2, 2, 3, 2, 4, 2, 2]
    assert one.forest.observed.shape[1] == 4
    assert learn(growing, holed, 777).equals(one)
    first = learn(growing, holed[:4500], 1500)
    assert DTSL.from_bytes(first.to_bytes()).partial_fit(holed[4500:]).equals(one)


@pytest.mark.parametrize("mode", ["exact", "hoeffding"])
def test_missing_values_in_a_multivalued_variable_end_growth(stream, mode):
    """Missing mode once offered ``X_j = 0`` for a variable of more than two values, whose
    derived true side counts the missing rows that routing sends to the false side: the false
    child then showed the same gain and split on the same test again, level after level
    (exact growth never ended). No path may test a value twice."""
    _, rows = stream
    holed = rows.copy()
    holed[np.random.default_rng(6).random(rows.shape) < 0.1] = 255
    cards = Schema.from_cardinalities([2, 2, 2, 3, 2, 4, 2, 2]).with_missing()
    model = DTSL(cards, mode=mode).fit(holed)
    f = model.forest
    for leaf in f.leaves():
        tests = [(v, a) for v, a, _ in f.path(int(leaf))]
        assert len(tests) == len(set(tests))


def test_a_value_first_seen_at_row_500k_is_learned_and_scored():
    """The issue's scale: a 600k-row stream in which x2 first takes a new value at row
    500,000 (where x0 = 1, with probability 0.8). The grown learner gives the new value its
    share of the stream where it lives (counts do not forget: 0.8 of the last sixth of the
    rows), as a learner declared with the value from the start does, and scores as well."""
    bn = LogisticBN(6, seed=3, weight_low=1.0, weight_high=2.0)
    rows = bn.sample(600_000, np.random.default_rng(4))
    late = np.arange(rows.shape[0]) >= 500_000
    rows[late & (rows[:, 0] == 1) & (np.random.default_rng(5).random(rows.shape[0]) < 0.8), 2] = 2
    assert (rows[:500_000, 2] < 2).all() and rows[500_000:, 2].max() == 2
    grown = DTSL(Schema.binary(6).with_growth({"x2": 3}))
    for start in range(0, rows.shape[0], 100_000):
        grown.partial_fit(rows[start : start + 100_000])
    assert grown.schema.cardinalities.tolist() == [2, 2, 3, 2, 2, 2]
    assert grown.schema.version == 1
    test = rows[-20_000:]
    where = test[:, 0] == 1
    new = where & (test[:, 2] == 2)
    p_new = np.exp(grown.pll_terms(test)[new, 2]).mean()
    share = (rows[:, 2] == 2).sum() / (rows[:, 0] == 1).sum()
    assert p_new == pytest.approx(share, rel=0.25)
    declared = DTSL(Schema.from_cardinalities([2, 2, 3, 2, 2, 2])).partial_fit(rows)
    assert p_new == pytest.approx(np.exp(declared.pll_terms(test)[new, 2]).mean(), rel=0.05)
    # the trees differ a little (before row 500k the grown learner tests x2 = 1 where the
    # declared one tests the equivalent x2 = 0), and score the late rows alike
    assert grown.pll_terms(test).sum(axis=1).mean() == pytest.approx(
        declared.pll_terms(test).sum(axis=1).mean(), rel=0.02
    )
    mn = grown.to_markov_network()
    assert mn.schema.cardinalities.tolist() == [2, 2, 3, 2, 2, 2]
    assert np.isfinite(mn.pll(test[new]))
