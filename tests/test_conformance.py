"""One conformance suite for every structure learner (river's ``check_estimator`` idea).

To add a learner, append a factory to ``LEARNERS``: a name and a function from a schema to a
fresh learner whose settings make it learn (split, add edges) within the few thousand rows
below. Each check then runs on it:

- it is a :class:`~streammn.learner.StructureLearner`;
- state round trip: a restored learner continues exactly as the original;
- batch-cut independence: the same rows cut into different batches give the same model;
- a caller that refills one buffer for every batch teaches what fresh arrays teach (the
  learner keeps copies, never views, of the rows it holds on to);
- a bad batch raises a ``SchemaError`` and leaves the state untouched;
- ``get_params`` rebuilds an equal learner (same repr, same model on the same rows);
- built without a schema (the factory given None), it takes the schema from the data, and
  ``get_params``, ``clone`` and the state round trip keep it a learner built without one;
- the published network keeps the learner's weights unless refined ones score better.
"""

import numpy as np
import pytest

from streammn.connectors.base import Batch
from streammn.csgs import CSGS
from streammn.demo import planted_network
from streammn.dtsl import DTSL
from streammn.et import EnsembleOfTrees
from streammn.grafting import EdgeGrafting
from streammn.inference import sample
from streammn.errors import DataError, NotFittedError
from streammn.learner import StructureLearner
from streammn.packed_state import pack_state, unpack_state
from streammn.schema import Schema, SchemaError

LEARNERS = [
    ("dtsl", lambda schema: DTSL(schema, kappa=0.01, grace_period=100)),
    ("dtsl-replay", lambda schema: DTSL(schema, kappa=0.01, grace_period=100, replay_rows=500)),
    ("dtsl-defaults", lambda schema: DTSL(schema)),
    ("dtsl-auto", lambda schema: DTSL(schema, cpd="auto")),
    (
        "dtsl-drift-decay",
        lambda schema: DTSL(schema, grace_period=100, drift="page-hinkley", half_life=1000),
    ),
    (
        "grafting",
        lambda schema: EdgeGrafting(
            schema, lambda_=0.01, update_every=700, steps_per_update=2, max_iter=20
        ),
    ),
    ("csgs", lambda schema: CSGS(schema, max_contexts=200)),
    ("et", lambda schema: EnsembleOfTrees(schema, update_every=700, sample_rows=500, max_iter=30)),
]

N_ROWS = 3000


@pytest.fixture(scope="module")
def rows():
    model, _ = planted_network(8, seed=4)
    return model.schema, sample(model, N_ROWS, seed=5)


def feed(learner, rows, cuts):
    """partial_fit on ``rows`` cut at the given row indices."""
    bounds = [0, *cuts, rows.shape[0]]
    for a, b in zip(bounds[:-1], bounds[1:]):
        learner.partial_fit(Batch(np.ascontiguousarray(rows[a:b]), end=b, start=a))
    return learner


def same_model(a, b, probe):
    ma, mb = a.to_markov_network(), b.to_markov_network()
    assert ma.features.equals(mb.features)
    np.testing.assert_array_equal(a.pll_terms(probe), b.pll_terms(probe))


@pytest.fixture(params=LEARNERS, ids=[name for name, _ in LEARNERS])
def make(request):
    return request.param[1]


def test_meets_the_contract(make, rows):
    schema, _ = rows
    assert isinstance(make(schema), StructureLearner)


def test_state_round_trip(make, rows):
    schema, data = rows
    learner = feed(make(schema), data[:2000], [500, 1200])
    restored = type(learner).from_bytes(learner.to_bytes())
    same_model(learner, restored, data[:200])
    feed(learner, data[2000:], [300])
    feed(restored, data[2000:], [300])
    same_model(learner, restored, data[:200])
    assert restored.to_bytes() == learner.to_bytes()


def test_batch_cut_independence(make, rows):
    schema, data = rows
    whole = feed(make(schema), data, [])
    cut = feed(make(schema), data, [1, 97, 700, 701, 1999, 2100])
    same_model(whole, cut, data[:300])
    assert whole.to_markov_network().n_features > 0


def test_a_buffer_refilled_for_every_batch_teaches_what_fresh_arrays_teach(make, rows):
    schema, data = rows
    fresh = feed(make(schema), data, list(range(250, N_ROWS, 250)))
    refilled, buffer = make(schema), np.empty((250, data.shape[1]), dtype=data.dtype)
    for a in range(0, N_ROWS, 250):
        buffer[:] = data[a : a + 250]
        refilled.partial_fit(Batch(buffer, end=a + 250, start=a))
    same_model(fresh, refilled, data[:300])
    assert refilled.to_bytes() == fresh.to_bytes()


def test_bad_batch_leaves_state_untouched(make, rows):
    schema, data = rows
    learner = feed(make(schema), data[:1500], [600])
    before = learner.to_bytes()
    bad = data[1500:1600].copy()
    bad[37, 3] = 2  # binary variable
    with pytest.raises(SchemaError, match="row 1537"):
        learner.partial_fit(bad)
    assert learner.to_bytes() == before
    with pytest.raises(SchemaError):
        learner.pll_terms(bad)


