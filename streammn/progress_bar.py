"""Progress bars for work a person waits for: the commands' (``score``) and ``DTSL.fit``'s.

A tqdm bar on stderr that counts what is done and clears itself when closed, or, when it is not
to be shown, one that draws nothing (so the code that updates it needs no branch).
"""

from __future__ import annotations

import sys

from tqdm import tqdm


def progress_bar(shown: bool, what: str, unit: str = "rows", total: int | None = None) -> tqdm:
    """A bar titled ``what`` counting ``unit``\\ s (``update(n)``; ``total`` when known), drawn
    only when ``shown``."""
    return tqdm(
        desc=what,
        total=total,
        unit=f" {unit}",
        unit_scale=unit == "rows",  # 1.2M rows; but 8 levels, not 8.00
        disable=not shown,
        leave=False,
        file=sys.stderr,
    )
