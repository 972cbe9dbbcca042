"""An in-memory numpy matrix as a :class:`~connectors.base.Source` (tests, notebooks)."""

from __future__ import annotations

import numpy as np

from connectors.base import DEFAULT_BATCH_SIZE, Batch, NumberedRows
from streammn.schema import Schema
from streammn.errors import SettingsError


class ArraySource(NumberedRows):
    """Yield the rows of a 2-D array in batches; the position is the next row index.

    The whole array is validated against ``schema`` (inferred when omitted) up front, so a bad
    value raises :class:`~streammn.schema.SchemaError` before any batch is yielded.
    """

    def __init__(
        self,
        rows,
        schema: Schema | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        name: str = "array",
    ):
        if batch_size < 1:
            raise SettingsError(f"batch_size must be positive, got {batch_size}")
        self.name = name
        self.schema = schema if schema is not None else Schema.infer(np.asarray(rows), source=name)
        self.rows = self.schema.validate(rows, source=name)
        self.batch_size = batch_size
        self._next = 0

    def _batches(self):
        n = self.rows.shape[0]
        while self._next < n:
            start = self._next
            stop = min(start + self.batch_size, n)
            self._next = stop
            yield Batch(self.rows[start:stop], end=stop, start=start, schema=self.schema)

    def _n_rows(self) -> int:
        return self.rows.shape[0]

    def describe(self) -> str:
        return f"{self.name} ({self.rows.shape[0]} rows)"

    def __repr__(self) -> str:
        return (
            f"ArraySource({self.rows.shape[0]} rows, {self.schema!r}, batch_size={self.batch_size})"
        )
