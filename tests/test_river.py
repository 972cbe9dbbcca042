"""streammn.river: river's own estimator checks, pipelines, evaluation, row errors, and the
estimators built with no argument (schema from the first rows, warm-up)."""

import importlib.util

import numpy as np
import pytest
from river import compose, evaluate, metrics
from river.checks import anomaly as anomaly_checks
from river.checks import common as common_checks
from river.checks import yield_checks

from streammn.demo import planted_network
from streammn.dtsl import DTSL
from streammn.grafting import EdgeGrafting
from streammn.inference import sample
from streammn.river import (
    WARM_UP_ROWS,
    MarkovNetworkAnomalyDetector,
    MarkovNetworkLearner,
    RiverRowError,
)
from streammn.errors import SettingsError
from streammn.schema import SchemaError

# river's dataset checks run on this discrete stream instead of river's datasets (the anomaly
# detectors' is a download); the estimators' _unit_test_skips name those that do not apply
# (streammn.river.NOT_APPLICABLE; learn_many against learn_one is tested below). River's own
# check_estimator runs as it is on the transformer, over river's TrumpApproval.
DATASET_CHECKS = {
    "check_learn_one",
    "check_pickling",
    "check_shuffle_features_no_impact",
    "check_predict_one_pure",
    "check_predict_one_before_any_learn",
    "check_no_state_aliasing_with_input",
    "check_clone_is_independent",
    "check_roc_auc",
    "check_transform_one",
    "check_transform_many_matches_transform_one",
}
NEEDS = {"check_roc_auc": "sklearn", "check_transform_many_matches_transform_one": "pandas"}


@pytest.fixture(scope="module")
def stream():
    """(row dict, is_anomaly) pairs: a planted network's rows, 5% replaced by random bits."""
    planted, _ = planted_network(8, seed=1, coupling=2.0)
    rows = sample(planted, 1200, seed=2)
    rng = np.random.default_rng(3)
    odd = rng.random(len(rows)) < 0.05
    rows[odd] = rng.integers(0, 2, (odd.sum(), 8))
    names = planted.schema.names
    return planted.schema, [(dict(zip(names, r.tolist())), bool(y)) for r, y in zip(rows, odd)]


def river_checks(model):
    """river's checks for ``model``: (name, function, whether it takes a dataset). river makes
    its numeric datasets with scikit-learn; without it (as on CI) the dataset checks are taken
    from river's check modules by name."""
    try:
        for check in yield_checks(model):
            yield (
                check.__name__,
                getattr(check, "func", check),
                "dataset" in getattr(check, "keywords", {}),
            )
    except ImportError:
        for name in sorted(DATASET_CHECKS):
            yield name, getattr(common_checks, name, None) or getattr(anomaly_checks, name), True


@pytest.mark.parametrize("learner", ["none", "tree", "auto"])
@pytest.mark.parametrize("estimator", [MarkovNetworkLearner, MarkovNetworkAnomalyDetector])
def test_river_checks(estimator, learner, stream):
    schema, data = stream
    if learner == "none":  # built with no argument: DTSL(), its schema from the first rows
        model = estimator()
    else:
        model = estimator(DTSL(schema, kappa=0.01, cpd=learner), batch_size=100)
    ran = set()
    for name, check, takes_dataset in river_checks(model):
        if name in ran or name in model._unit_test_skips():
            continue
        if takes_dataset:
            assert name in DATASET_CHECKS, f"river has a new check {name}: decide if it applies"
            if name in NEEDS and importlib.util.find_spec(NEEDS[name]) is None:
                continue  # CI installs neither scikit-learn nor pandas
            check(model.clone(), dataset=data)
        else:
            check(model.clone())
        ran.add(name)
    assert {
        "check_get_params_matches_signature",
        "check_learn_one",
        "check_clone_is_independent",
    } <= ran


def test_learn_one_equals_learn_many_and_one_batch(stream):
    """The buffer size does not change the model (learners are batch-cut independent)."""
    schema, data = stream
    rows = np.array([[x[n] for n in schema.names] for x, _ in data], dtype=np.uint8)
    by_row = MarkovNetworkLearner(DTSL(schema, kappa=0.01), batch_size=97)
    for x, _ in data:
        by_row.learn_one(x)
    at_once = DTSL(schema, kappa=0.01).partial_fit(rows)
    assert by_row.to_markov_network().features.equals(at_once.to_markov_network().features)
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(rows[:, ::-1], columns=schema.names[::-1])  # columns by name
    by_frame = MarkovNetworkLearner(DTSL(schema, kappa=0.01))
    by_frame.learn_many(frame.iloc[:500])
    by_frame.learn_many(frame.iloc[500:])
    assert by_frame.to_markov_network().features.equals(at_once.to_markov_network().features)
    out = by_frame.transform_many(frame.iloc[:5])
    np.testing.assert_allclose(out.to_numpy(), at_once.pll_terms(rows[:5]))
    assert list(out.columns) == schema.names


