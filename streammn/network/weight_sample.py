"""The rows a learner's published weights are fitted and judged on: a uniform sample of its
stream, split by row index into training rows and held-out rows.

What. :class:`WeightSample` keeps a uniform sample of every (complete) row a learner has seen,
at most ``capacity`` rows, with each row's index in the stream. Row ``t`` (0-based) is a
held-out row when a hash of ``t`` falls in one bucket of ``HELD_OUT_EVERY``, so which rows are
held out depends on their place in the stream only, never on how it was cut into batches: the
held-out share of the sample is a uniform sample of the held-out rows of the stream, the rest a
uniform sample of the training rows. With a validation file as the held-out set, every sampled
row is a training row (:attr:`WeightSample.rows`). The capacity follows ``memory_mb``, the
budget of the weight step (this sample and the reach lists of a fit,
:mod:`streammn.network.published`): ``MEMORY_MB`` by default, an eighth of its own
``memory_mb`` up to that in DTSL (:mod:`streammn.trees.budget`).

Why this way. The sample sits on every learner's hot path (DTSL learns 1.7M rows/s), so it
must cost next to nothing per row. Vitter's algorithm R draws a random number for every row;
Li's algorithm L ("Reservoir-sampling algorithms of time complexity O(n(1 + log(N/n)))", 1994)
draws the gap to the next row that enters the sample instead, so a batch costs a few
operations per row *entering* the sample: on a 1M-row stream into 25,000 slots about 93,000
rows in all, none once the stream is long. The kernel (:func:`_offer`) walks only those rows;
its random numbers come from a splitmix64 generator whose state is one integer, saved with
the sample, so a restored sample continues exactly as the original would have, and the sample
never depends on the batch boundaries (one draw sequence, in stream order). Holding out by a
hash of the index rather than a second reservoir means no per-row work for the split at all:
the hash is taken of the sample's indices when the rows are asked for.

In missing mode only complete rows are offered: a pseudo-likelihood term reads the whole
Markov blanket of its variable, so a row with a hole gives no exact term for its neighbours.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from streammn.errors import WeightStateError, WeightsError
from streammn.packed_state import pack_state, unpack_state
from streammn.schema import MISSING, Schema

MEMORY_MB = 64.0  # the weight step's budget: the sample and the reach lists of a fit
SAMPLE_ROWS = 20_000  # training rows kept, at most (fewer when the budget says so)
HELD_OUT_EVERY = 5  # one row in five is held out (when no validation file is given)
SAMPLE_SHARE = 8  # the sample takes at most 1/8 of the budget, the reach lists the rest
INDEX_BYTES = 8  # each kept row's stream index
STATE_FORMAT = "streammn-weight-sample-2"
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MAX_SKIP = 1 << 62


def held_out_index(index: np.ndarray) -> np.ndarray:
    """Which stream rows ``index`` (int64) are held out: those whose index, hashed
    (splitmix64's finaliser), falls in one bucket of ``HELD_OUT_EVERY``."""
    x = index.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x % np.uint64(HELD_OUT_EVERY) == 0


def held_out_mask(first: int, n: int) -> np.ndarray:
    """Which of the stream rows ``first .. first + n - 1`` are held out."""
    return held_out_index(np.arange(first, first + n, dtype=np.int64))


def sample_rows(n_vars: int, memory_mb: float) -> int:
    """Training rows the sample keeps under a budget of ``memory_mb``."""
    share = memory_mb * 2**20 / SAMPLE_SHARE
    per_row = n_vars + INDEX_BYTES
    return int(max(min(SAMPLE_ROWS, share * (HELD_OUT_EVERY - 1) / HELD_OUT_EVERY / per_row), 1))


def sample_capacity(n_vars: int, memory_mb: float) -> int:
    """Rows the sample keeps under a budget of ``memory_mb``: its training rows and the
    held-out rows that go with them."""
    train = sample_rows(n_vars, memory_mb)
    return train + max(train // (HELD_OUT_EVERY - 1), 1)


class WeightSample:
    """A uniform sample of a stream's rows: ``train`` to fit the published weights on,
    ``held_out`` to judge them (module docstring).

    Parameters
    ----------
    schema : Schema
        The variables (a growing schema's ceiling: the sample never grows).
    memory_mb : float
        Budget of the weight step; the sample takes at most ``1/SAMPLE_SHARE`` of it.
    seed : int
        Seed of the sample's random numbers.
    """

    def __init__(self, schema: Schema, memory_mb: float = MEMORY_MB, seed: int = 0):
        if not memory_mb > 0:
            raise WeightsError(f"memory_mb must be positive, got {memory_mb}")
        self.schema = schema
        self.memory_mb = float(memory_mb)
        self.capacity = sample_capacity(schema.n_vars, memory_mb)
        self._rows = np.zeros((self.capacity, schema.n_vars), dtype=np.uint8)
        self._index = np.zeros(self.capacity, dtype=np.int64)
        self._counters = np.array([0, -1], dtype=np.int64)  # rows offered, next row to enter
        self._w = np.zeros(1)  # algorithm L's running maximum key
        self._rng = np.array([seed], dtype=np.uint64)

    @property
    def n_seen(self) -> int:
        """Rows offered so far (complete rows, in missing mode)."""
        return int(self._counters[0])

    @property
    def size(self) -> int:
        return min(self.n_seen, self.capacity)

    def _held(self) -> np.ndarray:
        return held_out_index(self._index[: self.size])

    @property
    def held_out_slots(self) -> np.ndarray:
        """Which rows of :attr:`rows` are held out (a boolean mask)."""
        return self._held()

    @property
    def rows(self) -> np.ndarray:
        """Every sampled row (a copy, in slot order): the training rows when a validation
        set judges the weights."""
        return self._rows[: self.size].copy()

    @property
    def train(self) -> np.ndarray:
        """The sampled training rows (a copy, in slot order)."""
        return self._rows[: self.size][~self._held()]

    @property
    def held_out(self) -> np.ndarray:
        """The sampled held-out rows (a copy, in slot order)."""
        return self._rows[: self.size][self._held()]

    @property
    def nbytes(self) -> int:
        """The memory the sample takes (allocated up front)."""
        return self._rows.nbytes + self._index.nbytes

    def update(self, rows: np.ndarray, first: int) -> None:
        """Offer rows ``first .. first + len(rows) - 1`` of the stream (validated rows: they
        are not checked again, and only those that enter the sample are copied)."""
        if self.schema.missing:
            which = np.flatnonzero((rows != MISSING).all(axis=1))
        else:
            which = np.arange(rows.shape[0], dtype=np.int64)
        _offer(
            self._rows,
            self._index,
            np.ascontiguousarray(rows),
            which,
            int(first),
            self._counters,
            self._w,
            self._rng,
        )

    def to_bytes(self) -> bytes:
        meta = {
            "format": STATE_FORMAT,
            "schema": self.schema.to_dict(),
            "memory_mb": self.memory_mb,
            "n_seen": self.n_seen,
            "next": int(self._counters[1]),
            "w": float(self._w[0]),
        }
        n = self.size
        return pack_state(
            meta, {"rows": self._rows[:n], "index": self._index[:n], "rng": self._rng}
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> "WeightSample":
        try:
            meta, arrays = unpack_state(data)
            if meta.get("format") != STATE_FORMAT:
                raise ValueError(f"format {meta.get('format')!r}, not {STATE_FORMAT!r}")
            sample = cls(Schema.from_dict(meta["schema"]), meta["memory_mb"])
            n = min(int(meta["n_seen"]), sample.capacity)
            rows, index, rng = arrays["rows"], arrays["index"], arrays["rng"]
            if rows.shape != (n, sample.schema.n_vars) or rows.dtype != np.uint8:
                raise ValueError(f"rows of shape {rows.shape} / {rows.dtype}")
            if index.shape != (n,) or rng.shape != (1,) or rng.dtype != np.uint64:
                raise ValueError("index or generator state of the wrong shape")
            values = np.where(rows == MISSING, 0, rows) if sample.schema.missing else rows
            if n and not (values.max(axis=0) < sample.schema.cardinalities).all():
                raise ValueError("sample values out of range of the schema")
        except (ValueError, OSError, KeyError, TypeError) as e:
            raise WeightStateError(f"not a weight sample: {e}") from None
        sample._rows[:n], sample._index[:n], sample._rng[:] = rows, index, rng
        sample._counters[:] = (int(meta["n_seen"]), int(meta["next"]))
        sample._w[0] = float(meta["w"])
        return sample

    def __repr__(self) -> str:
        return f"WeightSample({self.schema!r}, capacity={self.capacity}, n_seen={self.n_seen})"


def list_bytes(sample: WeightSample) -> int:
    """The reach lists' share of the budget: what the sample leaves."""
    return max(int(sample.memory_mb * 2**20) - sample.nbytes, 0)


@numba.njit(cache=True)
def _uniform(rng):
    """A float in (0, 1) from the splitmix64 generator whose state is ``rng[0]``."""
    rng[0] += _GOLDEN
    z = rng[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return ((z >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True)
def _gap(w, rng):
    """Rows passed over before the next one enters (algorithm L's geometric jump)."""
    jump = math.floor(math.log(_uniform(rng)) / math.log1p(-w)) if w < 1.0 else 0.0
    return np.int64(min(jump, _MAX_SKIP))


@numba.njit(cache=True, inline="always")
def _copy_row(sample, slot, rows, r):
    for c in range(rows.shape[1]):  # a plain loop: numba's row-slice copy costs 4-14x more
        sample[slot, c] = rows[r, c]


@numba.njit(cache=True)
def _offer(sample, index, rows, which, first, counters, w, rng):
    """Algorithm L over ``rows[which]`` (stream rows ``first + which``): fill the free slots,
    then copy in only the rows the jumps land on, each into a uniformly drawn slot."""
    k = sample.shape[0]
    seen, j, n = counters[0], 0, which.shape[0]
    while seen < k and j < n:  # the first k rows fill the sample
        _copy_row(sample, seen, rows, which[j])
        index[seen] = first + which[j]
        seen += 1
        j += 1
        if seen == k:
            w[0] = math.exp(math.log(_uniform(rng)) / k)
            counters[1] = seen + _gap(w[0], rng)
    base = seen - j  # the population number of which[0]
    end = base + n
    if seen >= k:
        nxt = counters[1]
        while nxt < end:
            r = which[nxt - base]
            slot = min(np.int64(_uniform(rng) * k), k - 1)
            _copy_row(sample, slot, rows, r)
            index[slot] = first + r
            w[0] *= math.exp(math.log(_uniform(rng)) / k)
            nxt += _gap(w[0], rng) + 1
        counters[1] = nxt
    counters[0] = end
