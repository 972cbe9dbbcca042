"""Every public entry that takes raw rows refuses a bad value with a located SchemaError, and a
Batch its source validated is trusted (validated once, by the source, on the learning path)."""

import numpy as np
import pytest

from streammn.connectors import ArraySource
from streammn.connectors.base import Batch
from helpers.helpers_mn import random_featureset
from streammn.dtsl import DTSL
from streammn.stream.engine import StreamLearner
from streammn.grafting import EdgeGrafting
from streammn.inference import cmll_terms, gibbs_marginals, pll_terms
from streammn.network.model import MarkovNetwork
from streammn.schema import Schema, SchemaError
from streammn.network.weights import StochasticPLL, fit_weights

SCHEMA = Schema.from_cardinalities([2, 3, 2, 2])


def _rows(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(0, c, n) for c in SCHEMA.cardinalities]).astype(np.uint8)


def _bad(value=9, row=3, column=2):
    rows = _rows().astype(np.int64)
    rows[row, column] = value
    return rows


def _model():
    return MarkovNetwork(SCHEMA, random_featureset(np.random.default_rng(1), SCHEMA, 8))


def _learners():
    rows = _rows(400)
    dtsl = DTSL(SCHEMA, grace_period=20).partial_fit(rows)
    graft = EdgeGrafting(SCHEMA, update_every=100).partial_fit(rows)
    return {"dtsl": dtsl, "grafting": graft, "dn": dtsl.to_dependency_network()}


def _assert_located(excinfo, row=3, column=2):
    assert excinfo.value.row == row and excinfo.value.column == column
    assert "out of range" in str(excinfo.value) or "non-integer" in str(excinfo.value)


@pytest.mark.parametrize(
    "entry",
    [
        "pll",
        "pll_terms",
        "log_score",
        "conditional",
        "log_conditional",
        "log_probability",
        "conditional_log_likelihoods",
    ],
)
def test_markov_network_entries_refuse_out_of_range_values(entry):
    model = _model()
    call = getattr(model, entry)
    args = (_bad(),) + ((1,) if "conditional" in entry and "likelihoods" not in entry else ())
    with pytest.raises(SchemaError) as e:
        call(*args)
    _assert_located(e)


@pytest.mark.parametrize("name", ["dtsl", "grafting", "dn"])
def test_learner_pll_terms_refuse_out_of_range_values(name):
    learner = _learners()[name]
    with pytest.raises(SchemaError) as e:
        learner.pll_terms(_bad(7))
    _assert_located(e)


@pytest.mark.parametrize(
    "entry",
    [
        lambda m, r: pll_terms(m, r),
        lambda m, r: cmll_terms(m, r, burn_in=1, samples=2),
        lambda m, r: fit_weights(m, r, max_iter=2),
        lambda m, r: StochasticPLL(m).partial_fit(r),
    ],
)
def test_functions_taking_rows_refuse_bad_values(entry):
    with pytest.raises(SchemaError) as e:
        entry(_model(), _bad(2.5))
    _assert_located(e)


def test_gibbs_evidence_is_validated_but_minus_one_means_unobserved():
    model = _model()
    evidence = _rows(5).astype(np.int64)
    evidence[:, 0] = -1
    out = gibbs_marginals(model, evidence, burn_in=2, samples=5)
    assert out.shape == (5, int(SCHEMA.cardinalities.sum()))
    evidence[2, 1] = 3  # variable 1 has three states
    with pytest.raises(SchemaError) as e:
        gibbs_marginals(model, evidence, burn_in=2, samples=5)
    assert (e.value.row, e.value.column) == (2, 1)
    evidence[2, 1] = -2
    with pytest.raises(SchemaError):
        gibbs_marginals(model, evidence, burn_in=2, samples=5)


def test_untrusted_batch_is_validated_and_located_from_its_start():
    rows = _rows().copy()
    rows[3, 2] = 5  # a uint8 matrix that no source validated
    batch = Batch(rows, end=140, start=100)
    with pytest.raises(SchemaError) as e:
        DTSL(SCHEMA).partial_fit(batch)
    assert (e.value.row, e.value.column) == (103, 2)


def test_learning_path_validates_each_batch_once(monkeypatch):
    rows = _rows(4000)
    calls = []
    real = Schema.validate

    def counting(self, values, *a, **k):
        calls.append(np.asarray(values).shape[0])
        return real(self, values, *a, **k)

    for make in (lambda: DTSL(SCHEMA, grace_period=50), lambda: EdgeGrafting(SCHEMA)):
        source = ArraySource(rows, schema=SCHEMA, batch_size=500)
        monkeypatch.setattr(Schema, "validate", counting)
        calls.clear()
        import tempfile

        with tempfile.TemporaryDirectory() as out:
            StreamLearner(source, make(), out, every_rows=2000, progress=None).run()
        monkeypatch.setattr(Schema, "validate", real)
        assert sum(calls) == 0, calls  # the source validated every row in its constructor