def rank_auc(scores, labels) -> float:
    """P(an anomaly scores above a normal row), ties counted half (Mann-Whitney)."""
    scores, labels = np.asarray(scores), np.asarray(labels)
    pos, neg = scores[labels], scores[~labels]
    return float(
        ((pos[:, None] > neg).sum() + 0.5 * (pos[:, None] == neg).sum()) / (pos.size * neg.size)
    )


def test_detector_in_a_pipeline_with_evaluate(stream):
    """Inside a river pipeline and progressive validation, with any learner: anomalies rank
    above normal rows once a batch is learned, and the calibrated score is a rank in [0, 1]."""
    schema, data = stream
    for learner in (
        DTSL(schema, kappa=0.01, grace_period=50, delta=1e-3),  # a short stream
        EdgeGrafting(schema, update_every=200, steps_per_update=2, max_iter=20),
    ):
        detector = MarkovNetworkAnomalyDetector(learner, batch_size=200)
        pipeline = compose.Select(*schema.names) | detector
        with_noise = [({**x, "ignored": 7}, y) for x, y in data]
        auc = evaluate.progressive_val_score(with_noise, pipeline, metrics.ROCAUC()).get()
        assert auc > 0.6, (learner, auc)  # the first batch scores 0 (no model yet)
        detector = MarkovNetworkAnomalyDetector(learner, batch_size=200)
        scores = []
        for x, _ in data:
            scores.append(detector.score_one(x))
            detector.learn_one(x)
        assert 0.0 <= min(scores) and max(scores) <= 1.0
        assert rank_auc(scores[200:], [y for _, y in data[200:]]) > 0.8, learner
        raw = MarkovNetworkAnomalyDetector(learner, batch_size=200, calibrate=False)
        for x, _ in data[:400]:
            raw.learn_one(x)
        rows = np.array([[data[0][0][n] for n in schema.names]], dtype=np.uint8)
        expected = -raw.rows_.learner_.pll_terms(rows).sum()  # 400 rows: two whole batches
        assert raw.score_one(data[0][0]) == pytest.approx(expected)


def test_rows_that_do_not_fit_name_the_place(stream):
    schema, data = stream
    model = MarkovNetworkLearner(DTSL(schema), batch_size=10)
    for x, _ in data[:3]:
        model.learn_one(x)
    with pytest.raises(RiverRowError, match="row 3: feature 'x2'"):
        model.learn_one({k: v for k, v in data[0][0].items() if k != "x2"})
    with pytest.raises(SchemaError, match="row 3"):
        model.learn_one({**data[0][0], "x5": 2})
    assert model.n_rows_learned_ == 0 and model._n_buffered == 3
    with pytest.raises(SettingsError, match="structure learner"):
        MarkovNetworkLearner(object())
    pd = pytest.importorskip("pandas")
    with pytest.raises(RiverRowError, match=r"lacks the schema's columns \['x7'\]"):
        model.learn_many(pd.DataFrame({n: [0] for n in schema.names[:7]}))


