"""Counts of distinct row patterns: the store that answers conjunctive count queries.

Query. ``table(A, B, context)`` = the number of rows with ``X_A = a``, ``X_B = b`` and
``X_W = x_W`` for every ``(a, b)``, for small variable sets ``A``, ``B`` and any context
``x_W`` (a dict ``{variable: value}``). Context-specific independence tests (CSGS, Edera et al.
2014) ask exactly this, for thousands of contexts, and their canonical assignments are the
distinct rows themselves.

Why distinct-row counts and not an AD-tree. An AD-tree (Moore & Lee 1998, what the CSGS authors
use) caches counts of every conjunction, which makes one query fast but costs memory that grows
with the number of conjunctions, has to be rebuilt (or carefully re-balanced) to follow a
stream, and has no cheap merge. The multiset of distinct rows is the whole sufficient statistic
of every conjunctive query: a query is one linear scan over the ``m`` distinct patterns (the
cost model of the paper, Section 3.3: "linear in the number of unique examples"), the list of
patterns *is* the set of canonical assignments CSGS needs, an update is one hash insert per row,
a merge adds counts pattern by pattern, and the state is two flat arrays that numba kernels (the
CSGS Grow-Shrink kernel) scan without conversion. Distinct rows are few where CSGS is affordable
at all (its test count is linear in ``m``): 2,671 for nltcs' 16,181 training rows.

Wide or high-entropy data. With ``max_patterns`` distinct patterns counted, the first row that
would add one more switches the store to *sampled* mode: a uniform sample of ``max_patterns``
rows is drawn without replacement from the exact multiset counted so far, and from then on a
:class:`RowReservoir` (algorithm R) keeps it uniform over the whole stream. Queries are then
answered from the sample (``exact`` is False; ``n_rows`` is the sample size, ``n_seen`` the
rows seen). The switch happens at that exact row, not at a batch boundary, so the state never
depends on how the stream is cut.

Memory bound. Exact mode: ``n + 16`` bytes per pattern slot (pattern, count, hash) and two
8-byte hash-index slots per pattern slot (load factor <= 1/2); capacity doubles, so there are
fewer than ``2 m`` pattern slots for ``m`` patterns: at most ``m (2 n + 64)`` bytes with
``m <= max_patterns``, 19 MB for the default 200,000 patterns of 16 variables. Sampled mode:
``max_patterns * n`` bytes of sample plus at most that again for the distinct rows of the sample
(computed when queried).

Rows are validated against the schema (:func:`streammn.stats.store.rows_of`); patterns are kept
in order of first occurrence, which depends only on the sequence of rows.
"""

from __future__ import annotations

from typing import cast

import numba as nb
import numpy as np

from streammn.features.grouping import key_hash, same_key
from streammn.schema import Schema
from streammn.stats.reservoir import RowReservoir, generator_from_state, jsonable
from streammn.stats.store import check_mergeable, expect, pack, rows_of, unpack
from streammn.errors import StatsError, StatsIndexError

DEFAULT_MAX_PATTERNS = 200_000
_DONE, _GROW, _FULL = 0, 1, 2


@nb.njit(cache=True)
def _insert(rows, weights, start, patterns, counts, hashes, slots, n_patterns, max_patterns):
    """Add ``rows[start:]`` (row ``r`` with multiplicity ``weights[r]``, or 1 when ``weights``
    is empty) into the pattern table.

    Returns ``(status, row, n_patterns)``: ``_DONE``; ``_GROW`` when row ``row`` needs a larger
    table (nothing of it counted yet); ``_FULL`` when row ``row`` is a new pattern and
    ``max_patterns`` are already stored (nothing of it counted). The table is the one of
    :mod:`streammn.features.grouping` (its hash and key comparison), kept from call to call:
    ``slots`` indexes the patterns by ``hashes``.
    """
    n_rows = rows.shape[0]
    mask = np.uint64(slots.shape[0] - 1)
    for r in range(start, n_rows):
        w = weights[r] if weights.shape[0] else 1
        h = key_hash(rows[r])
        s = h & mask
        while True:
            e = slots[s]
            if e < 0:
                if n_patterns >= max_patterns:
                    return _FULL, r, n_patterns
                if n_patterns >= patterns.shape[0] or 2 * (n_patterns + 1) > slots.shape[0]:
                    return _GROW, r, n_patterns
                patterns[n_patterns] = rows[r]
                counts[n_patterns] = w
                hashes[n_patterns] = h
                slots[s] = n_patterns
                n_patterns += 1
                break
            if hashes[e] == h and same_key(patterns[e], rows[r]):
                counts[e] += w
                break
            s = (s + np.uint64(1)) & mask
    return _DONE, n_rows, n_patterns


