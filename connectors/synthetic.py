"""Rows sampled from a known model as a :class:`~streammn.connectors.base.Source` (planted models
for tests, demos and benchmarks at any scale)."""

from __future__ import annotations

import numpy as np

from streammn.connectors.base import Batch, NumberedRows
from streammn.errors import SettingsError


class SyntheticSource(NumberedRows):
    """Stream rows drawn by Gibbs sampling from a Markov network (or dependency network).

    Parameters
    ----------
    model:
        A :class:`streammn.network.model.MarkovNetwork` (or :class:`streammn.dn.DependencyNetwork`).
    n_rows:
        Rows to emit in total; ``None`` (default) streams for ever.
    batch_size:
        Rows per batch (default 1024).
    seed:
        Seed of the whole stream (default 0).
    burn_in, thin, chains:
        Each batch runs ``chains`` fresh chains (default 16) from uniformly random states,
        discards ``burn_in`` sweeps (default 100) and then takes a row every ``thin`` sweeps
        (default 1); row ``t * chains + c`` of a batch is chain c's t-th sample.

    Notes
    -----
    Reproducibility: the position is the number of rows emitted. Batch ``b`` (rows
    ``b * batch_size`` onwards) is generated from chain seeds derived from ``(seed, b)`` alone,
    so after ``seek(p)`` the source regenerates the batch containing row ``p`` and continues
    with exactly the rows an uninterrupted run would have produced (for the same ``seed``,
    ``batch_size``, ``burn_in``, ``thin`` and ``chains``). The first batch after a seek into the
    middle of a batch is shorter, so later batches stay aligned.
    """

    def __init__(
        self,
        model,
        n_rows: int | None = None,
        batch_size: int = 1024,
        seed: int = 0,
        burn_in: int = 100,
        thin: int = 1,
        chains: int = 16,
    ):
        if batch_size < 1:
            raise SettingsError(f"batch_size must be positive, got {batch_size}")
        if n_rows is not None and n_rows < 0:
            raise SettingsError(f"n_rows must be >= 0 or None, got {n_rows}")
        if burn_in < 0 or thin < 1 or chains < 1:
            raise SettingsError("need burn_in >= 0, thin >= 1 and chains >= 1")
        self.model = model
        self.schema = model.schema
        self.n_rows = None if n_rows is None else int(n_rows)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.burn_in = int(burn_in)
        self.thin = int(thin)
        self.chains = int(chains)
        self._next = 0

    def _batch_rows(self, b: int) -> np.ndarray:
        from streammn.inference.gibbs import chain_seeds, sample_chains

        chains = min(self.chains, self.batch_size)
        return sample_chains(
            self.model,
            self.batch_size,
            chains,
            self.burn_in,
            self.thin,
            chain_seeds(self.seed, chains, b),
        )

    def _batches(self):
        while self.n_rows is None or self._next < self.n_rows:
            start = self._next
            b, offset = divmod(start, self.batch_size)
            stop = (b + 1) * self.batch_size
            if self.n_rows is not None:
                stop = min(stop, self.n_rows)
            rows = np.ascontiguousarray(self._batch_rows(b)[offset : offset + stop - start])
            self._next = stop
            yield Batch(rows, end=stop, start=start, schema=self.schema)

    def _n_rows(self) -> int | None:
        return self.n_rows

    def describe(self) -> str:
        total = "unbounded" if self.n_rows is None else f"{self.n_rows} rows"
        return f"synthetic ({total}, seed {self.seed})"

    def __repr__(self) -> str:
        return (
            f"SyntheticSource({self.model!r}, n_rows={self.n_rows}, "
            f"batch_size={self.batch_size}, seed={self.seed}, burn_in={self.burn_in}, "
            f"thin={self.thin}, chains={self.chains})"
        )
