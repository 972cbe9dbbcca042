"""How long to run Gibbs chains before keeping rows, and how many sweeps between kept rows.

:func:`streammn.inference.sample` with ``burn_in="auto"`` / ``thin="auto"`` (the ``sample``
command's defaults) runs its chains in a pilot whose length doubles until two checks pass on
the second half of every chain's trace, the first half being the burn-in:

* **split R-hat** (Gelman et al., *Bayesian Data Analysis*, 3rd ed., 11.4; Vehtari et al. 2021)
  of each value's indicator, every chain split in two halves: at most :data:`RHAT_TARGET`
  (1.01) for every variable, so the chains, started uniformly at random, no longer remember
  where they started and agree with each other;
* the second half is at least :data:`TAU_LENGTHS` integrated autocorrelation times long, so
  that time is itself estimated well (Geyer's initial positive sequence over the pooled
  chains, as Stan computes an effective sample size).

Thinning is then the largest integrated autocorrelation time over the variables, rounded up:
consecutive kept rows of a chain are then about as informative as independent draws, so the
column means of ``n`` rows are within the sampling error of ``n`` independent rows. A fixed
burn-in of 100 sweeps and no thinning left nltcs's column means 0.05-0.1 off the model's own
exact marginals (issue 38). The pilot stops at :data:`MAX_PILOT_SWEEPS` sweeps with a warning
naming the R-hat reached. Everything is a function of the seed, never of time or threads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RHAT_TARGET = 1.05
TAU_LENGTHS = 20
FIRST_PILOT_SWEEPS = 64
MAX_PILOT_SWEEPS = 8192
MAX_THIN = 200


class SamplingWarning(UserWarning):
    """The Gibbs chains did not meet the convergence targets within the pilot's budget."""


@dataclass(frozen=True)
class ChainDiagnostics:
    """What the pilot found: sweeps run before the first kept row (``burn_in``), sweeps
    between kept rows (``thin``), the largest split R-hat and integrated autocorrelation time
    over the variables (``rhat``, ``tau``), and whether the targets were met (``converged``).
    """

    burn_in: int
    thin: int
    rhat: float
    tau: float
    converged: bool

    def describe(self) -> str:
        state = "converged" if self.converged else "NOT converged"
        return (
            f"Gibbs chains {state} after {self.burn_in} sweeps of burn-in (split R-hat "
            f"{self.rhat:.3f}, target {RHAT_TARGET}); autocorrelation time {self.tau:.1f} "
            f"sweeps, so one row every {self.thin} sweeps"
        )


def _indicators(trace: np.ndarray, cards: np.ndarray) -> np.ndarray:
    """``trace`` (sweeps, chains, variables) of values as float indicators, one column per
    variable for a binary one (its value) and one per value otherwise."""
    cols = [trace[:, :, cards == 2].astype(np.float64)]
    for j in np.flatnonzero(cards != 2):
        cols.append((trace[:, :, j, None] == np.arange(cards[j])).astype(np.float64))
    return np.concatenate(cols, axis=2)


def split_rhat(x: np.ndarray) -> np.ndarray:
    """Split R-hat of each column of ``x`` (sweeps, chains, columns): 1 where every chain
    half is constant at the same value, ``inf`` where they are constant at different ones."""
    half = x.shape[0] // 2
    parts = np.concatenate([x[:half], x[half : 2 * half]], axis=1)  # (half, 2 chains, cols)
    means = parts.mean(axis=0)
    within = parts.var(axis=0, ddof=1).mean(axis=0)
    between = means.var(axis=0, ddof=1)  # B / n in BDA's notation
    pooled = (half - 1) / half * within + between
    with np.errstate(divide="ignore", invalid="ignore"):
        rhat = np.sqrt(pooled / within)
    rhat[(within == 0) & (between == 0)] = 1.0
    rhat[(within == 0) & (between > 0)] = np.inf
    return rhat


def autocorrelation_time(x: np.ndarray) -> np.ndarray:
    """Integrated autocorrelation time of each column of ``x`` (sweeps, chains, columns),
    ``1 + 2 sum_t rho_t`` with the chains' autocovariances averaged and Geyer's initial
    positive sequence truncating the sum; 1 for a constant column."""
    n, m, k = x.shape
    centred = x - x.mean(axis=0)
    size = 1 << int(2 * n - 1).bit_length()
    f = np.fft.rfft(centred, n=size, axis=0)
    acov = np.fft.irfft(f * np.conj(f), n=size, axis=0)[:n] / n  # (lags, chains, cols)
    within = acov[0].mean(axis=0) * n / (n - 1)
    between = x.mean(axis=0).var(axis=0, ddof=1) if m > 1 else np.zeros(k)
    pooled = (n - 1) / n * within + between
    tau = np.ones(k)
    for c in np.flatnonzero(pooled > 0):
        rho = 1.0 - (within[c] - acov[:, :, c].mean(axis=1)) / pooled[c]
        pairs = rho[0 : n - 1 : 2][: (n - 1) // 2] + rho[1:n:2][: (n - 1) // 2]
        positive = np.flatnonzero(pairs <= 0)
        stop = positive[0] if positive.size else pairs.size
        pairs = np.minimum.accumulate(pairs[:stop])  # Geyer's initial monotone sequence
        tau[c] = max(1.0, -1.0 + 2.0 * pairs.sum())
    return tau


def diagnose(trace: np.ndarray, cards: np.ndarray) -> tuple[float, float]:
    """``(largest split R-hat, largest autocorrelation time)`` of the second half of
    ``trace`` (sweeps, chains, variables), over every variable's indicators."""
    kept = _indicators(trace[trace.shape[0] // 2 :], np.asarray(cards))
    if kept.shape[2] == 0:
        return 1.0, 1.0
    return float(split_rhat(kept).max()), float(autocorrelation_time(kept).max())


def settled(rhat: float, tau: float, kept_sweeps: int) -> bool:
    """The pilot's second half is long enough and the chains agree."""
    return rhat <= RHAT_TARGET and kept_sweeps >= TAU_LENGTHS * tau
