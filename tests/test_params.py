"""Learner parameters declared once (streammn.params, streammn.cli.learners): each learner's table
covers its ``__init__`` exactly, ``__init__`` refuses what the table refuses, and the command
line accepts exactly what the learner accepts."""

import argparse
import ast
import math
import subprocess
import sys

import numpy as np
import pytest

from streammn import Schema
from streammn.cli import main
from streammn.cli.parser import _parse, _parser
from streammn.cli.learners import LEARNERS, learner_class, learner_flags
from streammn.cli.learners import given_learner_options, named_algo
from streammn.params import AUTOMATIC, NONE, Boolean, Interval, OneOf, default_of
from streammn.params import resume_may_change

CLASSES = [learner_class(algo) for algo in LEARNERS]
SCHEMA = Schema.binary(4)


def test_constraints_test_parse_and_describe():
    unit = Interval(float, 0, 0.5, "neither")
    assert unit.allows(0.25) and not unit.allows(0.5) and not unit.allows(0.0)
    assert not unit.allows(True) and not unit.allows(float("nan")) and not unit.allows("0.1")
    assert unit.describe() == "a number in (0, 0.5)"
    assert unit.parse("0.1") == 0.1
    with pytest.raises(argparse.ArgumentTypeError, match=r"'0.7' is not a number in \(0, 0.5\)"):
        unit.parse("0.7")
    count = Interval(int, 1)
    assert count.describe() == "a positive integer"
    assert count.allows(np.int64(3)) and not count.allows(2.0) and not count.allows(0)
    with pytest.raises(argparse.ArgumentTypeError):
        count.parse("1.5")
    assert Interval(float, 1).allows(math.inf) and not Interval(float, 0, 1).allows(math.inf)
    auto_or_prior = AUTOMATIC | Interval(float, 0, 1, "right")
    assert auto_or_prior.parse("auto") == "auto" and auto_or_prior.parse("1") == 1.0
    assert auto_or_prior.describe() == "'auto' or a number in (0, 1]"
    with pytest.raises(argparse.ArgumentTypeError):
        auto_or_prior.parse("0")
    named = OneOf(False, True, "either")
    assert named.allows(True) and named.allows("either") and not named.allows(1)
    assert (NONE | Interval(int, 0)).allows(None) and Boolean().allows(False)
    assert not Boolean().allows(0)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_parameter_is_declared_once_with_an_allowed_default(cls):
    assert set(cls._param_names()) == set(cls.parameters)
    for name, param in cls.parameters.items():
        assert param.allowed.allows(default_of(cls, name)), name
        assert param.help and not param.help.endswith(".")


def _outside(allowed):
    """A value just outside an interval constraint (None when it has no bound to cross)."""
    for option in getattr(allowed, "options", (allowed,)):
        if isinstance(option, Interval):
            if option.low is not None:
                step = 1 if option.kind is int else 1e-9
                return option.low - (0 if option.closed in ("right", "neither") else step)
            if option.high is not None:
                step = 1 if option.kind is int else 1e-9
                return option.high + (0 if option.closed in ("left", "neither") else step)
    return None


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_init_refuses_what_the_table_refuses_naming_the_parameter(cls):
    for name, param in cls.parameters.items():
        bad = _outside(param.allowed)
        if bad is None:
            bad = "no such value"
        with pytest.raises(cls.param_error, match=rf"{name} must be .*got {bad!r}"):
            cls(SCHEMA, **{name: bad})


def test_every_flag_accepts_exactly_what_its_learner_accepts():
    parser = _parser()
    for flag, owners in learner_flags().items():
        for algo, name, param in owners:
            if isinstance(param.allowed, Boolean):
                continue
            bad = _outside(param.allowed)
            if bad is None:
                continue
            with pytest.raises(SystemExit):
                parser.parse_args(
                    ["learn", "x.data", "--out", "o", "--algo", algo, flag, repr(bad)]
                )


def test_the_ranges_that_had_drifted_now_match(tmp_path, capsys):
    data = tmp_path / "d.data"
    np.savetxt(data, np.zeros((10, 3), dtype=int), fmt="%d", delimiter=",")
    for args in (["--split-alpha", "0.6"], ["--half-life", "0.5"]):
        assert main(["learn", str(data), "--out", str(tmp_path / "o"), *args]) == 2
        assert args[0] in capsys.readouterr().err


def test_an_option_of_another_learner_is_refused_not_ignored(tmp_path, capsys):
    data = tmp_path / "d.data"
    np.savetxt(data, np.zeros((10, 3), dtype=int), fmt="%d", delimiter=",")
    out = tmp_path / "o"
    assert main(["learn", str(data), "--out", str(out), "--threshold", "0.3"]) == 2
    err = capsys.readouterr().err
    assert "--threshold is an option of grafting, not of dtsl" in err
    assert not out.exists() or not any(out.iterdir())
    assert (
        main(["learn", str(data), "--out", str(out), "--algo", "grafting", "--mode", "exact"]) == 2
    )
    assert "--mode is an option of dtsl" in capsys.readouterr().err


