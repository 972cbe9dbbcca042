"""scikit-learn's conventions on every learner: ``get_params`` holds every ``__init__``
argument (the schema first), so ``sklearn.base.clone`` rebuilds an unfitted learner with the
same settings; ``set_params`` checks what it is given; ``fit`` returns the learner and ``score``
is the mean pseudo-log-likelihood (issue 38)."""

import numpy as np
import pytest

from streammn.csgs import CSGS
from streammn.demo import planted_network
from streammn.dtsl import DTSL
from streammn.et import EnsembleOfTrees
from streammn.grafting import EdgeGrafting
from streammn.inference import sample

sklearn_base = pytest.importorskip("sklearn.base")

LEARNERS = [
    lambda s: DTSL(s, kappa=0.1, grace_period=50),
    lambda s: DTSL(s, mode="exact", weights="closed-form"),
    lambda s: EdgeGrafting(s, lambda_=0.02),
    lambda s: CSGS(s, max_contexts=100),
    lambda s: EnsembleOfTrees(s, sample_rows=300),
]


@pytest.fixture(scope="module")
def data():
    model, _ = planted_network(6, seed=2)
    return model.schema, sample(model, 1500, seed=3)


@pytest.mark.parametrize("make", LEARNERS, ids=["dtsl", "dtsl-exact", "grafting", "csgs", "et"])
def test_sklearn_clone_rebuilds_an_unfitted_learner_with_the_same_settings(make, data):
    schema, rows = data
    learner = make(schema)
    assert learner.fit(rows) is learner
    copy = sklearn_base.clone(learner)
    assert type(copy) is type(learner) and copy is not learner
    assert copy.settings() == learner.settings() and copy.schema == schema
    assert repr(copy) == repr(learner)
    assert copy.fit(rows).score(rows[:200]) == pytest.approx(learner.score(rows[:200]))
    assert np.isfinite(learner.score(rows[:200]))


def test_set_params_changes_a_setting_and_refuses_an_unknown_one(data):
    schema, rows = data
    learner = DTSL(schema).fit(rows)
    assert learner.set_params(kappa=0.5) is learner
    assert learner.kappa == 0.5 and learner.rows_seen == 0  # learned state starts over
    with pytest.raises(ValueError, match="no parameter 'kapa'"):
        learner.set_params(kapa=0.5)
    with pytest.raises(ValueError, match="kappa"):
        learner.set_params(kappa=2.0)
