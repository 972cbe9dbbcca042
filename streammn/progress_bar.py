"""Progress bars for work a person waits for: the commands' (``score``) and the learners' ``fit``.

A tqdm bar on stderr that counts what is done and clears itself when closed, or, when it is not
to be shown, one that draws nothing (so the code that updates it needs no branch). A fit's bar
counts rows, then the steps of the phase after them (:func:`next_phase`): the iterations of a
search whose length is not known ahead, counted where the search already asks whether to stop
(:func:`counting_steps`), so a person sees it move.
"""

from __future__ import annotations

import sys

from typing import Callable

from tqdm import tqdm


class _Bar(tqdm):
    """tqdm, counting in whole units below a thousand: its scaled count reads ``0.00 rows``
    before the first batch (and ``5.00 rows``); scaled from a thousand on (``1.23M rows``).
    The rate waits for the thousand too (unscaled it would read ``101234.56 rows/s``)."""

    @property
    def format_dict(self):
        shown = super().format_dict
        if shown["unit_scale"] is True and shown["n"] < 1000:
            shown["unit_scale"], shown["rate"] = False, 0  # a rate of 0 reads "?"
        return shown


def progress_bar(shown: bool, what: str, unit: str = "rows", total: int | None = None) -> tqdm:
    """A bar titled ``what`` counting ``unit``\\ s (``update(n)``; ``total`` when known), drawn
    only when ``shown``."""
    return _Bar(
        desc=what,
        total=total,
        unit=f" {unit}",
        unit_scale=unit == "rows",  # 1.2M rows; but 8 levels, not 8.00
        disable=not shown,
        leave=False,
        file=sys.stderr,
    )


def next_phase(bar: tqdm, what: str, unit: str, total: int | None = None) -> None:
    """Count the next phase of the work on ``bar``: from 0 again, titled ``what``, in units
    of ``unit``, ``total`` of them when known."""
    bar.unit, bar.unit_scale, bar.total = f" {unit}", False, total
    bar.miniters = 0  # tqdm learned to draw every some thousand rows: draw every step again
    bar.set_description_str(what, refresh=False)
    bar.reset()


def counting_steps(bar: tqdm, should_stop: Callable[[], bool] | None = None) -> Callable[[], bool]:
    """A ``should_stop`` for a search that asks it between steps: each ask counts a step on
    ``bar``; the answer is ``should_stop()``'s (never stop without one)."""

    def step() -> bool:
        bar.update(1)
        return should_stop is not None and should_stop()

    return step