def test_learn_help_shows_each_learner_group_with_its_defaults(capsys):
    assert main(["learn", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for algo in LEARNERS:
        assert f"{algo} options:" in out
    assert "--grace-period" in out and "(default: 200)" in out
    assert "grafting, et: rows between two structure updates (default: 10000)" in out


def modules_loaded(code: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules starting with ``prefixes`` that running ``code`` has loaded, in a fresh
    interpreter."""
    code += f"\nimport sys\nprint(sorted(m for m in sys.modules if m.startswith({prefixes!r})))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return ast.literal_eval(out)


def modules_loaded_by(command: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules starting with ``prefixes`` that ``streammn <command> --help`` has loaded."""
    code = (
        "import contextlib, io\n"
        "from streammn.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main([{command!r}, '--help'])"
    )
    return modules_loaded(code, prefixes)


def test_other_commands_do_not_load_the_learners():
    learners = ("streammn.dtsl", "streammn.grafting", "streammn.csgs", "streammn.et")
    assert modules_loaded_by("score", learners) == []


def modules_loaded_parsing(argv: list[str], prefixes: tuple[str, ...]) -> list[str]:
    """The modules starting with ``prefixes`` that parsing ``streammn argv`` has loaded."""
    return modules_loaded(f"from streammn.cli.parser import _parse\n_parse({argv!r})", prefixes)


def test_learn_loads_the_chosen_learner_only():
    """Parsing a ``learn`` command imports the module of the learner ``--algo`` names and no
    other (each loads numba kernels: the memory floor of ``--memory-mb``); a command line with
    something only every learner's options explain is parsed with all of them."""
    others = ("streammn.grafting", "streammn.csgs", "streammn.et")
    assert modules_loaded_parsing(["learn", "x", "--out", "o", "--kappa", "0.1"], others) == []
    learners = ("streammn.dtsl", "streammn.csgs", "streammn.et")  # ET builds on grafting's MRF
    et = modules_loaded_parsing(["learn", "x", "--out", "o", "--algo=et"], learners)
    assert {m.split(".")[1] for m in et} == {"et"}
    # an abbreviation (of dtsl's --grace-period) needs the parser that takes them
    assert modules_loaded_parsing(["learn", "x", "--out", "o", "--grace", "5"], others) != []


def test_the_chosen_learners_parser_reads_what_the_full_one_does():
    full = _parser()
    for argv in (
        ["learn", "x", "--out", "o"],
        ["learn", "x", "--out", "o", "--algo", "grafting", "--threshold", "0.3"],
        ["learn", "x", "--out", "o", "--algo=csgs", "--seed", "3", "--every-rows", "10"],
        ["learn", "x", "--out", "o", "--grace-period", "50", "--kappa", "0.01"],
    ):
        args = _parse(argv)
        expected = vars(full.parse_args(argv))
        assert args.learner_algos == (named_algo(argv),)
        assert {k: v for k, v in vars(args).items() if k != "learner_algos"} == {
            k: v for k, v in expected.items() if k in vars(args) and k != "learner_algos"
        }
        assert given_learner_options(args) == given_learner_options(full.parse_args(argv))
    args = _parse(["learn", "x", "--out", "o", "--grace", "50"])  # abbreviated: all learners
    assert args.learner_algos == tuple(LEARNERS) and args.learner_grace_period == 50


def test_learn_options_do_not_load_scipy_sparse():
    """`learn` imports every learner's module for its options; none may bring scipy.sparse
    (ET's spanning tree: 5 MB of the floor of `--memory-mb`) at import."""
    assert modules_loaded_by("learn", ("streammn.et",)) != []
    assert modules_loaded_by("learn", ("scipy.sparse",)) == []


def test_set_params_and_resume_settings_come_from_the_table():
    dtsl = learner_class("dtsl")(SCHEMA, kappa=0.01)
    dtsl.partial_fit(np.zeros((300, 4), dtype=np.uint8))
    assert dtsl.set_params(grace_period=50) is dtsl
    assert dtsl.grace_period == 50 and dtsl.kappa == 0.01 and dtsl.rows_seen == 0
    assert dtsl.get_params(deep=False) == dtsl.get_params()
    with pytest.raises(dtsl.param_error, match="no parameter 'gracep'"):
        dtsl.set_params(gracep=3)
    with pytest.raises(dtsl.param_error, match="grace_period must be a positive integer"):
        dtsl.set_params(grace_period=0)
    assert dtsl.grace_period == 50
    assert resume_may_change(type(dtsl)) == {"n_threads", "seed"}
