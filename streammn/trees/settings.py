"""DTSL's settings as the tree growers read them: one object, under the learner's own names.

:class:`~streammn.dtsl.DTSL` resolves its automatic values (``min_count='auto'``,
``replay_rows='auto'``) and hands one :class:`TreeSettings` to every grower it makes (one-pass,
forgetting, drift alternates, level-wise passes), so a setting keeps the name a user gave it
from the constructor down to the code that reads it, instead of being passed on argument by
argument under other names. What a grower needs that is not a setting (the forest, a statistics
budget computed from the memory left, a thread count, a resumed state) is passed beside it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TreeSettings:
    """The split rule and growth limits of a forest (DTSL's parameters of the same names).

    ``kappa`` is ``'auto'`` (the significance test at level ``split_alpha`` with the relevance
    floor ``min_gain_per_row``) or a fixed structure prior; ``min_count`` the rows a test needs
    on each side; ``max_leaves`` a fixed number of statistics slots, or None for what
    ``memory_mb`` leaves after the forest and the replay buffer of ``replay_rows`` rows;
    ``grace_period``, ``delta``, ``tau`` and ``half_life`` are the one-pass growth's.
    """

    kappa: float | str
    split_alpha: float
    min_gain_per_row: float
    min_count: int
    max_depth: int | None
    max_leaves: int | None
    max_tree_leaves: int | None
    grace_period: int
    delta: float
    tau: float
    replay_rows: int
    memory_mb: float
    half_life: float | None = None

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_mb * 2**20)
