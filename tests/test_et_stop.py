"""A prompt stop for the ensemble of trees: a learning phase at the end of a batch is abandoned
when a stop is asked, stays pending, and runs first when learning continues, so the learner
ends exactly as an uninterrupted one."""

import numpy as np

from streammn.demo import planted_network
from streammn.et import EnsembleOfTrees
from streammn.inference import sample


def make(schema):
    return EnsembleOfTrees(schema, update_every=500, sample_rows=300, max_iter=30)


def test_a_stop_abandons_the_phase_at_the_end_of_a_batch_and_resumes_it_exactly():
    model, _ = planted_network(8, seed=3)
    rows = sample(model, 1500, seed=4)
    plain = make(model.schema).partial_fit(rows[:1000]).partial_fit(rows[1000:])

    stopped = make(model.schema).partial_fit(rows[:500])
    assert stopped.rows_to_pause() == 500
    stopped.stop()
    stopped.partial_fit(rows[500:1000])  # its phase, at the end of the batch, is abandoned
    assert stopped.phases == 1 and stopped.rows_since_update == 500
    assert stopped.learned_network().n_features > 0  # the last phase's model, at once
    resumed = type(stopped).from_bytes(stopped.to_bytes())
    resumed.partial_fit(rows[1000:])  # the pending phase first, then the rest
    assert resumed.to_bytes() == plain.to_bytes()


def test_a_phase_inside_a_batch_is_not_abandoned():
    model, _ = planted_network(8, seed=3)
    rows = sample(model, 1200, seed=4)
    learner = make(model.schema)
    learner.stop()
    learner.partial_fit(rows)  # boundaries at 500 and 1000 fall inside the batch
    assert learner.phases == 2 and learner.rows_since_update == 200
    np.testing.assert_array_equal(
        learner.to_bytes(), make(model.schema).partial_fit(rows).to_bytes()
    )


def test_a_phase_runs_only_when_half_the_sample_is_new():
    """Phases at the boundaries where at least new_share of the sample is new since the last
    (500, 1000, 2000 rows of 2,400; not 1500): a skipped boundary changes neither beta nor the
    published model's beta, and the learner does not depend on how the stream is cut;
    new_share=0 runs a phase at every boundary."""
    model, _ = planted_network(8, seed=3)
    rows = sample(model, 2400, seed=4)
    learner = make(model.schema).partial_fit(rows[:1000])
    beta = learner.beta.copy()
    assert learner.phases == 2 and learner.phase_rows == 1000
    learner.partial_fit(rows[1000:1500])
    assert learner.phases == 2 and not learner.phase_due()
    np.testing.assert_array_equal(learner.beta, beta)
    np.testing.assert_array_equal(learner.current_beta(), beta)
    learner.partial_fit(rows[1500:])
    assert learner.phases == 3 and learner.phase_rows == 2000
    cut = make(model.schema)
    for a, b in [(0, 1), (1, 777), (777, 1500), (1500, 1999), (1999, 2400)]:
        cut.partial_fit(rows[a:b])
    assert cut.to_bytes() == learner.to_bytes()
    every = EnsembleOfTrees(
        model.schema, update_every=500, sample_rows=300, max_iter=30, new_share=0.0
    ).partial_fit(rows)
    assert every.phases == 4