@nb.njit(cache=True)
def _reindex(hashes, n_patterns, size):
    slots = np.full(size, -1, dtype=np.int64)
    mask = np.uint64(size - 1)
    for e in range(n_patterns):
        s = hashes[e] & mask
        while slots[s] >= 0:
            s = (s + np.uint64(1)) & mask
        slots[s] = e
    return slots


@nb.njit(cache=True)
def conjunctive_table(patterns, counts, a_vars, b_vars, radix, w_vars, w_vals, out):
    """``out[flat(x_A, x_B)] += count`` for every pattern with ``x_W = w_vals``.

    ``flat`` is the row-major index over ``A`` then ``B``; ``radix[k]`` is the stride of the
    ``k``-th variable of ``A + B``.
    """
    na = a_vars.shape[0]
    for p in range(patterns.shape[0]):
        match = True
        for k in range(w_vars.shape[0]):
            if patterns[p, w_vars[k]] != w_vals[k]:
                match = False
                break
        if not match:
            continue
        idx = 0
        for k in range(na):
            idx += patterns[p, a_vars[k]] * radix[k]
        for k in range(b_vars.shape[0]):
            idx += patterns[p, b_vars[k]] * radix[na + k]
        out[idx] += counts[p]


class PatternCounts:
    """Exact counts of the distinct rows of a stream, with a uniform-sample fallback.

    Parameters
    ----------
    schema : Schema
        The variables. Rows are validated against it.
    max_patterns : int, default 200000
        Most distinct patterns counted exactly; beyond it the store keeps a uniform sample of
        this many rows (see the module notes). Bounds memory.
    seed : int or None, default 0
        Randomness of the switch to sampled mode and of the sample itself.

    Attributes
    ----------
    n_seen : int
        Rows counted (exact mode) or offered to the sample (sampled mode).
    exact : bool
        True while every distinct pattern is counted exactly.

    Examples
    --------
    >>> from streammn import Schema
    >>> s = PatternCounts(Schema.binary(3))
    >>> _ = s.update([[0, 1, 1], [1, 1, 0], [0, 1, 1], [0, 0, 1]])
    >>> s.n_patterns, s.table([0], [1], {2: 1}).tolist()
    (3, [[1, 2], [0, 0]])
    """

    def __init__(self, schema: Schema, max_patterns: int = DEFAULT_MAX_PATTERNS, seed=0):
        if not isinstance(max_patterns, (int, np.integer)) or max_patterns < 1:
            raise StatsError(f"max_patterns must be a positive integer, got {max_patterns!r}")
        if seed is not None and not isinstance(seed, (int, np.integer)):
            raise StatsError(f"seed must be an integer or None, got {seed!r}")
        self.schema = schema
        self.max_patterns = int(max_patterns)
        self.seed = None if seed is None else int(seed)
        self._rng = np.random.default_rng(seed)
        self._clear(16)
        self.n_seen = 0
        self.reservoir: RowReservoir | None = None
        self._summary = None  # (patterns, counts) of the sample, cached in sampled mode

    def _clear(self, size: int) -> None:
        n = self.schema.n_vars
        self._patterns = np.empty((size, n), dtype=np.uint8)
        self._counts = np.zeros(size, dtype=np.int64)
        self._hashes = np.zeros(size, dtype=np.uint64)
        self._slots = np.full(2 * size, -1, dtype=np.int64)
        self._n = 0

    @property
    def exact(self) -> bool:
        return self.reservoir is None

    # updating -----------------------------------------------------------------------------
    def update(self, data) -> "PatternCounts":
        """Count the rows of a :class:`streammn.connectors.Batch` or a 2-D block of rows."""
        rows = rows_of(data, self.schema)
        self._add(rows, np.empty(0, dtype=np.int64))
        return self

    def _add(self, rows: np.ndarray, weights: np.ndarray) -> None:
        """Count ``rows`` (each with multiplicity ``weights[r]``, or 1); switch to sampled
        mode at the first row that would exceed ``max_patterns``."""
        if self.reservoir is not None:
            self._offer(rows, weights)
            return
        start = 0
        while True:
            status, start, self._n = _insert(
                rows,
                weights,
                start,
                self._patterns,
                self._counts,
                self._hashes,
                self._slots,
                self._n,
                self.max_patterns,
            )
            if status == _GROW:
                self._grow()
                continue
            counted = weights[:start].sum() if weights.shape[0] else start
            self.n_seen += int(counted)
            if status == _FULL:
                self._to_sampled()
                self._offer(rows[start:], weights[start:] if weights.shape[0] else weights)
            return

    def _grow(self) -> None:
        size = 2 * self._patterns.shape[0]
        n = self._n
        patterns, counts, hashes = self._patterns, self._counts, self._hashes
        self._clear(size)
        self._patterns[:n], self._counts[:n], self._hashes[:n] = (
            patterns[:n],
            counts[:n],
            hashes[:n],
        )
        self._n = n
        self._slots = _reindex(self._hashes, n, 2 * size)

    def _to_sampled(self) -> None:
        """Replace the exact counts by a uniform sample of ``max_patterns`` of the rows counted
        (drawn without replacement from their multiset), continued by algorithm R."""
        patterns, counts = self.patterns, self.counts
        k = min(self.max_patterns, self.n_seen)
        positions = np.sort(self._rng.choice(self.n_seen, size=k, replace=False))
        which = np.searchsorted(np.cumsum(counts), positions, side="right")
        reservoir = RowReservoir(
            self.schema, capacity=self.max_patterns, seed=int(self._rng.integers(2**63))
        )
        reservoir._sample[:k] = patterns[which]
        reservoir.n_seen = self.n_seen
        self.reservoir = reservoir
        self._clear(16)

    def _offer(self, rows: np.ndarray, weights: np.ndarray) -> None:
        if weights.shape[0]:
            rows = np.repeat(rows, weights, axis=0)
        assert self.reservoir is not None  # sampled mode
        self.reservoir.update(rows)
        self.n_seen = self.reservoir.n_seen
        self._summary = None

    def merge(self, other: "PatternCounts") -> "PatternCounts":
        """Add ``other``'s rows into this store (in place). Two exact stores merge exactly
        (equal to counting both inputs; patterns in order of first occurrence, this store's
        first); once either is sampled, the result is a uniform sample of the union."""
        check_mergeable(self, other, "max_patterns")
        if other.reservoir is None:
            self._add(other.patterns, other.counts)
            return self
        if self.reservoir is None:
            self._to_sampled()
        assert self.reservoir is not None  # sampled now
        self.reservoir.merge(other.reservoir)
        self.n_seen = self.reservoir.n_seen
        self._summary = None
        return self

    # queries ------------------------------------------------------------------------------
    def _sample_summary(self):
        if self._summary is None:
            rows = self.reservoir.rows
            if rows.shape[0]:
                patterns, counts = np.unique(rows, axis=0, return_counts=True)
            else:
                patterns, counts = rows[:0], np.zeros(0, dtype=np.int64)
            self._summary = (
                np.ascontiguousarray(patterns, dtype=np.uint8),
                counts.astype(np.int64),
            )
        return self._summary

    @property
    def patterns(self) -> np.ndarray:
        """The distinct patterns, ``(n_patterns, n_vars)`` uint8 (read-only). In exact mode in
        order of first occurrence; in sampled mode the distinct rows of the sample, sorted."""
        view = self._patterns[: self._n] if self.exact else self._sample_summary()[0]
        view = view.view()
        view.flags.writeable = False
        return view

    @property
    def counts(self) -> np.ndarray:
        """How many rows (of the stream, or of the sample) hold each pattern (read-only)."""
        view = self._counts[: self._n] if self.exact else self._sample_summary()[1]
        view = view.view()
        view.flags.writeable = False
        return view

    @property
    def n_patterns(self) -> int:
        return int(self.patterns.shape[0])

    @property
    def n_rows(self) -> int:
        """Rows the counts stand for: all rows seen (exact) or the sample size (sampled)."""
        return self.n_seen if self.reservoir is None else self.reservoir.size  # (exact: None)

    def table(self, a_vars, b_vars=(), context=None) -> np.ndarray:
        """Counts of ``X_A = a, X_B = b`` among the rows with ``X_W = x_W``.

        ``a_vars``, ``b_vars``: variable indices (an int or a sequence); ``context``: a dict
        ``{variable: value}`` (or None). Returns an int64 array of shape
        ``cards[A] + cards[B]``.
        """
        cards = self.schema.cardinalities
        n = self.schema.n_vars
        a = np.atleast_1d(np.asarray(a_vars, dtype=np.int64))
        b = np.atleast_1d(np.asarray(b_vars, dtype=np.int64))
        context = dict(context or {})
        w = np.array(sorted(context), dtype=np.int64)
        wv = np.array([context[v] for v in w.tolist()], dtype=np.int64)
        used = np.concatenate([a, b, w])
        if used.size and (used.min() < 0 or used.max() >= n):
            raise StatsIndexError(f"variable index out of range 0..{n - 1}: {used.tolist()}")
        if np.unique(used).size != used.size:
            raise StatsError(
                f"A, B and the context must be disjoint sets of variables, got "
                f"A={a.tolist()}, B={b.tolist()}, W={w.tolist()}"
            )
        if w.size and ((wv < 0) | (wv >= cards[w])).any():
            raise StatsError(f"context value out of range: {context}")
        shape = tuple(int(c) for c in cards[np.concatenate([a, b])])
        radix = np.ones(len(shape), dtype=np.int64)
        for k in range(len(shape) - 2, -1, -1):
            radix[k] = radix[k + 1] * shape[k + 1]
        out = np.zeros(int(np.prod(shape)), dtype=np.int64)
        conjunctive_table(self.patterns, self.counts, a, b, radix, w, wv, out)
        return out.reshape(shape)

    # serialisation ------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Lossless serialisation (see :mod:`streammn.stats.store`), generators included."""
        meta = {
            "max_patterns": self.max_patterns,
            "seed": self.seed,
            "n_seen": self.n_seen,
            "exact": self.exact,
            "rng_state": jsonable(self._rng.bit_generator.state),
        }
        arrays: dict[str, np.ndarray]
        if self.reservoir is None:  # exact
            arrays = {"patterns": self._patterns[: self._n], "counts": self._counts[: self._n]}
        else:
            arrays = {"reservoir": np.frombuffer(self.reservoir.to_bytes(), dtype=np.uint8)}
        return pack(self, meta, arrays)

    @classmethod
    def from_bytes(cls, data) -> "PatternCounts":
        """Rebuild a store from :meth:`to_bytes` output; raises ``StatsFormatError`` if bad."""
        schema, meta, arrays = unpack(data, cls, [])
        max_patterns, seed = meta.get("max_patterns"), meta.get("seed")
        n_seen, exact = meta.get("n_seen"), meta.get("exact")
        expect(
            isinstance(max_patterns, int) and max_patterns >= 1,
            cls,
            f"max_patterns {max_patterns!r}",
        )
        expect(seed is None or isinstance(seed, int), cls, f"seed {seed!r}")
        expect(isinstance(n_seen, int) and n_seen >= 0, cls, f"n_seen {n_seen!r}")
        expect(isinstance(exact, bool), cls, f"exact {exact!r}")
        max_patterns, n_seen = cast(int, max_patterns), cast(int, n_seen)  # checked above
        store = cls(schema, max_patterns=max_patterns, seed=seed)
        store._rng = generator_from_state(meta.get("rng_state"), cls)
        if exact:
            expect("patterns" in arrays and "counts" in arrays, cls, "patterns/counts missing")
            patterns, counts = arrays["patterns"], arrays["counts"]
            expect(
                patterns.dtype == np.uint8
                and patterns.ndim == 2
                and patterns.shape[1] == schema.n_vars
                and counts.dtype == np.int64
                and counts.shape == (patterns.shape[0],)
                and patterns.shape[0] <= max_patterns,
                cls,
                f"patterns {patterns.shape}/{patterns.dtype}, counts {counts.shape}",
            )
            expect(
                bool((counts > 0).all()) and int(counts.sum()) == n_seen,
                cls,
                "counts are not positive or do not sum to n_seen",
            )
            expect(
                patterns.shape[0] == 0 or bool((patterns.max(axis=0) < schema.cardinalities).all()),
                cls,
                "pattern values out of range of the schema",
            )
            store._add(np.ascontiguousarray(patterns), np.ascontiguousarray(counts))
            expect(store._n == patterns.shape[0], cls, "duplicate patterns")
        else:
            expect("reservoir" in arrays, cls, "reservoir missing")
            store.reservoir = RowReservoir.from_bytes(arrays["reservoir"].tobytes())
            expect(
                store.reservoir.schema == schema
                and store.reservoir.capacity == max_patterns
                and store.reservoir.n_seen == n_seen,
                cls,
                "reservoir does not fit",
            )
            store.n_seen = n_seen
        return store

    def __repr__(self) -> str:
        return (
            f"PatternCounts(schema={self.schema!r}, max_patterns={self.max_patterns}, "
            f"seed={self.seed!r}, n_seen={self.n_seen}, exact={self.exact})"
        )
