"""Best-choice edge grafting: structure learning of pairwise MRFs (grafting paper).

Modules: :mod:`.mrf` (flat table layout, MarkovNetwork export), :mod:`.bp` (loopy BP),
:mod:`.objective` (Eq. 2 and L-BFGS), :mod:`.activation` (score, C2, strategies),
:mod:`.learner` (EdgeGrafting), :mod:`.synthetic` (Appendix C generator).
"""

from streammn.grafting.learner import EdgeGrafting, GraftingError, GraftingStateError
from streammn.grafting.synthetic import (
    SyntheticMRF,
    planted_graph,
    planted_potts,
    potts_mrf,
    scale_free_mrf,
)

__all__ = [
    "EdgeGrafting",
    "GraftingError",
    "GraftingStateError",
    "SyntheticMRF",
    "planted_graph",
    "planted_potts",
    "potts_mrf",
    "scale_free_mrf",
]
