"""Joint tables for requested pairs only: the reservoir answers for the past, counts for the future.

With many variables the dense ``D x D`` pair tables are too costly, and a structure learner such
as best-choice edge grafting only ever tests a small fraction of the pairs. This store keeps exact
marginals, a uniform row reservoir (:class:`RowReservoir`), and a table for each pair somebody
asked for. When ``(i, j)`` is first requested after ``n`` rows, its table starts as the counts
over the reservoir's sample of those ``n`` rows (unscaled: the sample's own counts, so a table
of sample counts plus exact counts); from then on every row is counted exactly. Each
:class:`PairTable` says how many rows it covers, how many of them are reservoir rows, and how
many rows of the stream it misses (``exact`` when none: the reservoir still held every row when
the pair was requested).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from streammn.schema import Schema, Validated
from streammn.stats.counting import count_pairs
from streammn.stats.marginals import MarginalCounts
from streammn.stats.reservoir import RowReservoir
from streammn.stats.store import check_mergeable, expect, pack, rows_of, unpack
from streammn.errors import StatsError, StatsIndexError


@dataclass(frozen=True, eq=False)
class PairTable:
    """The joint counts of variables ``i`` and ``j`` as known to an :class:`OnDemandPairCounts`.

    ``counts[a, b]`` counts covered rows with ``x_i = a`` and ``x_j = b``. The covered rows are
    ``from_reservoir`` rows sampled uniformly from the rows seen before the pair was requested
    plus every row seen since; ``n_missing`` rows of the stream are not represented.
    """

    i: int
    j: int
    counts: np.ndarray
    n_rows: int
    from_reservoir: int
    n_missing: int

    @property
    def exact(self) -> bool:
        """True when the table counts every row of the stream."""
        return self.n_missing == 0

    def probabilities(self, smoothing: float = 0.0) -> np.ndarray:
        """Joint distribution ``(counts + smoothing / cells) / (n_rows + smoothing)``."""
        if smoothing < 0:
            raise StatsError(f"smoothing must be >= 0, got {smoothing}")
        if self.n_rows + smoothing <= 0:
            raise StatsError(f"pair ({self.i}, {self.j}) covers no rows: use smoothing > 0")
        return (self.counts + smoothing / self.counts.size) / (self.n_rows + smoothing)


class OnDemandPairCounts:
    """Exact marginals, a row reservoir, and joint tables for the pairs that were requested.

    Parameters
    ----------
    schema : Schema
        The variables counted. Rows are validated against it.
    reservoir_capacity : int, default 10000
        Rows of the uniform sample that answers for rows seen before a pair was requested.
    seed : int, numpy.random.Generator or None, default None
        Randomness of the reservoir.

    Attributes
    ----------
    n_rows : int
        Rows seen so far.
    marginals : MarginalCounts
        Exact marginal counts of every variable (the store's own object: read, do not update).
    reservoir : RowReservoir
        The row sample (the store's own object: read, do not update).
    """

    def __init__(self, schema: Schema, reservoir_capacity: int = 10000, seed=None):
        self.schema = schema
        self.reservoir_capacity = reservoir_capacity
        self.seed = seed
        self.marginals = MarginalCounts(schema)
        self.reservoir = RowReservoir(schema, capacity=reservoir_capacity, seed=seed)
        self.n_rows = 0
        self._cards = np.ascontiguousarray(schema.cardinalities, dtype=np.int64)
        self._index: dict[tuple[int, int], int] = {}
        self._pairs = np.empty((0, 2), dtype=np.int64)
        self._offsets = np.zeros(1, dtype=np.int64)  # table p is flat[offsets[p]:offsets[p+1]]
        self._exact = np.empty(0, dtype=np.int64)  # counts of rows seen since the request
        self._sampled = np.empty(0, dtype=np.int64)  # counts of reservoir rows
        self._sampled_rows = np.empty(0, dtype=np.int64)  # reservoir rows behind _sampled
        self._rows_before = np.empty(0, dtype=np.int64)  # stream rows seen before the request

    # pair bookkeeping ---------------------------------------------------------------------
    def _canonical(self, i, j) -> tuple[int, int]:
        n = self.schema.n_vars
        i, j = int(i), int(j)
        if not (0 <= i < n and 0 <= j < n):
            raise StatsIndexError(f"variable index out of range 0..{n - 1}: ({i}, {j})")
        if i == j:
            raise StatsError(f"({i}, {j}) is not a pair; use .marginals for one variable")
        return (i, j) if i < j else (j, i)

    def _count(self, rows: np.ndarray, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flat tables of ``pairs`` over ``rows`` and their offsets."""
        sizes = self._cards[pairs[:, 0]] * self._cards[pairs[:, 1]]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        out = np.zeros(int(offsets[-1]), dtype=np.int64)
        if pairs.shape[0]:
            count_pairs(
                rows,
                np.ascontiguousarray(pairs[:, 0]),
                np.ascontiguousarray(pairs[:, 1]),
                self._cards[pairs[:, 1]],
                offsets,
                out,
            )
        return out, offsets

    def _append(self, pairs, exact, sampled, sampled_rows, rows_before) -> None:
        sizes = self._cards[pairs[:, 0]] * self._cards[pairs[:, 1]]
        start = len(self._index)
        for k, (i, j) in enumerate(pairs.tolist()):  # one dict entry per new pair
            self._index[(i, j)] = start + k
        self._pairs = np.concatenate([self._pairs, pairs])
        self._offsets = np.concatenate([self._offsets, self._offsets[-1] + np.cumsum(sizes)])
        self._exact = np.concatenate([self._exact, exact])
        self._sampled = np.concatenate([self._sampled, sampled])
        self._sampled_rows = np.concatenate([self._sampled_rows, sampled_rows])
        self._rows_before = np.concatenate([self._rows_before, rows_before])

    def request(self, pairs) -> list[PairTable]:
        """Start tracking the given ``(i, j)`` pairs and return their tables, in order.

        A pair not tracked yet is answered from the reservoir (its sample of the rows seen so
        far, counts not rescaled) and counted exactly on every later :meth:`update`.
        """
        canon = [self._canonical(i, j) for i, j in pairs]
        new = sorted({p for p in canon if p not in self._index})
        if new:
            new_pairs = np.array(new, dtype=np.int64).reshape(-1, 2)
            sampled, _ = self._count(self.reservoir.rows, new_pairs)
            n_new = new_pairs.shape[0]
            self._append(
                new_pairs,
                np.zeros_like(sampled),
                sampled,
                np.full(n_new, self.reservoir.size, dtype=np.int64),
                np.full(n_new, self.n_rows, dtype=np.int64),
            )
        return [self._table(self._index[p], transpose=(i > j)) for p, (i, j) in zip(canon, pairs)]

    def table(self, i: int, j: int) -> PairTable:
        """The table of ``(i, j)`` (``card_i x card_j``); requests the pair if not tracked."""
        return self.request([(i, j)])[0]

    def _table(self, p: int, transpose: bool) -> PairTable:
        i, j = (int(v) for v in self._pairs[p])
        block = slice(self._offsets[p], self._offsets[p + 1])
        counts = (self._exact[block] + self._sampled[block]).reshape(self._cards[i], self._cards[j])
        exact_rows = self.n_rows - int(self._rows_before[p])
        sampled_rows = int(self._sampled_rows[p])
        missing = int(self._rows_before[p]) - sampled_rows
        if transpose:
            i, j, counts = j, i, counts.T.copy()
        return PairTable(i, j, counts, exact_rows + sampled_rows, sampled_rows, missing)

    def flat_tables(self, pairs=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Tables of many pairs at once, as flat arrays (for vectorised scoring).

        ``pairs`` is an ``(k, 2)`` array of pairs with ``i < j`` (untracked ones are requested
        first), or None for every tracked pair. Returns ``(pairs, counts, offsets, n_rows)``:
        pair ``p``'s row-major ``card_i x card_j`` table is ``counts[offsets[p]:offsets[p+1]]``
        and covers ``n_rows[p]`` rows (see :class:`PairTable`).
        """
        if pairs is None:
            idx = np.arange(self._pairs.shape[0], dtype=np.int64)
        else:
            pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
            if pairs.size and not bool((pairs[:, 0] < pairs[:, 1]).all()):
                raise StatsError("flat_tables takes pairs (i, j) with i < j")
            self.request(pairs.tolist())
            idx = np.array([self._index[p] for p in map(tuple, pairs.tolist())], dtype=np.int64)
        sel = self._pairs[idx]
        sizes = self._cards[sel[:, 0]] * self._cards[sel[:, 1]]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        flat = _flat_index(self._offsets, idx)
        counts = self._exact[flat] + self._sampled[flat]
        n_rows = self.n_rows - self._rows_before[idx] + self._sampled_rows[idx]
        return sel.copy(), counts, offsets, n_rows

    def is_tracked(self, i: int, j: int) -> bool:
        """Whether ``(i, j)`` has been requested (and is counted on every update)."""
        return self._canonical(i, j) in self._index

    @property
    def pairs(self) -> np.ndarray:
        """The tracked pairs ``(i, j)``, ``i < j``, in the order they were first requested."""
        return self._pairs.copy()

    @property
    def n_pairs_counted(self) -> int:
        """Number of pairs tracked."""
        return len(self._index)

    @property
    def fraction_counted(self) -> float:
        """Tracked pairs as a fraction of all ``n (n - 1) / 2`` pairs."""
        n = self.schema.n_vars
        return self.n_pairs_counted / (n * (n - 1) // 2) if n > 1 else 0.0

    # learning -----------------------------------------------------------------------------
    def update(self, data) -> "OnDemandPairCounts":
        """Count a batch: marginals, every tracked pair, and the reservoir."""
        rows = rows_of(data, self.schema)
        if self._pairs.shape[0]:
            count_pairs(
                rows,
                np.ascontiguousarray(self._pairs[:, 0]),
                np.ascontiguousarray(self._pairs[:, 1]),
                self._cards[self._pairs[:, 1]],
                self._offsets,
                self._exact,
            )
        self.marginals.update(Validated(rows, self.schema))
        self.reservoir.update(Validated(rows, self.schema))
        self.n_rows += rows.shape[0]
        return self

    def merge(self, other: "OnDemandPairCounts") -> "OnDemandPairCounts":
        """Fold ``other`` (a store over different rows) into this one, in place.

        Marginals add and the reservoirs merge into a uniform sample of all rows
        (:meth:`RowReservoir.merge`). A pair tracked by both stores adds both tables. A pair
        tracked by only one store is answered, for the other store's rows, from the other
        store's reservoir, exactly as if it had been requested from that store at the moment of
        the merge; those reservoir rows count in ``from_reservoir`` and the rows they do not
        cover in ``n_missing``. So pairs requested before either store saw a row stay exact.
        """
        check_mergeable(self, other, "reservoir_capacity")
        mine = {p: k for p, k in self._index.items() if p not in other._index}
        theirs = [p for p in other._index if p not in self._index]
        common = [p for p in self._index if p in other._index]
        # pairs only here: add other's reservoir counts for other's rows
        if mine:
            idx = np.array(list(mine.values()), dtype=np.int64)
            sampled, _ = self._count(other.reservoir.rows, self._pairs[idx])
            self._sampled[_flat_index(self._offsets, idx)] += sampled
            self._sampled_rows[idx] += other.reservoir.size
            self._rows_before[idx] += other.n_rows
        # pairs in both: add tables
        if common:
            idx_self = np.array([self._index[p] for p in common], dtype=np.int64)
            idx_other = np.array([other._index[p] for p in common], dtype=np.int64)
            flat_self = _flat_index(self._offsets, idx_self)
            flat_other = _flat_index(other._offsets, idx_other)
            self._exact[flat_self] += other._exact[flat_other]
            self._sampled[flat_self] += other._sampled[flat_other]
            self._sampled_rows[idx_self] += other._sampled_rows[idx_other]
            self._rows_before[idx_self] += other._rows_before[idx_other]
        # pairs only there: take other's table, add this store's reservoir counts for our rows
        if theirs:
            idx = np.array([other._index[p] for p in theirs], dtype=np.int64)
            flat = _flat_index(other._offsets, idx)
            sampled, _ = self._count(self.reservoir.rows, other._pairs[idx])
            self._append(
                other._pairs[idx],
                other._exact[flat],
                other._sampled[flat] + sampled,
                other._sampled_rows[idx] + self.reservoir.size,
                other._rows_before[idx] + self.n_rows,
            )
        self.marginals.merge(other.marginals)
        self.reservoir.merge(other.reservoir)
        self.n_rows += other.n_rows
        return self

    # serialisation ------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Lossless serialisation: marginals, reservoir (with its generator state), tables."""
        return pack(
            self,
            {"n_rows": self.n_rows, "reservoir_capacity": self.reservoir_capacity},
            {
                "pairs": self._pairs,
                "exact": self._exact,
                "sampled": self._sampled,
                "sampled_rows": self._sampled_rows,
                "rows_before": self._rows_before,
                "marginals": np.frombuffer(self.marginals.to_bytes(), dtype=np.uint8),
                "reservoir": np.frombuffer(self.reservoir.to_bytes(), dtype=np.uint8),
            },
        )

    @classmethod
    def from_bytes(cls, data) -> "OnDemandPairCounts":
        """Rebuild a store from :meth:`to_bytes` output; raises ``StatsFormatError`` if bad."""
        names = [
            "pairs",
            "exact",
            "sampled",
            "sampled_rows",
            "rows_before",
            "marginals",
            "reservoir",
        ]
        schema, meta, arrays = unpack(data, cls, names)
        n_rows, capacity = meta.get("n_rows"), meta.get("reservoir_capacity")
        expect(isinstance(n_rows, int) and n_rows >= 0, cls, f"n_rows {n_rows!r}")
        expect(isinstance(capacity, int) and capacity >= 1, cls, f"capacity {capacity!r}")
        n_rows, capacity = cast(int, n_rows), cast(int, capacity)  # checked above
        store = cls(schema, reservoir_capacity=capacity)
        marginals = MarginalCounts.from_bytes(arrays["marginals"].tobytes())
        reservoir = RowReservoir.from_bytes(arrays["reservoir"].tobytes())
        expect(
            marginals.schema == schema and reservoir.schema == schema,
            cls,
            "nested stores have another schema",
        )
        expect(
            marginals.n_rows == n_rows
            and reservoir.n_seen == n_rows
            and reservoir.capacity == capacity,
            cls,
            "nested stores disagree on row counts",
        )
        store.seed = reservoir.seed
        store.marginals, store.reservoir, store.n_rows = marginals, reservoir, n_rows
        pairs = arrays["pairs"]
        expect(
            pairs.dtype == np.int64 and pairs.ndim == 2 and pairs.shape[1] == 2,
            cls,
            f"pairs of shape {pairs.shape} / {pairs.dtype}",
        )
        n_pairs = pairs.shape[0]
        expect(
            bool(
                (pairs[:, 0] >= 0).all()
                and (pairs[:, 0] < pairs[:, 1]).all()
                and (pairs[:, 1] < schema.n_vars).all()
            ),
            cls,
            "pair indices out of range",
        )
        expect(len({tuple(p) for p in pairs.tolist()}) == n_pairs, cls, "duplicate pairs")
        size = int((store._cards[pairs[:, 0]] * store._cards[pairs[:, 1]]).sum())
        for name, length in [
            ("exact", size),
            ("sampled", size),
            ("sampled_rows", n_pairs),
            ("rows_before", n_pairs),
        ]:
            arr = arrays[name]
            expect(
                arr.dtype == np.int64 and arr.shape == (length,) and bool((arr >= 0).all()),
                cls,
                f"{name} of shape {arr.shape} / {arr.dtype}",
            )
        expect(
            bool(
                (arrays["sampled_rows"] <= arrays["rows_before"]).all()
                and (arrays["rows_before"] <= n_rows).all()
            ),
            cls,
            "row counts inconsistent",
        )
        store._append(
            pairs, arrays["exact"], arrays["sampled"], arrays["sampled_rows"], arrays["rows_before"]
        )
        return store

    def __repr__(self) -> str:
        return (
            f"OnDemandPairCounts(schema={self.schema!r}, "
            f"reservoir_capacity={self.reservoir_capacity}, seed={self.seed!r}, "
            f"n_rows={self.n_rows}, n_pairs_counted={self.n_pairs_counted})"
        )


def _flat_index(offsets: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Positions of the flat tables of pairs ``idx`` (concatenated, in order)."""
    starts = offsets[idx]
    lengths = offsets[idx + 1] - starts
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(ends[-1] if len(ends) else 0)
