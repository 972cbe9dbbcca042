"""MarkovNetwork <-> pgmpy DiscreteMarkovNetwork, and the UAI file route (pgmpy is in the test
extra; skipped only where it is not installed)."""

import math

import numpy as np
import pytest

pytest.importorskip("pgmpy")

from pgmpy.readwrite import UAIReader, UAIWriter  # noqa: E402

from helpers.helpers_mn import all_rows, random_featureset  # noqa: E402
from streammn import Schema  # noqa: E402
from streammn.demo import planted_network  # noqa: E402
from streammn.dtsl import DTSL  # noqa: E402
from streammn.features import FeatureSet  # noqa: E402
from streammn.formats import read_model, write_model  # noqa: E402
from streammn.inference import sample  # noqa: E402
from streammn.network.model import MarkovNetwork  # noqa: E402


def pgmpy_log_scores(net, rows, names):
    """log of the product of the pgmpy factors at each row (pgmpy's unnormalised P)."""
    col = {n: i for i, n in enumerate(names)}
    out = np.zeros(rows.shape[0])
    for factor in net.get_factors():
        idx = tuple(rows[:, col[v]] for v in factor.scope())
        out += np.log(factor.values[idx])
    return out


def random_model(seed):
    rng = np.random.default_rng(seed)
    schema = Schema.from_cardinalities([2, 3, 2, 4, 2, 2], names=list("abcdef"))
    fs = random_featureset(rng, schema, 25, max_len=3, p_eq=0.6)
    constant = FeatureSet.from_features(schema, [(0.7, [])])  # only scales the model
    return MarkovNetwork(schema, FeatureSet.concat(schema, [fs, constant]))


@pytest.mark.parametrize("seed", [0, 1])
def test_random_model_has_equal_factors_in_pgmpy(seed):
    model = random_model(seed)
    net = model.to_pgmpy()
    assert net.check_model()
    assert set(net.nodes()) == set(model.schema.names)
    names = model.schema.names
    assert {frozenset(e) for e in net.edges()} == {
        frozenset((names[i], names[j])) for i, j in model.edges()
    }
    rows = np.random.default_rng(seed).integers(0, model.schema.cardinalities, (200, 6))
    rows = rows.astype(np.uint8)
    np.testing.assert_allclose(pgmpy_log_scores(net, rows, names), model.log_score(rows), atol=1e-9)
    assert math.log(net.get_partition_function()) == pytest.approx(model.log_partition(), abs=1e-9)


def test_learned_model_round_trip_and_uai_file_route(tmp_path):
    planted, _ = planted_network(7, seed=3)
    rows = sample(planted, 3000, seed=4)
    model = DTSL(planted.schema, kappa=0.01, grace_period=50).fit(rows).to_markov_network()
    assert max(model.features.lengths()) >= 2  # conjunctions, not just unary features
    names = model.schema.names
    states = all_rows(model.schema)
    net = model.to_pgmpy()
    np.testing.assert_allclose(
        pgmpy_log_scores(net, states, names), model.log_score(states), atol=1e-9
    )
    assert math.log(net.get_partition_function()) == pytest.approx(model.log_partition(), abs=1e-9)
    back = MarkovNetwork.from_pgmpy(net)
    assert back.schema == model.schema
    np.testing.assert_allclose(back.log_score(states), model.log_score(states), atol=1e-9)

    # streammn writes UAI, pgmpy reads it; pgmpy writes UAI, streammn reads it
    path = tmp_path / "model.uai"
    write_model(path, model.schema, model.features)
    from_file = UAIReader(str(path)).get_model()
    ours = MarkovNetwork.from_pgmpy(from_file)  # pgmpy names the variables var_0 ...
    order = [int(n.split("_")[1]) for n in ours.schema.names]
    np.testing.assert_allclose(ours.log_score(states[:, order]), model.log_score(states), atol=1e-9)
    UAIWriter(net).write(str(tmp_path / "pgmpy.uai"))
    schema, features = read_model(tmp_path / "pgmpy.uai")
    again = MarkovNetwork(schema, features)
    assert again.log_partition() == pytest.approx(model.log_partition(), abs=1e-6)


def test_named_states_travel_as_state_names_and_queries_use_them():
    """A model learned from ordinary events: pgmpy's factors carry the names and bin labels,
    a query by names gives the model's exact conditional (by enumeration), and reading back
    keeps the names (a bin label as a word)."""
    from pgmpy.inference import VariableElimination

    from streammn.connectors import CsvSource
    from tests.test_cli import ROOT

    with CsvSource(ROOT / "examples" / "events.csv", missing=True) as source:
        schema, rows = source.schema, source.read_all()
    model = DTSL(schema, cpd="tree").fit(rows).to_markov_network()
    net = model.to_pgmpy()
    for factor in net.get_factors():
        for name, states in factor.state_names.items():
            assert tuple(states) == schema[schema.names.index(name)].state_names
    query = VariableElimination(net).query(["clicked"], evidence={"device": "desktop"})
    query.normalize()  # pgmpy leaves a Markov network's query unnormalised
    got = {state: query.get_value(clicked=state) for state in (False, True)}

    states = all_rows(model.schema)
    joint = np.exp(model.log_score(states))
    device, clicked = schema.names.index("device"), schema.names.index("clicked")
    desktop = schema[device].states.index("desktop")
    given = states[:, device] == desktop
    for k, state in enumerate(schema[clicked].states):
        exact = joint[given & (states[:, clicked] == k)].sum() / joint[given].sum()
        assert got[state] == pytest.approx(exact, abs=1e-9)

    back = MarkovNetwork.from_pgmpy(net)
    assert [v.state_names for v in back.schema] == [v.state_names for v in schema]
    np.testing.assert_allclose(back.log_score(states), model.log_score(states), atol=1e-9)