def test_rows_of_names_booleans_and_numbers_learn_as_their_states():
    """river rows speak the schema's names: a row of words, booleans and numbers learns what
    the same row as state numbers learns, and an unknown name is a located error."""
    from streammn.schema import Schema, Variable

    schema = Schema(
        [
            Variable("country", states=("DE", "FR", "US")),
            Variable("clicked", states=(False, True)),
            Variable("latency", bins=(10.0, 50.0)),
        ]
    )
    rng = np.random.default_rng(0)
    states = rng.integers(0, [3, 2, 3], size=(600, 3))
    states[:, 1] = (states[:, 0] == 2) | (rng.random(600) < 0.1)  # US visitors click
    middles = (5.0, 30.0, 80.0)
    named = MarkovNetworkLearner(DTSL(schema), batch_size=200)
    numbered = MarkovNetworkLearner(
        DTSL(Schema.from_cardinalities([3, 2, 3], schema.names)), batch_size=200
    )
    for country, clicked, latency in states.tolist():
        named.learn_one(
            {
                "country": schema[0].states[country],
                "clicked": bool(clicked),
                "latency": middles[latency],
            }
        )
        numbered.learn_one({"country": country, "clicked": clicked, "latency": latency})
    np.testing.assert_array_equal(named.learner_.forest.counts, numbered.learner_.forest.counts)
    row = {"country": "US", "clicked": True, "latency": 30.0}
    got = named.transform_one(row)
    want = numbered.transform_one({"country": 2, "clicked": 1, "latency": 1})
    assert list(got) == schema.names and np.allclose(list(got.values()), list(want.values()))
    with pytest.raises(SchemaError, match="row 600, column 0: unknown value 'BR'"):
        named.learn_one({**row, "country": "BR"})


def test_rivers_check_estimator_on_rivers_own_data():
    """river's check_estimator as it is: the transformer built with no argument learns
    river's TrumpApproval (numbers: bins read from the first rows)."""
    pytest.importorskip("sklearn")  # river makes its datasets' list with scikit-learn
    from river.checks import check_estimator

    for params in MarkovNetworkLearner._unit_test_params():
        check_estimator(MarkovNetworkLearner(**params))
    assert list(MarkovNetworkAnomalyDetector._unit_test_params())[0] == {}


def test_scores_start_after_the_warm_up_and_batches_double(stream):
    """The first batch is learned at row 32 and the next ones when the rows double, up to
    batch_size; the model is the one a single batch of the same rows gives."""
    schema, data = stream
    detector = MarkovNetworkAnomalyDetector(DTSL(schema, kappa=0.01), batch_size=100)
    scores, learned = [], []
    for x, _ in data[:400]:
        scores.append(detector.score_one(x))
        detector.learn_one(x)
        learned.append(detector.rows_.n_rows_learned_)
    assert scores[:WARM_UP_ROWS] == [0.0] * WARM_UP_ROWS and scores[WARM_UP_ROWS] > 0
    assert sorted(set(learned)) == [0, 32, 64, 128, 228, 328]
    rows = np.array([[x[n] for n in schema.names] for x, _ in data[:328]], dtype=np.uint8)
    at_once = DTSL(schema, kappa=0.01).partial_fit(rows)
    assert detector.rows_.learner_.to_markov_network().features.equals(
        at_once.to_markov_network().features
    )


def test_built_with_no_argument_the_first_rows_give_the_schema():
    """Words, booleans and numbers from dict rows: a variable per feature of the first row, in
    the order of the names; later words become new states; rows must keep the features."""
    rng = np.random.default_rng(4)
    rows = [
        {
            "latency": float(rng.gamma(2.0, 20.0)),
            "country": str(rng.choice(["DE", "FR", "US"])),
            "clicked": bool(rng.random() < 0.3),
            "hour": int(rng.integers(0, 24)),
        }
        for _ in range(300)
    ]
    for x in rows[:40]:
        x["country"] = "US"  # one word in the first rows is a name too
    rows[200]["country"] = "BR"
    model = MarkovNetworkLearner(batch_size=64)
    assert model.transform_one(rows[0]) == dict.fromkeys(rows[0], 0.0)  # no model yet
    for x in rows:
        model.learn_one(x)
    schema = model.learner_.schema
    assert schema.names == ["clicked", "country", "hour", "latency"] == model.names
    assert schema["clicked"].states == (False, True) and schema["latency"].bins is not None
    assert schema["country"].states[0] == "US" and schema["country"].states[-1] == "BR"
    assert sorted(schema["country"].states) == ["BR", "DE", "FR", "US"]  # grown by name
    assert schema.grows and schema["hour"].cardinality <= 24
    out = model.transform_one({**rows[0], "country": "BR"})
    assert list(out) == schema.names and all(v < 0 for v in out.values())
    with pytest.raises(RiverRowError, match="row 300: feature 'hour' of the schema is missing"):
        model.learn_one({k: v for k, v in rows[0].items() if k != "hour"})
    with pytest.raises(RiverRowError, match="row 1: feature 'b' of the first row is missing"):
        fresh = MarkovNetworkLearner()
        fresh.learn_one({"a": 1, "b": 0})
        fresh.learn_one({"a": 1})
        fresh.flush()
