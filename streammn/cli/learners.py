"""The structure learners ``streammn learn --algo`` offers, and their options, from one table.

:data:`LEARNERS` names each learner class. Its command-line options are not written here: they
are the entries of the class's ``parameters`` table that carry a ``flag``
(:mod:`streammn.params`), so a learner's default, range and help live in one place and the
command line cannot drift from the class. :func:`add_learner_options` turns them into
``argparse`` options, one group per learner (a flag several learners share, such as ``--seed``,
in a group of its own), each parsed and range-checked by the parameter's constraint and shown
with the default of ``__init__``. Every such option defaults to "not given", so the learner's
own default applies; :func:`learner_from_args` builds the chosen learner from the options given
and refuses an option of another learner instead of ignoring it.

A parser may hold the options of some learners only (``algos``): ``streammn learn`` first tries
one with the learner ``--algo`` names alone, whose module is the only one it imports (each
loads its numba kernels: importing the three others cost the learning process 3 MB of its
memory floor), and falls back to every learner's options when the command line holds anything
that parser does not know (``streammn.cli.parser``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable

from streammn.errors import UsageError
from streammn.params import NONE, Boolean, Either, OneOf, Param, default_of

if TYPE_CHECKING:
    from streammn.learner import StructureLearner

LEARNERS = {
    "dtsl": ("streammn.dtsl", "DTSL"),
    "grafting": ("streammn.grafting", "EdgeGrafting"),
    "csgs": ("streammn.csgs", "CSGS"),
    "et": ("streammn.et", "EnsembleOfTrees"),
}
DEFAULT_ALGO = "dtsl"
ALGO_HELP = (
    "structure learner: dtsl (trees -> DN -> MN), grafting (best-choice edge grafting "
    "of a pairwise MRF), csgs (context-specific Grow-Shrink) or et (ensemble of trees, "
    "exact likelihood in model.et) (default: dtsl)"
)


def learner_class(algo: str) -> type[StructureLearner]:
    """The learner class named ``algo`` (imported on demand: learners load numba kernels)."""
    module, name = LEARNERS[algo]
    return getattr(importlib.import_module(module), name)


def learner_flags(algos: Iterable[str] = LEARNERS) -> dict[str, list[tuple[str, str, Param]]]:
    """Every flag of the learners ``algos`` (default: all) and who declares it:
    ``{flag: [(algo, parameter, Param), ...]}``."""
    flags = defaultdict(list)
    for algo in algos:
        for name, param in learner_class(algo).parameters.items():
            if param.flag is not None:
                flags[param.flag].append((algo, name, param))
    return dict(flags)


def _dest(flag: str) -> str:
    return "learner_" + flag.lstrip("-").replace("-", "_")


def _help(owners) -> str:
    """One help text for a flag: its learners, what it does for each, and the defaults."""
    algos = [algo for algo, _, _ in owners]
    texts = list(dict.fromkeys(p.help for _, _, p in owners))
    if len(texts) == 1:
        text = texts[0] if len(owners) in (1, len(LEARNERS)) else f"{', '.join(algos)}: {texts[0]}"
    else:
        text = "; ".join(f"{algo}: {p.help}" for algo, _, p in owners)
    defaults = {algo: default_of(learner_class(algo), name) for algo, name, _ in owners}
    shown = {a: d for a, d in defaults.items() if d is not None and d is not False}
    if shown and len(set(map(repr, shown.values()))) == 1:
        text += f" (default: {next(iter(shown.values()))})"
    elif shown:
        text += " (defaults: " + ", ".join(f"{a} {d}" for a, d in shown.items()) + ")"
    return text


def add_learner_options(parser: argparse.ArgumentParser, algos: Iterable[str] = LEARNERS) -> None:
    """``--algo`` and the flags of the learners ``algos`` (default: every learner's), in one
    group per learner; a flag's deprecated spellings (``Param.old_flags``) are accepted too,
    left out of ``--help``."""
    algos = tuple(algos)
    parser.add_argument("--algo", choices=list(LEARNERS), default=DEFAULT_ALGO, help=ALGO_HELP)
    parser.set_defaults(learner_algos=algos)  # whose flags the parsed options can hold
    flags = learner_flags(algos)
    groups = {algo: parser.add_argument_group(f"{algo} options") for algo in algos}
    shared = parser.add_argument_group("options of several learners")
    for flag, owners in flags.items():
        group = shared if len(owners) > 1 else groups[owners[0][0]]
        allowed = owners[0][2].allowed
        if isinstance(allowed, Boolean):
            group.add_argument(
                flag,
                dest=_dest(flag),
                action="store_const",
                const=True,
                default=None,
                help=_help(owners),
            )
            takes: dict[str, Any] = {"nargs": 0, "const": True}
        else:
            choices = _choices(allowed)
            metavar = (
                "{" + ",".join(choices) + "}"
                if choices
                else flag.lstrip("-").upper().replace("-", "_")
            )
            takes = {"type": allowed.argparse_type(), "metavar": metavar}
            group.add_argument(flag, dest=_dest(flag), default=None, help=_help(owners), **takes)
        for old in sorted({f for _, _, p in owners for f in p.old_flags}):
            group.add_argument(
                old,
                dest=_dest(flag),
                action=_OldSpelling,
                flag=flag,
                default=None,
                help=argparse.SUPPRESS,
                **takes,
            )


class _OldSpelling(argparse.Action):
    """A deprecated spelling of a learner ``flag``: sets what the flag sets, with a note on
    stderr."""

    def __init__(self, *args, flag: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.flag = flag

    def __call__(self, parser, namespace, values, option_string=None):
        print(
            f"{parser.prog}: warning: {option_string} is deprecated, use {self.flag}",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def _choices(allowed) -> list[str] | None:
    """The names a constraint of named values allows (None, "not given", aside)."""
    options = allowed.options if isinstance(allowed, Either) else (allowed,)
    named = [o for o in options if o != NONE]
    if all(isinstance(o, OneOf) for o in named):
        return [v for o in named for v in o.choices] or None
    return None


def named_algo(argv: list[str]) -> str:
    """The learner ``--algo`` names in ``argv`` spelled out (``--algo X`` or ``--algo=X``), else
    the default; an abbreviated ``--algo`` is not seen here (the parser of every learner's
    options reads it)."""
    for k, arg in enumerate(argv):
        if arg == "--algo" and k + 1 < len(argv):
            return argv[k + 1]
        if arg.startswith("--algo="):
            return arg.partition("=")[2]
    return DEFAULT_ALGO


def _algos(args) -> tuple[str, ...]:
    """The learners whose flags ``args`` was parsed with."""
    return getattr(args, "learner_algos", tuple(LEARNERS))


def given_learner_options(args) -> dict[str, object]:
    """The learner flags given on the command line, with their values."""
    return {
        flag: getattr(args, _dest(flag))
        for flag in learner_flags(_algos(args))
        if getattr(args, _dest(flag), None) is not None
    }


def learner_setting(args, flag: str):
    """The value given for a learner ``flag``, or None when it was not given."""
    return getattr(args, _dest(flag), None)


def learner_from_args(args, schema, defaults: dict | None = None):
    """The learner ``--algo`` names over ``schema``, with the options given (the others at
    ``defaults``, else the learner's). An option of another learner is a :class:`UsageError`."""
    cls = learner_class(args.algo)
    own = {p.flag: name for name, p in cls.parameters.items() if p.flag is not None}
    flags = learner_flags(_algos(args))
    params = dict(defaults or {})
    for flag, value in given_learner_options(args).items():
        if flag not in own:
            owners = ", ".join(algo for algo, _, _ in flags[flag])
            raise UsageError(
                f"{flag} is an option of {owners}, not of {args.algo} (--algo {args.algo})"
            )
        params[own[flag]] = value
    # every learner takes the schema first (StructureLearner declares no __init__)
    return cls(schema, **params)  # type: ignore[call-arg]
