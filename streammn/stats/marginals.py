"""Per-variable value counts: the sufficient statistics of the product-of-marginals model."""

from __future__ import annotations

from typing import cast

import numpy as np

from streammn.schema import Schema
from streammn.stats.counting import count_values, state_offsets
from streammn.stats.store import check_mergeable, expect, pack, rows_of, unpack
from streammn.errors import StatsError


class MarginalCounts:
    """Exact int64 counts of every state of every variable (in missing mode, of the observed
    values: a variable's counts sum to the rows where it is observed).

    Parameters
    ----------
    schema : Schema
        The variables counted. Rows are validated against it.

    Attributes
    ----------
    n_rows : int
        Rows counted so far.

    Examples
    --------
    >>> from streammn import Schema
    >>> m = MarginalCounts(Schema.from_cardinalities([2, 3]))
    >>> _ = m.update([[0, 2], [1, 2], [1, 0]])
    >>> m.counts(1).tolist(), m.n_rows
    ([1, 0, 2], 3)
    """

    def __init__(self, schema: Schema):
        self.schema = schema
        self._offsets = state_offsets(schema.cardinalities)
        self._flat = np.zeros(int(self._offsets[-1]), dtype=np.int64)
        self.n_rows = 0

    def update(self, data) -> "MarginalCounts":
        """Count the rows of a :class:`streammn.connectors.Batch` or a 2-D block of rows."""
        rows = rows_of(data, self.schema)
        count_values(rows, self._offsets, self._flat)
        self.n_rows += rows.shape[0]
        return self

    def merge(self, other: "MarginalCounts") -> "MarginalCounts":
        """Add ``other``'s counts into this store (in place); equals counting both inputs."""
        check_mergeable(self, other)
        self._flat += other._flat
        self.n_rows += other.n_rows
        return self

    # access -------------------------------------------------------------------------------
    def counts(self, i: int) -> np.ndarray:
        """Counts of the states ``0 .. card_i-1`` of variable ``i`` (a copy)."""
        return self._flat[self._offsets[i] : self._offsets[i + 1]].copy()

    @property
    def flat(self) -> np.ndarray:
        """All counts in one read-only vector, variable ``i`` at ``offsets[i]:offsets[i+1]``."""
        view = self._flat.view()
        view.flags.writeable = False
        return view

    @property
    def offsets(self) -> np.ndarray:
        """Start of each variable's states in :attr:`flat` (length ``n_vars + 1``)."""
        return self._offsets.copy()

    def probabilities(self, i: int | None = None, smoothing: float = 0.0):
        """Smoothed marginal distribution(s): ``(count + smoothing / card) / (n_rows + smoothing)``.

        ``smoothing`` is a total pseudo-count spread uniformly over a variable's states;
        ``smoothing=1`` gives Libra's smoothed marginals ``(count + 1/d) / (N + 1)``, the
        product-of-marginals base distribution of DN2MN. With ``i=None`` a list with one array
        per variable is returned.
        """
        if smoothing < 0:
            raise StatsError(f"smoothing must be >= 0, got {smoothing}")
        if self.n_rows + smoothing <= 0:
            raise StatsError("no rows counted yet: probabilities need rows or smoothing > 0")
        total = self.n_rows + smoothing
        cards = self.schema.cardinalities
        probs = (self._flat + np.repeat(smoothing / cards, cards)) / total
        if i is not None:
            return probs[self._offsets[i] : self._offsets[i + 1]]
        return np.split(probs, self._offsets[1:-1])

    # serialisation ------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Lossless serialisation (see :mod:`streammn.stats.store` for the format)."""
        return pack(self, {"n_rows": self.n_rows}, {"counts": self._flat})

    @classmethod
    def from_bytes(cls, data) -> "MarginalCounts":
        """Rebuild a store from :meth:`to_bytes` output; raises ``StatsFormatError`` if bad."""
        schema, meta, arrays = unpack(data, cls, ["counts"])
        store = cls(schema)
        counts = arrays["counts"]
        expect(
            counts.dtype == np.int64 and counts.shape == store._flat.shape,
            cls,
            f"counts of shape {counts.shape} / {counts.dtype}",
        )
        n_rows = meta.get("n_rows")
        expect(isinstance(n_rows, int) and n_rows >= 0, cls, f"n_rows {n_rows!r}")
        n_rows = cast(int, n_rows)  # checked above
        per_variable = np.add.reduceat(counts, store._offsets[:-1])
        expect(
            bool((counts >= 0).all())
            and bool(
                (per_variable <= n_rows).all() if schema.missing else (per_variable == n_rows).all()
            ),
            cls,
            "per-variable counts do not sum to n_rows",
        )
        store._flat[:] = counts
        store.n_rows = n_rows
        return store

    def __repr__(self) -> str:
        return f"MarginalCounts(schema={self.schema!r}, n_rows={self.n_rows})"
