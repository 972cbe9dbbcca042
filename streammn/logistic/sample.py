"""A mergeable uniform sample of a finite source's rows: the ``k`` rows of smallest priority, the
priority a seeded hash of the row's stream position.

What. Row ``t`` (0-based position in the source) gets the priority ``h(t)``: splitmix64's
finaliser of ``t`` mixed with a seed, a bijection of the 64-bit integers, so no two rows share
one. :class:`PositionSample` keeps the ``capacity`` rows of smallest priority among those offered
(a bottom-k sample), in position order. Which rows those are is a function of the positions
alone, so the sample is uniform without replacement (the hash spreads the priorities like
independent draws), does not depend on how the rows were cut into batches, and two samples of
disjoint parts of a source merge (:meth:`PositionSample.merge`: the ``capacity`` smallest of
both) to exactly the sample one process reading the whole source keeps. That is what exact
DTSL's regressions need when the passes are made elsewhere (``count_pass``, e.g.
:class:`~streammn.connectors.distributed.DaskPasses`): every Dask task samples its own
partitions, the samples merge in the cluster's tree reduction, and the batch L1 fit on the
merged sample runs in the client (:mod:`streammn.logistic.conditionals`), the model byte for
byte the one-process one. Held-out rows are chosen by another hash of the position
(:func:`~streammn.network.weight_sample.held_out_index`), as in the weight sample.

Why not algorithm L. The one-pass learner keeps its reservoir (algorithm L,
:class:`~streammn.network.weight_sample.WeightSample`): it draws random numbers in stream order,
one generator state, so two workers cannot each sample half a stream and agree with it. A stream
read in order never needs a merge, and keeping algorithm L there keeps every saved one-pass state
resuming as it did and every one-pass model as it was. Exact mode reads a finite file whose
passes may be made elsewhere, so it uses this sample; a source within the capacity is held whole
by both, in position order, and gives the same fit. The cost: one hash and a comparison per row
(:func:`_candidates`, a numba kernel over the batch), the rows under the current ``k``-th
priority merged in; on a long source few rows qualify.

Forgetting. With a ``half_life`` (rows) the sample leans toward recent rows as the learner's
counts do (:mod:`streammn.trees.decay`): row ``t`` weighs ``2 ** (t / half_life)`` and its
priority is ``log(-log u_t) - t ln 2 / half_life``, ``u_t`` the hash as a number in (0, 1):
Efraimidis and Spirakis's weighted-sampling key (``u ** (1 / weight)``, largest kept) in a form
that does not overflow, the ``k`` smallest kept: taken in priority order, each row of the sample
is drawn from those not drawn yet with a chance proportional to its weight. A stream that
changed is then judged on rows mostly of the last few half-lives (at 1,000 rows kept with a
half-life of 5,000, 90% of them are at most 3,500 rows old), and the priorities are still
functions of the positions, so the sample still merges, resumes and ignores batch cuts.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from streammn.errors import SettingsError, StatsMergeError, WeightStateError
from streammn.network.weight_sample import held_out_index
from streammn.packed_state import pack_state, unpack_state
from streammn.schema import Schema

STATE_FORMAT = "streammn-position-sample-1"
_NONE = np.uint64(0xFFFFFFFFFFFFFFFF)  # the threshold while the sample is not full


@numba.njit(cache=True, inline="always")
def _mix(x):
    """splitmix64's finaliser: a bijection of the 64-bit integers that spreads nearby ones."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@numba.njit(cache=True)
def _priorities(index, key):
    """The priorities of the positions ``index`` under ``key``."""
    out = np.empty(index.size, dtype=np.uint64)
    for r in range(index.size):
        out[r] = _mix(np.uint64(index[r]) ^ key)
    return out


@numba.njit(cache=True)
def _candidates(first, n, key, threshold):
    """The offsets ``r`` of positions ``first + r`` whose priority is below ``threshold``, and
    their priorities: the only rows of a batch that can enter the sample."""
    which = np.empty(n, dtype=np.int64)
    priority = np.empty(n, dtype=np.uint64)
    count = 0
    for r in range(n):
        p = _mix(np.uint64(first + r) ^ key)
        if p < threshold:
            which[count] = r
            priority[count] = p
            count += 1
    return which[:count], priority[:count]


