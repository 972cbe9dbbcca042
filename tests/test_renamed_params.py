"""The parameters issue 39 renamed (grafting ``alpha`` -> ``threshold``, CSGS ``alpha`` ->
``significance``, ET ``alpha`` -> ``pseudo_count``): the new names are the parameters, the old
one is still accepted with a ``DeprecationWarning`` and learns the same model, both at once is
an error, states saved under the old name load, and ``--alpha`` still spells ``--threshold``."""

import warnings

import numpy as np
import pytest
from sklearn import base as sklearn_base

from streammn.cli import main
from streammn.cli.learners import learner_from_args
from streammn.cli.parser import _parser
from streammn.csgs import CSGS
from streammn.demo import planted_network
from streammn.et import EnsembleOfTrees
from streammn.grafting import EdgeGrafting
from streammn.inference import sample
from streammn.packed_state import pack_state, unpack_state

PLANTED, _ = planted_network(6, seed=0)
ROWS = sample(PLANTED, 1500, seed=1)
SCHEMA = PLANTED.schema

# class, new name, a value other than the default
RENAMED = [
    (EdgeGrafting, "threshold", 0.3),
    (CSGS, "significance", 0.01),
    (EnsembleOfTrees, "pseudo_count", 2.5),
]
IDS = [cls.__name__ for cls, _, _ in RENAMED]


@pytest.fixture(autouse=True)
def _deprecations_are_errors():
    """Whatever a test does not expect to warn must not warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        yield


@pytest.mark.parametrize("cls, new, value", RENAMED, ids=IDS)
def test_the_new_name_is_the_parameter(cls, new, value):
    learner = cls(SCHEMA, **{new: value})
    assert getattr(learner, new) == value
    params = learner.get_params()
    assert params[new] == value and "alpha" not in params
    assert new in cls.parameters and "alpha" not in cls.parameters
    assert learner.clone().get_params() == params
    assert sklearn_base.clone(learner).get_params() == params
    assert f"{new}={value!r}" in repr(learner)


@pytest.mark.parametrize("cls, new, value", RENAMED, ids=IDS)
def test_alpha_still_works_with_a_warning_and_learns_the_same_model(cls, new, value):
    with pytest.warns(DeprecationWarning, match=f"alpha is renamed {new}") as caught:
        old = cls(SCHEMA, alpha=value)
    assert caught[0].filename == __file__  # the warning points at the caller
    assert getattr(old, new) == value and "alpha" not in old.get_params()
    old.fit(ROWS)
    learned = cls(SCHEMA, **{new: value}).fit(ROWS)
    assert old.to_bytes() == learned.to_bytes()
    np.testing.assert_array_equal(
        old.to_markov_network().weights, learned.to_markov_network().weights
    )
    with pytest.warns(DeprecationWarning, match=f"alpha is renamed {new}"):
        assert old.alpha == value


@pytest.mark.parametrize("cls, new, value", RENAMED, ids=IDS)
def test_alpha_and_its_new_name_together_are_refused(cls, new, value):
    with pytest.raises(cls.param_error, match=f"alpha is renamed {new}; give {new} only"):
        cls(SCHEMA, alpha=value, **{new: value})
    learner = cls(SCHEMA)
    with pytest.raises(cls.param_error, match=f"give {new} only"):
        learner.set_params(alpha=value, **{new: value})


@pytest.mark.parametrize("cls, new, value", RENAMED, ids=IDS)
def test_set_params_takes_alpha_with_a_warning(cls, new, value):
    learner = cls(SCHEMA)
    with pytest.warns(DeprecationWarning, match=f"alpha is renamed {new}"):
        assert learner.set_params(alpha=value) is learner
    assert getattr(learner, new) == value
    learner.set_params(**{new: value / 2})
    assert getattr(learner, new) == value / 2


@pytest.mark.parametrize("cls, new, value", RENAMED, ids=IDS)
def test_a_value_out_of_range_under_alpha_is_refused_by_the_new_name(cls, new, value):
    with pytest.warns(DeprecationWarning), pytest.raises(cls.param_error, match=f"{new} must be"):
        cls(SCHEMA, alpha=-1.0)


@pytest.mark.parametrize("cls, new, value", RENAMED, ids=IDS)
def test_a_state_saved_under_alpha_loads_silently(cls, new, value):
    learner = cls(SCHEMA, **{new: value}).fit(ROWS)
    data = learner.to_bytes()
    meta, arrays = unpack_state(data)
    assert new in meta["params"] and "alpha" not in meta["params"]
    # a state written before the rename: the same, with the parameter under its old name
    params = {("alpha" if k == new else k): v for k, v in meta["params"].items()}
    before_rename = pack_state({**meta, "params": params}, arrays)
    loaded = cls.from_bytes(before_rename)  # no warning: the user did not write alpha
    assert getattr(loaded, new) == value
    assert loaded.to_bytes() == data
    both = pack_state({**meta, "params": {**meta["params"], "alpha": value}}, arrays)
    with pytest.raises(cls.state_error, match=f"give {new} only"):
        cls.from_bytes(both)


def _learn_args(*options):
    return _parser().parse_args(["learn", "x.data", "--out", "o", "--algo", "grafting", *options])


def test_threshold_flag_and_its_deprecated_spelling(capsys):
    assert learner_from_args(_learn_args("--threshold", "0.3"), SCHEMA).threshold == 0.3
    assert capsys.readouterr().err == ""
    assert learner_from_args(_learn_args("--alpha", "0.3"), SCHEMA).threshold == 0.3
    assert "warning: --alpha is deprecated, use --threshold" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _learn_args("--alpha", "5")  # checked as --threshold is
    assert "--alpha" in capsys.readouterr().err


def test_help_shows_threshold_not_alpha(capsys):
    assert main(["learn", "--help"]) == 0
    shown = capsys.readouterr().out
    assert "--threshold THRESHOLD" in shown and "--alpha " not in shown
    assert "--significance" in shown and "--split-alpha" in shown


def test_a_manifest_from_before_the_rename_still_guards_the_setting():
    """A snapshot manifest written before the rename records ``alpha``: resuming it with
    another ``threshold`` is refused as any changed setting is, the same one is not."""
    from streammn.errors import ResumeSettingsError
    from streammn.stream.resume_guard import check_resume_settings

    settings = EdgeGrafting(SCHEMA, threshold=0.3).settings()
    recorded = {("alpha" if k == "threshold" else k): v for k, v in settings.items()}
    manifest = {"learner": {"class": "EdgeGrafting", "params": recorded}}
    check_resume_settings("snap", manifest, EdgeGrafting(SCHEMA, threshold=0.3))
    with pytest.raises(ResumeSettingsError, match="threshold"):
        check_resume_settings("snap", manifest, EdgeGrafting(SCHEMA, threshold=0.9))
