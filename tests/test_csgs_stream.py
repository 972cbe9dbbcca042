"""CSGS's prompt stop (issue 41): the structure learning in flight is abandoned between chunks
of contexts and the last model stands; the counts, and so a resumed run, are unaffected."""

import numpy as np

from streammn.csgs import CSGS
from streammn.csgs import canonical as canonical_module
from streammn.csgs.canonical import learn_canonical_model
from streammn.csgs.synthetic import context_specific_network, sample_rows
from streammn.schema import Schema


def test_watched_learning_gives_the_graphs_of_one_kernel_call():
    rng = np.random.default_rng(0)
    for schema, rows in (
        (Schema.binary(6), (rng.random((3000, 6)) < 0.3).astype(np.uint8)),
        (Schema.from_cardinalities([3] * 5), rng.integers(0, 3, (3000, 5)).astype(np.uint8)),
    ):
        rows[:, 1] = rows[:, 0]  # one dependence to find
        patterns, counts = np.unique(rows, axis=0, return_counts=True)
        plain = learn_canonical_model(schema, patterns, counts)
        watched = learn_canonical_model(schema, patterns, counts, should_stop=lambda: False)
        np.testing.assert_array_equal(plain.adjacency, watched.adjacency)
        assert plain.n_tests == watched.n_tests


def test_stop_abandons_the_structure_learning_and_keeps_the_last_model(monkeypatch):
    true = context_specific_network(5, seed=0)
    rows = sample_rows(true, 4000, seed=1)
    learner = CSGS(true.schema).partial_fit(rows[:2000])
    first = learner.learned_network()
    learner.partial_fit(rows[2000:])
    asked = []

    def stop_after_one_chunk():  # the stop arrives while the contexts are being learned
        asked.append(1)
        if len(asked) > 1:
            learner.stop()
        return learner.stop_requested

    monkeypatch.setattr(canonical_module, "CHUNK", 1)
    original = learner.learn_structure
    monkeypatch.setattr(learner, "learn_structure", lambda _: original(stop_after_one_chunk))
    assert learner.learned_network() is first  # abandoned: the last model stands
    assert len(asked) == 2
    monkeypatch.undo()
    learner.clear_stop()
    again = learner.learned_network()
    whole = CSGS(true.schema).partial_fit(rows)
    assert again.features.equals(whole.learned_network().features)
    assert learner.to_bytes() == whole.to_bytes()


def test_stop_abandons_the_weight_fit_and_keeps_the_last_model(monkeypatch):
    """A stop that arrives once the structure is learned abandons the weight fit at its next
    evaluation of the objective: the last model stands, and learning again later gives the
    model of one uninterrupted run."""
    from streammn.csgs import learner as learner_module

    true = context_specific_network(5, seed=0)
    rows = sample_rows(true, 4000, seed=1)
    learner = CSGS(true.schema).partial_fit(rows[:2000])
    first = learner.learned_network()
    learner.partial_fit(rows[2000:])
    fit = learner_module.fit_pattern_weights
    evaluations = []

    def stop_then_fit(*args, should_stop, **kwargs):
        learner.stop()  # the stop arrives between the structure and the weights

        def counted():
            evaluations.append(1)
            return should_stop()

        return fit(*args, should_stop=counted, **kwargs)

    monkeypatch.setattr(learner_module, "fit_pattern_weights", stop_then_fit)
    assert learner.learned_network() is first
    assert len(evaluations) == 1
    monkeypatch.undo()
    learner.clear_stop()
    whole = CSGS(true.schema).partial_fit(rows)
    assert learner.learned_network().features.equals(whole.learned_network().features)


def test_the_snapshot_writers_serial_kernels_learn_the_same_model():
    """In a forked snapshot writer (streammn.kernel_mode) CSGS runs the serial twin of its
    parallel context kernel and does not touch numba's pool: the same canonical model."""
    from streammn.kernel_mode import serial_kernels

    rng = np.random.default_rng(1)
    rows = rng.integers(0, 3, (3000, 5)).astype(np.uint8)
    rows[:, 1] = rows[:, 0]
    schema = Schema.from_cardinalities([3] * 5)
    patterns, counts = np.unique(rows, axis=0, return_counts=True)
    parallel = learn_canonical_model(schema, patterns, counts)
    with serial_kernels():
        serial = learn_canonical_model(schema, patterns, counts)
        model = CSGS(schema).fit(rows).learned_network()
    np.testing.assert_array_equal(parallel.adjacency, serial.adjacency)
    assert parallel.n_tests == serial.n_tests
    assert model.features.equals(CSGS(schema).fit(rows).learned_network().features)
