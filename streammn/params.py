"""Learner parameters, declared once: what each setting allows, means, and is called on the CLI.

A learner's ``__init__`` signature holds each parameter's default (where ``help()``, an editor
and :meth:`~streammn.learner.Estimator.get_params` read it). Its class attribute ``parameters``
maps every other keyword of ``__init__`` to a :class:`Param`: the values allowed (a constraint,
after scikit-learn's declarative ``_parameter_constraints``), one line of help, the
``streammn learn`` flag if the option is offered there, and whether a resumed run may change it
(settings that do not change what is learned, such as thread counts). Everything else is read
from that one place:

- ``__init__`` validation (:func:`check_params`): a value outside its constraint raises the
  learner's error class, naming the parameter, the allowed values and the value given;
- the ``streammn learn`` options (:mod:`streammn.cli.learners`): flag, parse-time range check
  (exit code 2), ``--help`` text with the default;
- resume checks (:func:`resume_may_change`).

A parameter renamed keeps its old keyword for a while: the class's ``renamed`` table maps the
old name to the new, and :func:`new_names` translates the keywords ``__init__`` and
``set_params`` are given (with a ``DeprecationWarning``) and those a state saved before the
rename holds (silently: the user did not write them); the old name also still reads as an
attribute, with the warning. ``Param.old_flags`` keeps the old command-line spelling, with a
note on stderr when it is used.

A constraint both tests a Python value (``allows``) and parses command-line text (``parse``),
so the range a user meets on the command line is the range the learner enforces.
"""

from __future__ import annotations

import argparse
import inspect
import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any


class Constraint:
    """A set of allowed values: a test, a parser for command-line text and a description."""

    def allows(self, value) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def parse(self, text: str):
        """The value ``text`` stands for; ``argparse.ArgumentTypeError`` when not allowed."""
        raise argparse.ArgumentTypeError(f"{text!r} is not {self.describe()}")

    def argparse_type(self):
        """``parse`` as an ``argparse`` ``type=`` (named for argparse's own messages)."""

        def parse(text: str):
            return self.parse(text)

        parse.__name__ = self.describe()
        return parse

    def __or__(self, other: "Constraint") -> "Constraint":
        return Either(self, other)


@dataclass(frozen=True)
class Interval(Constraint):
    """Integers (``kind=int``) or real numbers (``kind=float``) between ``low`` and ``high``
    (either may be None: unbounded); ``closed`` says which ends belong: ``"both"``,
    ``"left"``, ``"right"`` or ``"neither"``. Booleans and NaN are never numbers here;
    infinity is one only where an end is unbounded."""

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "both"

    def allows(self, value) -> bool:
        # type[Any]: typeshed's numbers.Real declares no comparisons
        wanted: type[Any] = numbers.Integral if self.kind is int else numbers.Real
        if isinstance(value, bool) or not isinstance(value, wanted) or math.isnan(value):
            return False
        low_ok = self.low is None or (
            value >= self.low if self.closed in ("both", "left") else value > self.low
        )
        high_ok = self.high is None or (
            value <= self.high if self.closed in ("both", "right") else value < self.high
        )
        return low_ok and high_ok

    def describe(self) -> str:
        noun = "an integer" if self.kind is int else "a number"
        if self.low is not None and self.high is not None:
            left = "[" if self.closed in ("both", "left") else "("
            right = "]" if self.closed in ("both", "right") else ")"
            return f"{noun} in {left}{self.low:g}, {self.high:g}{right}"
        if self.low is not None:
            if self.kind is int and self.low == 1 and self.closed in ("both", "left"):
                return "a positive integer"
            if self.low == 0:
                return (
                    f"{'a non-negative' if self.closed in ('both', 'left') else 'a positive'}"
                    f" {noun.split()[1]}"
                )
            return f"{noun} {'>=' if self.closed in ('both', 'left') else '>'} {self.low:g}"
        if self.high is not None:
            return f"{noun} {'<=' if self.closed in ('both', 'right') else '<'} {self.high:g}"
        return noun

    def parse(self, text: str):
        try:
            value = self.kind(text)
        except ValueError:
            return super().parse(text)
        if not self.allows(value):
            return super().parse(text)
        return value


