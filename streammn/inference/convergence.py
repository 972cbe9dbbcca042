"""When Gibbs chains have forgotten where they started, and how far apart to keep their rows.

:func:`streammn.inference.sampling.sample_diagnosed` (the ``sample`` command) runs a few chains
(:data:`DEFAULT_CHAINS`), each started uniformly at random, in a pilot whose length doubles
(from :data:`FIRST_PILOT_SWEEPS` sweeps) until two checks pass on the second half of every
chain's record, the first half being the burn-in:

* **split R-hat** (Gelman et al., *Bayesian Data Analysis*, 3rd ed., 11.4; Vehtari et al. 2021)
  of each value's indicator, every chain split in two halves, is at most the target
  (:data:`RHAT_TARGET`, 1.01, Vehtari et al.'s threshold) for every variable: the chains no
  longer remember their starts and agree with each other. Its excess over 1 is about
  ``tau / (2 L)`` for halves of ``L`` sweeps that mix perfectly (``tau`` the autocorrelation
  time, below), so 1.01 asks for halves of some 50 to 100 autocorrelation times: a pilot of a
  few hundred. That is why the pilot runs few chains: the length it needs does not shrink with
  more chains, its cost grows with them;
* the kept half is at least :data:`TAU_LENGTHS` integrated autocorrelation times long, so that
  time is itself estimated well (Geyer's initial monotone sequence over the pooled chains, as
  Stan computes an effective sample size).

The pilot's kept half is not thrown away: its states every ``thin`` sweeps are the first rows,
and the chains run on for more only when they are too few. ``thin`` is the largest integrated
autocorrelation time over the variables, rounded up, so consecutive rows of a chain are about as
informative as independent draws and the column means of ``n`` rows are within the sampling
error of ``n`` independent rows. (A fixed burn-in of 100 sweeps and every sweep kept left
nltcs's column means 0.05-0.1 off the model's own exact marginals: issue 38.)

The pilot stops at ``max_sweeps`` (:data:`MAX_SWEEPS`) sweeps per chain, with a warning naming
the R-hat reached. A long pilot keeps every ``stride``-th state only, the stride doubling
whenever the record would pass :data:`TRACE_BYTES`, so that memory stays bounded on wide
models. Everything is a function of the seed and the settings, never of time or threads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RHAT_TARGET = 1.01
TAU_LENGTHS = 20
DEFAULT_CHAINS = 4
FIRST_PILOT_SWEEPS = 128
MAX_SWEEPS = 2**17
MAX_THIN = 4096
TRACE_BYTES = 64 << 20


class SamplingWarning(UserWarning):
    """The Gibbs chains did not meet the convergence targets within the pilot's budget."""


@dataclass(frozen=True)
class ChainDiagnostics:
    """What the pilot found.

    Attributes
    ----------
    chains:
        Chains run (each gives every ``chains``-th row).
    burn_in:
        Sweeps of every chain before its first row.
    thin:
        Sweeps between a chain's rows.
    rhat:
        The largest split R-hat over the variables' value indicators, on the pilot's kept half
        (for a given burn-in and thinning, on the rows themselves; ``nan`` when there were too
        few sweeps to measure it).
    tau:
        The largest integrated autocorrelation time over the indicators, in sweeps.
    converged:
        Whether the targets were met within ``max_sweeps``.
    rhat_target:
        The R-hat aimed at.
    sweeps:
        Sweeps of every chain in all, rows included.
    """

    chains: int
    burn_in: int
    thin: int
    rhat: float
    tau: float
    converged: bool
    rhat_target: float = RHAT_TARGET
    sweeps: int = 0

    def describe(self) -> str:
        state = "converged" if self.converged else "NOT converged"
        rhat = "not measured: too few sweeps" if np.isnan(self.rhat) else f"{self.rhat:.3f}"
        return (
            f"{self.chains} Gibbs chains {state}: burn-in {self.burn_in:,} sweeps (split R-hat "
            f"{rhat}, target {self.rhat_target}); autocorrelation time {self.tau:.1f} sweeps, "
            f"one row every {self.thin:,} sweeps; {self.sweeps:,} sweeps per chain in all"
        )


def split_rhat(x: np.ndarray) -> np.ndarray:
    """Split R-hat of each column of ``x`` (sweeps, chains, columns), as Gelman et al. define
    it (BDA3, 11.4): every chain cut into two halves of ``n`` sweeps (an odd last sweep left
    out), ``W`` the mean of the halves' variances, ``B / n`` the variance of their means, and
    ``R = sqrt(((n - 1) / n W + B / n) / W)``. 1 where every half is constant at the same
    value, ``inf`` where they are constant at different ones."""
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
    """``(largest split R-hat, largest autocorrelation time)`` over the value indicators of
    ``trace`` (sweeps, chains, variables; a binary variable's indicator is its value), the time
    in ``trace``'s steps. One variable at a time, so the memory is a few copies of one column."""
    cards = np.asarray(cards)
    if trace.shape[0] < 4:
        return float("nan"), 1.0
    if cards.size == 0:
        return 1.0, 1.0
    rhat, tau = 0.0, 1.0
    for j in range(cards.size):
        values = trace[:, :, j]
        ind = (
            values[:, :, None].astype(np.float64)
            if cards[j] == 2
            else (values[:, :, None] == np.arange(cards[j])).astype(np.float64)
        )
        rhat = max(rhat, float(split_rhat(ind).max()))
        tau = max(tau, float(autocorrelation_time(ind).max()))
    return rhat, tau


def settled(rhat: float, tau: float, kept_sweeps: int, target: float = RHAT_TARGET) -> bool:
    """The pilot's kept half is long enough and the chains agree."""
    return rhat <= target and kept_sweeps >= TAU_LENGTHS * tau