@numba.njit(cache=True, inline="always")
def _decayed(h, t, rate):
    """The forgetting priority of position ``t`` with hash ``h``: ``log(-log u) - rate t``,
    ``u`` the hash's top 53 bits as a number in (0, 1)."""
    u = (np.float64(h >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)
    return math.log(-math.log(u)) - rate * t


@numba.njit(cache=True)
def _decayed_priorities(index, key, rate):
    """The forgetting priorities of the positions ``index``."""
    out = np.empty(index.size, dtype=np.float64)
    for r in range(index.size):
        out[r] = _decayed(_mix(np.uint64(index[r]) ^ key), index[r], rate)
    return out


@numba.njit(cache=True)
def _decayed_candidates(first, n, key, threshold, rate):
    """:func:`_candidates` with the forgetting priorities."""
    which = np.empty(n, dtype=np.int64)
    priority = np.empty(n, dtype=np.float64)
    count = 0
    for r in range(n):
        p = _decayed(_mix(np.uint64(first + r) ^ key), first + r, rate)
        if p < threshold:
            which[count] = r
            priority[count] = p
            count += 1
    return which[:count], priority[:count]


def _key(seed: int) -> np.uint64:
    """The 64-bit key the positions are mixed with (itself mixed: nearby seeds differ)."""
    return _mix(np.uint64(seed & 0xFFFFFFFFFFFFFFFF) ^ np.uint64(0x9E3779B97F4A7C15))


class PositionSample:
    """The ``capacity`` rows of smallest position priority among those offered (module
    docstring); the interface of :class:`~streammn.network.weight_sample.WeightSample` that
    the logistic conditionals read, plus :meth:`merge`.

    ``half_life``: rows over which a row's weight halves as it ages (None: a uniform sample).

    Attributes
    ----------
    n_seen : rows offered.
    index : the kept rows' stream positions, ascending.
    """

    def __init__(
        self, schema: Schema, capacity: int, seed: int = 0, half_life: float | None = None
    ):
        if capacity < 1:
            raise SettingsError(f"a position sample needs a capacity of at least 1, got {capacity}")
        if half_life is not None and not half_life > 0:
            raise SettingsError(f"a position sample's half_life must be positive, got {half_life}")
        self.schema = schema
        self.capacity = int(capacity)
        self.seed = int(seed)
        self.half_life = None if half_life is None else float(half_life)
        self._key = _key(self.seed)
        self._rows = np.zeros((0, schema.n_vars), dtype=np.uint8)
        self.index = np.zeros(0, dtype=np.int64)
        self._priority = np.zeros(0, dtype=np.uint64 if half_life is None else np.float64)
        self.n_seen = 0

    @property
    def _rate(self) -> float:
        assert self.half_life is not None  # asked with forgetting only
        return math.log(2.0) / self.half_life

    @property
    def size(self) -> int:
        return self.index.size

    @property
    def rows(self) -> np.ndarray:
        """The kept rows (a copy), in position order."""
        return self._rows.copy()

    @property
    def held_out_slots(self) -> np.ndarray:
        """Which of :attr:`rows` are held out (by a hash of their position)."""
        return held_out_index(self.index)

    def update(self, rows: np.ndarray, first: int) -> None:
        """Offer validated ``rows``, stream positions ``first .. first + len(rows) - 1``."""
        full = self.size == self.capacity
        if self.half_life is None:
            threshold = self._priority.max() if full else _NONE
            which, priority = _candidates(int(first), rows.shape[0], self._key, threshold)
        else:
            threshold = self._priority.max() if full else np.inf
            which, priority = _decayed_candidates(
                int(first), rows.shape[0], self._key, threshold, self._rate
            )
        self.n_seen += rows.shape[0]
        if which.size:
            self._keep(rows[which], first + which, priority)

    def merge(self, other: "PositionSample") -> "PositionSample":
        """Add the rows ``other`` sampled from other positions of the same source (the same
        seed and capacity); the result is the sample of all those positions. Returns self."""
        settings = ("capacity", "seed", "half_life", "schema")
        if any(getattr(other, name) != getattr(self, name) for name in settings):
            raise StatsMergeError("position samples of other settings or schemas do not merge")
        if np.isin(other.index, self.index).any():
            raise StatsMergeError("position samples of overlapping rows do not merge")
        self.n_seen += other.n_seen
        if other.size:
            self._keep(other._rows, other.index, other._priority)
        return self

    def _keep(self, rows: np.ndarray, index: np.ndarray, priority: np.ndarray) -> None:
        """The ``capacity`` smallest priorities of the kept rows and these, in position order."""
        all_rows = np.concatenate([self._rows, rows])
        all_index = np.concatenate([self.index, index])
        all_priority = np.concatenate([self._priority, priority])
        if all_index.size > self.capacity:  # priorities are distinct (a bijection)
            kept = np.argpartition(all_priority, self.capacity - 1)[: self.capacity]
        else:
            kept = np.arange(all_index.size)
        kept = kept[np.argsort(all_index[kept], kind="stable")]
        self._rows = np.ascontiguousarray(all_rows[kept])
        self.index, self._priority = all_index[kept], all_priority[kept]

    @property
    def nbytes(self) -> int:
        """The memory the kept rows take (with their positions and priorities)."""
        return self._rows.nbytes + self.index.nbytes + self._priority.nbytes

    # state ----------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        meta = {
            "format": STATE_FORMAT,
            "schema": self.schema.to_dict(),
            "capacity": self.capacity,
            "seed": self.seed,
            "half_life": self.half_life,
            "n_seen": self.n_seen,
        }
        return pack_state(meta, {"rows": self._rows, "index": self.index})

    @classmethod
    def from_bytes(cls, data: bytes) -> "PositionSample":
        """The sample :meth:`to_bytes` saved (:class:`~streammn.errors.WeightStateError`
        naming what is wrong otherwise); the priorities are recomputed from the positions."""
        try:
            meta, arrays = unpack_state(data)
            if meta.get("format") != STATE_FORMAT:
                raise ValueError(f"format {meta.get('format')!r}, not {STATE_FORMAT!r}")
            half_life = meta.get("half_life")
            sample = cls(
                Schema.from_dict(meta["schema"]),
                int(meta["capacity"]),
                int(meta["seed"]),
                None if half_life is None else float(half_life),
            )
            rows, index = arrays["rows"], arrays["index"]
            n = index.shape[0] if index.ndim == 1 else -1
            if n > sample.capacity or rows.shape != (n, sample.schema.n_vars):
                raise ValueError(f"rows of shape {rows.shape} for positions of {index.shape}")
            if rows.dtype != np.uint8 or index.dtype != np.int64:
                raise ValueError(f"rows of {rows.dtype} or positions of {index.dtype}")
            if n and not (np.diff(index) > 0).all():
                raise ValueError("positions not ascending")
            if n and not (rows.max(axis=0) < sample.schema.cardinalities).all():
                raise ValueError("sample values out of range of the schema")
            if int(meta["n_seen"]) < n:
                raise ValueError(f"{n} rows kept of {meta['n_seen']} offered")
        except (ValueError, OSError, KeyError, TypeError) as e:
            raise WeightStateError(f"not a position sample: {e}") from None
        sample._rows, sample.index = np.ascontiguousarray(rows), np.array(index)
        if sample.half_life is None:
            sample._priority = _priorities(sample.index, sample._key)
        else:
            sample._priority = _decayed_priorities(sample.index, sample._key, sample._rate)
        sample.n_seen = int(meta["n_seen"])
        return sample

    def __repr__(self) -> str:
        return f"PositionSample({self.schema!r}, capacity={self.capacity}, n_seen={self.n_seen})"