def test_params_rebuild_an_equal_learner(make, rows):
    schema, data = rows
    learner = make(schema)
    rebuilt = type(learner)(**learner.get_params())
    assert repr(rebuilt) == repr(learner) and rebuilt.settings() == learner.settings()
    assert rebuilt.get_params()["schema"] is schema and list(rebuilt.get_params())[0] == "schema"
    assert repr(learner).startswith(type(learner).__name__ + "(")
    same_model(feed(learner, data, [1000]), feed(rebuilt, data, [1000]), data[:200])
    assert learner.clone().settings() == learner.settings()


def test_bytes_that_are_no_saved_state_raise_the_learners_state_error(make, rows):
    """One checkpoint loader (StructureLearner.from_bytes): garbage, empty, truncated bytes and
    another learner's state raise the learner's own DataError naming the class."""
    schema, data = rows
    learner = feed(make(schema), data[:600], [])
    good = learner.to_bytes()
    other = (CSGS if not isinstance(learner, CSGS) else DTSL)(schema).to_bytes()
    for bad in (b"", b"not a state at all", good[: len(good) // 2], other):
        with pytest.raises(type(learner).state_error, match=type(learner).__name__) as info:
            type(learner).from_bytes(bad)
        assert isinstance(info.value, DataError)


def test_built_without_a_schema_it_takes_the_datas_and_stays_without_one(make, rows):
    """``fit`` infers the schema from all its rows and learns what a learner over that schema
    learns; ``partial_fit`` infers it from the first batch (growing where the learner adds
    values); ``get_params``, ``clone`` and ``to_bytes``/``from_bytes`` keep ``schema=None``
    before and after, and a restored learner continues exactly (issue 38)."""
    schema, data = rows
    bare = make(None)
    assert bare.get_params()["schema"] is None and bare.clone().get_params() == bare.get_params()
    for unfitted in (bare, type(bare).from_bytes(bare.to_bytes())):
        assert unfitted.get_params() == bare.get_params() and repr(unfitted) == repr(bare)
        with pytest.raises(NotFittedError, match="no schema yet"):
            unfitted.score(data[:10])

    inferred = Schema.infer(data)
    fitted = make(None).fit(data)
    assert fitted.schema == inferred and fitted.get_params() == bare.get_params()
    same_model(fitted, make(inferred).fit(data), data[:200])
    assert fitted.clone().get_params() == bare.get_params()

    fed = feed(make(None), data[:2000], [500, 1200])
    first = Schema.infer(data[:500])
    assert fed.schema.same_stream(first.with_growth(255) if fed.adds_values else first)
    assert fed.get_params()["schema"] is None
    restored = type(fed).from_bytes(fed.to_bytes())
    assert restored.get_params() == bare.get_params() and restored.schema == fed.schema
    feed(fed, data[2000:], [300])
    feed(restored, data[2000:], [300])
    same_model(fed, restored, data[:200])
    assert restored.to_bytes() == fed.to_bytes()


def test_score_and_score_samples_are_the_pseudo_log_likelihood(make, rows):
    """scikit-learn's names: score_samples per row, score their mean (issue 38)."""
    schema, data = rows
    learner = feed(make(schema), data[:1500], [])
    probe = data[2000:2200]
    per_row = learner.pll_terms(probe).sum(axis=1)
    np.testing.assert_array_equal(learner.score_samples(probe), per_row)
    assert learner.score(probe) == float(per_row.mean())


def test_the_published_network_is_the_learners_or_better_on_its_held_out_rows(make, rows):
    """Every learner keeps a weight sample by default and publishes the refined weights only
    where they score the sample's held-out rows better than its own (issue 35); with
    ``weights='closed-form'`` it keeps no sample and publishes its own network."""
    schema, data = rows
    learner = feed(make(schema), data, [1000])
    sample = learner.weight_sample
    assert learner.weights == "refined" and sample.n_seen == N_ROWS
    assert sample.train.shape[0] + sample.held_out.shape[0] == N_ROWS  # all kept: 3000 < 25k
    own, published = learner.learned_network(), learner.publish()
    held = sample.held_out
    assert published.model.pll(held) >= own.pll(held) - 1e-12
    assert published.record["published"] in ("refined", "closed-form")
    if published.record["published"] == "closed-form":
        assert published.model.features.equals(own.features)
    assert learner.to_markov_network().features.equals(published.model.features)

    plain = feed(type(learner)(**{**learner.get_params(), "weights": "closed-form"}), data, [1000])
    assert plain.weight_sample is None
    assert plain.to_markov_network().features.equals(plain.learned_network().features)
    assert plain.learned_network().features.equals(own.features)  # the sample changes nothing else
    meta, arrays = unpack_state(learner.to_bytes())
    meta["params"]["weights"] = "closed-form"  # a sample in the state of a learner keeping none
    with pytest.raises(type(learner).state_error, match="weight sample"):
        type(plain).from_bytes(pack_state(meta, arrays))