@dataclass(frozen=True)
class OneOf(Constraint):
    """One of a few named values (strings, or True/False/None where a mode is named so)."""

    values: tuple

    def __init__(self, *values):
        object.__setattr__(self, "values", values)

    def allows(self, value) -> bool:
        # compared by type and value, so True does not pass as 1 nor 1 as True
        return any(type(value) is type(v) and value == v for v in self.values)

    def describe(self) -> str:
        shown = [repr(v) for v in self.values]
        return shown[0] if len(shown) == 1 else f"one of {', '.join(shown)}"

    def parse(self, text: str):
        for v in self.values:
            if isinstance(v, str) and v == text:
                return v
        return super().parse(text)

    @property
    def choices(self) -> list[str]:
        return [v for v in self.values if isinstance(v, str)]


@dataclass(frozen=True)
class Boolean(Constraint):
    """True or False (on the command line, a flag that sets True)."""

    def allows(self, value) -> bool:
        return isinstance(value, bool)

    def describe(self) -> str:
        return "True or False"


@dataclass(frozen=True)
class Either(Constraint):
    """Any value one of ``options`` allows (e.g. ``'auto'`` or a number)."""

    options: tuple

    def __init__(self, *options):
        flat = []
        for o in options:
            flat.extend(o.options if isinstance(o, Either) else (o,))
        object.__setattr__(self, "options", tuple(flat))

    def allows(self, value) -> bool:
        return any(o.allows(value) for o in self.options)

    def describe(self) -> str:
        return " or ".join(o.describe() for o in self.options)

    def parse(self, text: str):
        for option in self.options:
            try:
                return option.parse(text)
            except argparse.ArgumentTypeError:
                continue
        return super().parse(text)


NONE = OneOf(None)
AUTOMATIC = OneOf("auto")


@dataclass(frozen=True)
class Param:
    """One learner parameter: ``allowed`` values, ``help`` (one line, read by ``--help``), the
    ``streammn learn`` ``flag`` offering it (None: Python only), whether a resumed run may
    change it (``resume``: settings that do not change what is learned), and the deprecated
    spellings of the flag still accepted (``old_flags``)."""

    allowed: Constraint
    help: str
    flag: str | None = None
    resume: bool = False
    old_flags: tuple[str, ...] = ()


def check_params(learner_class, values: dict, error: type[Exception]) -> None:
    """Raise ``error`` naming the first parameter of ``values`` (``__init__``'s ``locals()``
    will do: other names are ignored) whose value its class's table does not allow."""
    for name, param in learner_class.parameters.items():
        if name in values and not param.allowed.allows(values[name]):
            raise error(
                f"{learner_class.__name__}: {name} must be {param.allowed.describe()}, "
                f"got {values[name]!r}"
            )


def renamed_to(learner_class, old: str, stacklevel: int = 2) -> str:
    """The new name of the class's renamed parameter ``old``, with a ``DeprecationWarning``
    pointing ``stacklevel`` frames above the caller (1: the caller's line)."""
    new = learner_class.renamed[old]
    warnings.warn(
        f"{learner_class.__name__}: {old} is renamed {new}",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )
    return new


def new_names(learner_class, values: dict, error: type[Exception], warn: bool = True) -> dict:
    """``values`` (keyword -> value) with the old names of the class's ``renamed`` table
    replaced by the new ones, warning at the caller's caller when ``warn``; both names given
    raise ``error``."""
    values = dict(values)
    for old, new in learner_class.renamed.items():
        if old not in values:
            continue
        if new in values:
            raise error(f"{learner_class.__name__}: {old} is renamed {new}; give {new} only")
        if warn:
            renamed_to(learner_class, old, stacklevel=3)
        values[new] = values.pop(old)
    return values


def resume_may_change(learner_class) -> frozenset[str]:
    """Names of the parameters a resumed run may set differently from its snapshot."""
    return frozenset(n for n, p in learner_class.parameters.items() if p.resume)


def default_of(learner_class, name: str) -> Any:
    """The default of ``__init__``'s keyword ``name`` (read from the signature)."""
    return inspect.signature(learner_class.__init__).parameters[name].default
