"""All pairwise joint tables, dense, from one matrix product per batch.

Encoding. Each variable ``i`` with cardinality ``c_i`` gets ``c_i - 1`` indicator columns, one per
state ``1 .. c_i-1`` (state 0 is the all-zero pattern). A binary variable is therefore its own
column, and ``Z`` for binary data is just the rows as float32. The Gram matrix ``G = Z^T Z``
holds, for every pair of non-zero states ``(i=a, j=b)``, the number of rows where both hold; its
diagonal holds the marginal counts of the non-zero states. Every cell involving a state 0 follows
from ``G`` and the row count by inclusion-exclusion, so ``G`` (``D' x D'`` with
``D' = sum(c_i - 1)``) and ``n_rows`` are the whole sufficient statistic. Compared with the full
one-hot encoding this halves the width for binary data and quarters the matrix product.

Exactness. ``G`` is computed per chunk in float32 (one BLAS ``Z^T Z``; numpy runs it as a
symmetric rank-k update) and added into an int64 accumulator. Every partial sum is an integer
no larger than the number of rows in the chunk, and float32 represents all integers up to
``2**24`` exactly, so chunks are capped at ``2**24`` rows and the float32 product is exact.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from streammn.schema import Schema
from streammn.stats.counting import encode_nonzero_states, state_offsets
from streammn.stats.marginals import MarginalCounts
from streammn.stats.store import check_mergeable, expect, pack, rows_of, unpack
from streammn.errors import StatsError, StatsIndexError

EXACT_FLOAT32_ROWS = 2**24
"""Largest chunk whose float32 Gram matrix is exact (float32 has a 24-bit significand)."""

DEFAULT_CHUNK_BYTES = 64 * 2**20
"""Default memory budget of the float32 encoding buffer of one chunk."""


class PairCounts:
    """Exact int64 joint counts of every pair of variables, updated by one GEMM per batch.

    Parameters
    ----------
    schema : Schema
        The variables counted. Rows are validated against it.
    chunk_rows : int or None, default None
        Most rows encoded and multiplied at once. ``None`` picks the largest chunk whose
        float32 encoding fits in 64 MiB (at most ``2**24`` rows, the float32 exactness limit).
        Only memory and speed depend on it, never the counts.

    Notes
    -----
    Memory is ``8 * D'^2`` bytes for the counts, ``D' = sum(card - 1)``: 8 MB for 1000
    binary variables, plus the chunk buffer.

    Examples
    --------
    >>> from streammn import Schema
    >>> p = PairCounts(Schema.from_cardinalities([2, 3]))
    >>> _ = p.update([[0, 2], [1, 2], [1, 0]])
    >>> p.table(0, 1).tolist()
    [[0, 0, 1], [1, 0, 1]]
    """

    def __init__(self, schema: Schema, chunk_rows: int | None = None):
        self.schema = schema
        cards = schema.cardinalities
        self._cards = np.ascontiguousarray(cards, dtype=np.int64)
        self._columns = state_offsets(cards - 1)  # first compact column of each variable
        self._width = int(self._columns[-1])
        self._all_binary = bool((cards == 2).all())
        if chunk_rows is None:
            chunk_rows = min(EXACT_FLOAT32_ROWS, max(1, DEFAULT_CHUNK_BYTES // (4 * self._width)))
        if not 1 <= chunk_rows <= EXACT_FLOAT32_ROWS:
            raise StatsError(
                f"chunk_rows must be in 1..{EXACT_FLOAT32_ROWS} so that float32 "
                f"counts stay exact, got {chunk_rows}"
            )
        self.chunk_rows = int(chunk_rows)
        self._gram = np.zeros((self._width, self._width), dtype=np.int64)
        self._buffer = np.empty((0, self._width), dtype=np.float32)
        self.n_rows = 0

    def update(self, data) -> "PairCounts":
        """Count all pairs in the rows of a :class:`streammn.connectors.Batch` or a 2-D block of
        rows."""
        rows = rows_of(data, self.schema)
        for start in range(0, rows.shape[0], self.chunk_rows):
            chunk = rows[start : start + self.chunk_rows]
            m = chunk.shape[0]
            if self._buffer.shape[0] < m:
                self._buffer = np.empty((m, self._width), dtype=np.float32)
            z = self._buffer[:m]
            if self._all_binary:  # the encoding is the rows themselves: a plain cast is faster
                z[...] = chunk
            else:
                encode_nonzero_states(chunk, self._columns, self._cards, z)
            self._gram += (z.T @ z).astype(np.int64)
        self.n_rows += rows.shape[0]
        return self

    def merge(self, other: "PairCounts") -> "PairCounts":
        """Add ``other``'s counts into this store (in place); equals counting both inputs."""
        check_mergeable(self, other)
        self._gram += other._gram
        self.n_rows += other.n_rows
        return self

    # access -------------------------------------------------------------------------------
    def _block(self, i: int) -> slice:
        return slice(int(self._columns[i]), int(self._columns[i + 1]))

    def counts(self, i: int) -> np.ndarray:
        """Marginal counts of the states of variable ``i`` (the diagonal of the pair tables)."""
        nonzero = np.diagonal(self._gram)[self._block(i)]
        return np.concatenate([[self.n_rows - nonzero.sum()], nonzero]).astype(np.int64)

    def table(self, i: int, j: int) -> np.ndarray:
        """The ``card_i x card_j`` int64 table of joint counts of variables ``i`` and ``j``.

        ``table(i, i)`` is the diagonal matrix of ``i``'s marginal counts.
        """
        n = self.schema.n_vars
        if not (0 <= i < n and 0 <= j < n):
            raise StatsIndexError(f"variable index out of range 0..{n - 1}: ({i}, {j})")
        if i == j:
            return np.diag(self.counts(i))
        both = self._gram[self._block(i), self._block(j)]
        mi = np.diagonal(self._gram)[self._block(i)]
        mj = np.diagonal(self._gram)[self._block(j)]
        out = np.empty((self._cards[i], self._cards[j]), dtype=np.int64)
        out[1:, 1:] = both
        out[1:, 0] = mi - both.sum(axis=1)
        out[0, 1:] = mj - both.sum(axis=0)
        out[0, 0] = self.n_rows - mi.sum() - mj.sum() + both.sum()
        return out

    def joint(self) -> np.ndarray:
        """All tables at once: the ``D x D`` one-hot co-occurrence matrix, ``D = sum(card)``.

        Entry ``[offsets[i] + a, offsets[j] + b]`` counts rows with ``x_i = a`` and ``x_j = b``
        (``offsets`` as in :attr:`MarginalCounts.offsets`); the diagonal blocks are diagonal
        matrices of marginal counts.
        """
        g = self._gram
        starts = self._columns[:-1]
        nonzero = np.diagonal(g)
        by_var = np.add.reduceat(g, starts, axis=0)  # [v, q]: rows with v != 0 and q
        both_nonzero = np.add.reduceat(by_var, starts, axis=1)  # [v, w]: v != 0 and w != 0
        per_var = np.diagonal(both_nonzero)  # rows with v != 0
        zero_q = nonzero[None, :] - by_var  # [v, q]: v == 0 and q
        zero_zero = self.n_rows - per_var[:, None] - per_var[None, :] + both_nonzero
        offsets = state_offsets(self._cards)
        zero_idx = offsets[:-1]
        nonzero_idx = np.setdiff1d(np.arange(offsets[-1]), zero_idx)
        out = np.empty((offsets[-1], offsets[-1]), dtype=np.int64)
        out[np.ix_(nonzero_idx, nonzero_idx)] = g
        out[np.ix_(zero_idx, nonzero_idx)] = zero_q
        out[np.ix_(nonzero_idx, zero_idx)] = zero_q.T
        out[np.ix_(zero_idx, zero_idx)] = zero_zero
        return out

    def to_marginals(self) -> MarginalCounts:
        """The marginal counts implied by the pair tables, as a :class:`MarginalCounts`."""
        marginals = MarginalCounts(self.schema)
        for i in range(self.schema.n_vars):  # loop over variables, not rows
            block = slice(marginals.offsets[i], marginals.offsets[i + 1])
            marginals._flat[block] = self.counts(i)
        marginals.n_rows = self.n_rows
        return marginals

    # serialisation ------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Lossless serialisation (see :mod:`streammn.stats.store` for the format)."""
        return pack(
            self, {"n_rows": self.n_rows, "chunk_rows": self.chunk_rows}, {"gram": self._gram}
        )

    @classmethod
    def from_bytes(cls, data) -> "PairCounts":
        """Rebuild a store from :meth:`to_bytes` output; raises ``StatsFormatError`` if bad."""
        schema, meta, arrays = unpack(data, cls, ["gram"])
        chunk_rows, n_rows = meta.get("chunk_rows"), meta.get("n_rows")
        expect(
            isinstance(chunk_rows, int) and 1 <= chunk_rows <= EXACT_FLOAT32_ROWS,
            cls,
            f"chunk_rows {chunk_rows!r}",
        )
        expect(isinstance(n_rows, int) and n_rows >= 0, cls, f"n_rows {n_rows!r}")
        n_rows = cast(int, n_rows)  # checked above
        store = cls(schema, chunk_rows=chunk_rows)
        gram = arrays["gram"]
        expect(
            gram.dtype == np.int64 and gram.shape == store._gram.shape,
            cls,
            f"gram of shape {gram.shape} / {gram.dtype}",
        )
        expect(
            bool((gram == gram.T).all())
            and bool((gram >= 0).all())
            and bool((np.diagonal(gram) <= n_rows).all()),
            cls,
            "gram is not a symmetric non-negative count matrix within n_rows",
        )
        store._gram[:] = gram
        store.n_rows = n_rows
        return store

    def __repr__(self) -> str:
        return (
            f"PairCounts(schema={self.schema!r}, chunk_rows={self.chunk_rows}, "
            f"n_rows={self.n_rows})"
        )
