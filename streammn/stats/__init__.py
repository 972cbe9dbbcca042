"""Sufficient-statistic stores: mergeable, serialisable counts that learners read.

- :class:`MarginalCounts`: per-variable state counts.
- :class:`PairCounts`: every pairwise joint table, dense, one matrix product per batch.
- :class:`OnDemandPairCounts`: tables only for requested pairs (reservoir for the past, exact
  counts for the future), for many variables.
- :class:`RowReservoir`: a uniform fixed-size row sample (Vitter's algorithm R).
- :class:`PatternCounts`: counts of distinct rows, answering conjunctive queries ``X_A, X_B |
  x_W`` (CSGS's independence tests), with a uniform-sample fallback for wide data.

Every store has ``update(batch)``, in-place ``merge(other)`` (equal to having counted both
inputs) and lossless ``to_bytes()`` / ``from_bytes()``; :func:`from_bytes` restores any of them.
"""

from streammn.stats.marginals import MarginalCounts
from streammn.stats.ondemand import OnDemandPairCounts, PairTable
from streammn.stats.pairs import PairCounts
from streammn.stats.patterns import PatternCounts
from streammn.stats.reservoir import RowReservoir
from streammn.stats.store import StatsFormatError, StatsMergeError, store_kind

_STORES = {
    cls.__name__: cls
    for cls in (MarginalCounts, PairCounts, OnDemandPairCounts, RowReservoir, PatternCounts)
}


def from_bytes(data):
    """Restore a store of any kind from its ``to_bytes()`` output."""
    kind = store_kind(data)
    if kind not in _STORES:
        raise StatsFormatError(f"bytes hold an unknown kind of store {kind!r}")
    return _STORES[kind].from_bytes(data)


__all__ = [
    "MarginalCounts",
    "PairCounts",
    "OnDemandPairCounts",
    "PairTable",
    "RowReservoir",
    "PatternCounts",
    "StatsFormatError",
    "StatsMergeError",
    "from_bytes",
]
