"""Value checks for command-line options, as argparse ``type=`` functions.

Every numeric option of the ``streammn`` command names its range here, so a value outside it is
refused while parsing (exit code 2, ``argparse`` naming the option and the value) instead of
failing later inside a learner with a traceback or, worse, being accepted. A range is written
once, as a function, and the option's help says the same in words.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable, TypeVar

Number = TypeVar("Number", int, float)


def _number(
    kind: Callable[[str], Number], test: Callable[[Number], bool], wanted: str
) -> Callable[[str], Number]:
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}") from None
        if kind is float and not math.isfinite(value) or not test(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
        return value

    parse.__name__ = wanted  # argparse names the type in some messages
    return parse


positive_int = _number(int, lambda v: v >= 1, "a positive integer")
count = _number(int, lambda v: v >= 0, "a non-negative integer")
positive_float = _number(float, lambda v: v > 0, "a positive number")
non_negative = _number(float, lambda v: v >= 0, "a non-negative number")
unit_interval = _number(float, lambda v: 0 <= v <= 1, "a number in [0, 1]")
prior = _number(float, lambda v: 0 < v <= 1, "a number in (0, 1]")
confidence = _number(float, lambda v: 0 < v < 1, "a number in (0, 1)")
above_one = _number(float, lambda v: v > 1, "a number above 1")


def kappa(text: str):
    """DTSL's split criterion: ``'auto'`` or a fixed structure prior in (0, 1]."""
    if text == "auto":
        return text
    try:
        return prior(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not 'auto' or a number in (0, 1]") from None


def at_least(low: int) -> Callable[[str], int]:
    """An integer of at least ``low``."""
    return _number(int, lambda v: v >= low, f"an integer of at least {low}")


MODEL_FORMATS = ("json", "mn", "uai")


def model_formats(text: str) -> tuple[str, ...]:
    """A comma-separated list of snapshot model formats that includes ``json`` (the model file
    ``score``, ``inspect`` and resume read back)."""
    formats = tuple(dict.fromkeys(f.strip() for f in text.split(",") if f.strip()))
    unknown = [f for f in formats if f not in MODEL_FORMATS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown model format(s) {', '.join(unknown)}: choose from {','.join(MODEL_FORMATS)}"
        )
    if "json" not in formats:
        raise argparse.ArgumentTypeError(
            f"{text!r} lacks json: every snapshot needs model.json, "
            f"which score, inspect and --resume read"
        )
    return formats


def grow_values(text: str) -> tuple[int | None, dict[str, int]]:
    """``--grow-values``: ``MAX`` (every variable may grow to MAX values), ``NAME=MAX,...``
    (only the named ones), or both (``MAX,NAME=MAX``); MAX in 2..255. Returns the default
    maximum (None: variables not named keep their cardinality) and the named maxima."""
    default, named = None, {}
    for item in (t.strip() for t in text.split(",")):
        name, _, value = item.rpartition("=")
        try:
            maximum = int(value)
        except ValueError:
            maximum = 0
        if not 2 <= maximum <= 255 or (not name and "=" in item):
            raise argparse.ArgumentTypeError(f"{item!r} is not MAX or NAME=MAX with MAX in 2..255")
        if not name:
            if default is not None:
                raise argparse.ArgumentTypeError(f"{text!r} gives the default maximum twice")
            default = maximum
        else:
            named[name] = maximum
    return default, named
