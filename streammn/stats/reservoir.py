"""A fixed-size uniform sample of all rows seen: Vitter's algorithm R, vectorised per batch.

Algorithm R keeps the first ``k`` rows; row ``t`` (0-based, ``t >= k``) draws ``j`` uniformly
from ``0 .. t`` and, when ``j < k``, replaces slot ``j``. After ``n`` rows every ``k``-subset of
them is equally likely to be the sample. The draws never depend on the data or on each other, so
a whole batch's ``j`` are drawn in one call; when several rows of a batch pick the same slot the
last of them wins, exactly as in the one-row-at-a-time algorithm (same draws, same sample).
One draw per post-fill row, in row order, also means the sample does not depend on how the
stream is cut into batches (numpy's Generator draws an array of bounded integers element by
element; the tests check this).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from streammn.schema import MISSING, Schema
from streammn.stats.store import check_mergeable, expect, pack, rows_of, unpack
from streammn.errors import StatsError

_BIT_GENERATORS = {
    name: getattr(np.random, name) for name in ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")
}


class RowReservoir:
    """Uniform random sample of at most ``capacity`` rows of a stream (algorithm R).

    Parameters
    ----------
    schema : Schema
        The variables of the rows. Rows are validated against it.
    capacity : int, default 10000
        Rows kept. Until ``capacity`` rows have been seen the sample is all of them.
    seed : int, numpy.random.Generator or None, default None
        Source of randomness; the same seed and the same batches give the same sample. The
        generator's state is part of :meth:`to_bytes`, so a restored reservoir continues
        exactly as the original would have.

    Attributes
    ----------
    n_seen : int
        Rows offered to the reservoir so far (the population the sample is drawn from).
    """

    def __init__(self, schema: Schema, capacity: int = 10000, seed=None):
        if not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise StatsError(f"capacity must be a positive integer, got {capacity!r}")
        self.schema = schema
        self.capacity = int(capacity)
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._sample = np.empty((self.capacity, schema.n_vars), dtype=np.uint8)
        self.n_seen = 0

    @property
    def size(self) -> int:
        """Rows currently in the sample: ``min(n_seen, capacity)``."""
        return min(self.n_seen, self.capacity)

    @property
    def rows(self) -> np.ndarray:
        """The sample as a read-only ``(size, n_vars)`` uint8 view, in slot order.

        The view follows later updates; copy it to keep a snapshot.
        """
        view = self._sample[: self.size]
        view.flags.writeable = False
        return view

    def update(self, data) -> "RowReservoir":
        """Offer the rows of a :class:`streammn.connectors.Batch` or a 2-D block of rows, in
        order."""
        rows = rows_of(data, self.schema)
        return self.offer(rows, np.arange(rows.shape[0]))

    def offer(self, rows: np.ndarray, which: np.ndarray) -> "RowReservoir":
        """Offer ``rows[which]`` (validated rows, ``which`` an index array), in that order,
        copying only the rows that enter the sample: the same sample as ``update`` of the
        selected rows, without making them a block first."""
        n = which.shape[0]
        fill = min(max(self.capacity - self.n_seen, 0), n)
        self._sample[self.n_seen : self.n_seen + fill] = rows[which[:fill]]
        if fill < n:
            t = np.arange(self.n_seen + fill, self.n_seen + n, dtype=np.int64)
            slot = self._rng.integers(0, t + 1)  # uniform in 0..t for every row t
            hit = np.flatnonzero(slot < self.capacity)
            # the last row to pick a slot is the one that stays in it
            slots_rev, hit_rev = slot[hit][::-1], hit[::-1]
            slots, first_rev = np.unique(slots_rev, return_index=True)
            self._sample[slots] = rows[which[fill:][hit_rev[first_rev]]]
        self.n_seen += n
        return self

    def merge(self, other: "RowReservoir") -> "RowReservoir":
        """Replace this sample by a uniform sample of the union of both populations (in place).

        Both samples are uniform subsets of disjoint populations ``A`` (``n_a`` rows) and ``B``
        (``n_b``). A uniform ``k``-subset of ``A + B`` (``k = min(capacity, n_a + n_b)``) takes
        ``m_a`` of its rows from ``A``, where ``m_a`` is hypergeometric (``k`` draws without
        replacement from ``n_a`` good and ``n_b`` bad items), and given ``m_a`` those rows form a
        uniform ``m_a``-subset of ``A``. We draw ``m_a`` by sampling ``k`` distinct positions of
        ``0 .. n_a+n_b-1`` and counting those below ``n_a`` (exact for any population size),
        then take uniform subsets of the right sizes of the two samples: a uniform subset of a
        uniform subset of ``A`` is a uniform subset of ``A``. ``m_a <= min(k, n_a)`` never
        exceeds the rows ``A``'s sample holds, because both reservoirs have the same capacity.
        The merged reservoir has seen ``n_a + n_b`` rows and continues with algorithm R; the
        randomness comes from this reservoir's generator.
        """
        check_mergeable(self, other, "capacity")
        total = self.n_seen + other.n_seen
        k = min(self.capacity, total)
        if total:
            m_self = int((self._rng.choice(total, size=k, replace=False) < self.n_seen).sum())
            keep_self = self._rng.choice(self.size, size=m_self, replace=False)
            keep_other = self._rng.choice(other.size, size=k - m_self, replace=False)
            merged = np.concatenate([self._sample[keep_self], other._sample[keep_other]])
            self._sample[:k] = merged
        self.n_seen = total
        return self

    # serialisation ------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Lossless serialisation, including the generator state (resume = never stopped)."""
        state = jsonable(self._rng.bit_generator.state)
        return pack(
            self,
            {
                "capacity": self.capacity,
                "n_seen": self.n_seen,
                "seed": int(self.seed) if isinstance(self.seed, (int, np.integer)) else None,
                "rng_state": state,
            },
            {"sample": self._sample[: self.size]},
        )

    @classmethod
    def from_bytes(cls, data) -> "RowReservoir":
        """Rebuild a reservoir from :meth:`to_bytes` output; raises ``StatsFormatError`` if bad."""
        schema, meta, arrays = unpack(data, cls, ["sample"])
        capacity, n_seen, seed = meta.get("capacity"), meta.get("n_seen"), meta.get("seed")
        expect(isinstance(capacity, int) and capacity >= 1, cls, f"capacity {capacity!r}")
        expect(isinstance(n_seen, int) and n_seen >= 0, cls, f"n_seen {n_seen!r}")
        expect(seed is None or isinstance(seed, int), cls, f"seed {seed!r}")
        capacity, n_seen = cast(int, capacity), cast(int, n_seen)  # checked above
        store = cls(schema, capacity=capacity, seed=seed)
        store._rng = generator_from_state(meta.get("rng_state"), cls)
        sample = arrays["sample"]
        expect(
            sample.dtype == np.uint8 and sample.shape == (min(n_seen, capacity), schema.n_vars),
            cls,
            f"sample of shape {sample.shape} / {sample.dtype}",
        )
        states = np.where(sample == MISSING, 0, sample) if schema.missing else sample
        expect(
            sample.shape[0] == 0 or bool((states.max(axis=0) < schema.cardinalities).all()),
            cls,
            "sample values out of range of the schema",
        )
        store._sample[: sample.shape[0]] = sample
        store.n_seen = n_seen
        return store

    def __repr__(self) -> str:
        return (
            f"RowReservoir(schema={self.schema!r}, capacity={self.capacity}, "
            f"seed={self.seed!r}, n_seen={self.n_seen})"
        )


def jsonable(obj):
    """A bit generator's state with arrays turned into tagged lists (JSON-serialisable)."""
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": obj.tolist(), "dtype": obj.dtype.str}
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def _from_jsonable(obj):
    if isinstance(obj, dict):
        if set(obj) == {"__ndarray__", "dtype"}:
            return np.array(obj["__ndarray__"], dtype=np.dtype(obj["dtype"]))
        return {k: _from_jsonable(v) for k, v in obj.items()}
    return obj


def generator_from_state(state, cls) -> np.random.Generator:
    """A numpy Generator rebuilt from a state saved by :func:`jsonable`; a missing, unknown or
    rejected state raises :class:`StatsFormatError` for ``cls``."""
    expect(
        isinstance(state, dict) and state.get("bit_generator") in _BIT_GENERATORS,
        cls,
        "missing or unknown random generator state",
    )
    bit_generator = _BIT_GENERATORS[state["bit_generator"]]()
    try:
        bit_generator.state = _from_jsonable(state)
    except (ValueError, TypeError, KeyError) as e:
        expect(False, cls, f"random generator state rejected ({e})")
    return np.random.Generator(bit_generator)
