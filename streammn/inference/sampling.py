"""Rows drawn from a model by Gibbs sampling, with a burn-in and a thinning the chains choose.

:func:`sample_diagnosed` (the ``sample`` command) runs a few chains (4), each from a uniformly
random state, in a pilot whose length doubles until the chains agree (split R-hat at most
``rhat_target`` on every value's indicator) and its second half is long against the
autocorrelation time; :mod:`streammn.inference.convergence` says why and how. The first half
of the pilot is the burn-in, the second half gives the first rows (one every ``thin`` sweeps,
``thin`` the autocorrelation time), and the chains run on only for the rows still missing.
:func:`sample` draws with a fixed burn-in and thinning by default (the rows it always drew);
``"auto"`` there does the same as here.

The chains are the kernels of :func:`streammn.inference.gibbs.recorder` (a table of every
conditional for small models, incremental conditionals for larger Markov networks), each call
a batch of sweeps over every chain; fixed counts run them too, and draw the rows
:func:`~streammn.inference.gibbs.sample_chains` draws (tested), faster (plants: 2 s for 200
rows at 100 sweeps of burn-in, against 36 s). A long run is cut into calls of about a second
of work, a number of sweeps fixed by the model and the settings alone (so the rows never
depend on timing), and between calls a progress line is written to ``progress`` if one is
given (the command gives standard error when it is a terminal and ``--quiet`` is not set).
"""

from __future__ import annotations

import time
import warnings
from typing import TextIO

import numpy as np

from streammn.errors import InferenceError
from streammn.inference.convergence import (
    DEFAULT_CHAINS,
    FIRST_PILOT_SWEEPS,
    MAX_SWEEPS,
    MAX_THIN,
    RHAT_TARGET,
    TAU_LENGTHS,
    TRACE_BYTES,
    ChainDiagnostics,
    SamplingWarning,
    diagnose,
)
from streammn.inference.gibbs import chain_seeds, check_counts, recorder, uniform_starts

FIXED_CHAINS = 16  # chains for a fixed burn-in and thinning (the rows sample() always drew)
CALL_NS = 1e9  # work of one kernel call (Recorder.sweep_cost units): about 1 s of one core
PROGRESS_DELAY = 1.0  # seconds before the first progress line
PROGRESS_INTERVAL = 0.5  # seconds between rewrites of a terminal's progress line
PROGRESS_LINES = 2.0  # seconds between progress lines on other streams (as the engine's)


def sample(
    model,
    n: int,
    seed: int = 0,
    burn_in=100,
    thin=1,
    chains: int | None = None,
    *,
    rhat_target: float = RHAT_TARGET,
    max_sweeps: int = MAX_SWEEPS,
    progress: TextIO | None = None,
) -> np.ndarray:
    """``n`` rows drawn by Gibbs sampling: ``chains`` independent chains (16 by default, 4
    with ``"auto"``), each started uniformly at random, ``burn_in`` sweeps discarded, then one
    row every ``thin`` sweeps; row ``t * chains + c`` is chain ``c``'s ``t``-th.

    ``burn_in="auto"`` and ``thin="auto"`` (the ``sample`` command's defaults) let the chains
    choose them (:func:`sample_diagnosed`, which also says what was chosen and takes the same
    options). Fixed counts draw exactly the rows they always did.
    """
    settings = (burn_in, thin, chains, rhat_target, max_sweeps, progress)
    return _draw(model, n, seed, *settings, measure=False)[0]


def sample_diagnosed(
    model,
    n: int,
    seed: int = 0,
    burn_in="auto",
    thin="auto",
    chains: int | None = None,
    *,
    rhat_target: float = RHAT_TARGET,
    max_sweeps: int = MAX_SWEEPS,
    progress: TextIO | None = None,
) -> tuple[np.ndarray, ChainDiagnostics]:
    """:func:`sample` with ``"auto"`` burn-in and thinning by default, returning ``(rows,
    diagnostics)``: the :class:`~streammn.inference.convergence.ChainDiagnostics` of the run.

    ``burn_in="auto"``: the pilot runs until the split R-hat of every value's indicator is at
    most ``rhat_target`` (1.01), and its first half is the burn-in; a given count is trusted
    (the R-hat is still measured and reported). ``thin="auto"``: one row every
    autocorrelation time. ``chains``: 4 by default when either is ``"auto"``, else 16. The
    pilot stops at ``max_sweeps`` sweeps per chain, and one that has not converged by then
    warns (:class:`~streammn.inference.convergence.SamplingWarning`) naming the R-hat reached.
    With both counts given, the diagnostics are those of the rows themselves (no warning).
    ``progress``: a text stream for progress lines during a long run (``None``: silent).

    Examples
    --------
    >>> import numpy as np
    >>> from streammn import FeatureSet, MarkovNetwork, Schema
    >>> schema = Schema.from_cardinalities([2, 2])
    >>> model = MarkovNetwork(schema, FeatureSet.from_features(schema, [
    ...     (2.0, [(0, 1, True), (1, 1, True)])]))
    >>> rows, diag = sample_diagnosed(model, 4000, seed=1)
    >>> diag.converged, diag.rhat <= 1.01, diag.thin >= 1
    (True, True, True)
    >>> bool(np.abs(rows.mean(axis=0) - [p[1] for p in model.marginals()]).max() < 0.03)
    True
    """
    settings = (burn_in, thin, chains, rhat_target, max_sweeps, progress)
    return _draw(model, n, seed, *settings, measure=True)


def _draw(model, n, seed, burn_in, thin, chains, rhat_target, max_sweeps, progress, measure):
    """:func:`sample_diagnosed`; ``measure=False`` skips the diagnostics of fixed counts."""
    auto_burn, auto_thin = burn_in == "auto", thin == "auto"
    for name, v in (("burn_in", burn_in), ("thin", thin)):
        if isinstance(v, str) and v != "auto":
            raise InferenceError(f"{name} must be an integer or 'auto', got {v!r}")
    if chains is None:
        chains = DEFAULT_CHAINS if auto_burn or auto_thin else FIXED_CHAINS
    check_counts(
        n=n,
        chains=chains,
        max_sweeps=max_sweeps,
        **({} if auto_burn else {"burn_in": burn_in}),
        **({} if auto_thin else {"thin": thin}),
    )
    if not (isinstance(rhat_target, (int, float)) and 1 < rhat_target < float("inf")):
        raise InferenceError(f"rhat_target must be a number above 1, got {rhat_target!r}")
    run = _Chains(model, max(1, min(int(chains), int(n))), seed, _Progress(progress))
    try:
        if not auto_burn and not auto_thin:
            return run.fixed(int(n), int(burn_in), int(thin), rhat_target, measure)
        given = (None if auto_burn else int(burn_in), None if auto_thin else int(thin))
        rows, diag = run.auto(int(n), *given, float(rhat_target), int(max_sweeps))
    finally:
        run.progress.close()
    if not diag.converged:
        warnings.warn(
            f"{diag.describe()}: the pilot stopped at its cap of {max_sweeps:,} sweeps "
            f"(max_sweeps, --max-sweeps) before the targets were met, so rows may not follow "
            f"the model; raise the cap, or give burn_in and thin (--burn-in, --thin)",
            SamplingWarning,
            stacklevel=3,
        )
    return rows, diag


class _Chains:
    """The chains of one run: their states and streams, advanced in calls of bounded work."""

    def __init__(self, model, chains: int, seed, progress: "_Progress"):
        self.rec = recorder(model)
        self.chains = chains
        self.states = chain_seeds(seed, chains)
        self.X = uniform_starts(self.states, self.rec.cards)
        self.progress = progress
        self.sweeps = 0  # sweeps of every chain so far
        self.per_call = max(1, int(CALL_NS // (chains * self.rec.sweep_cost)))

    def advance(self, sweeps: int, every: int, say) -> np.ndarray:
        """Run ``sweeps`` sweeps (a multiple of ``every``) and return every ``every``-th
        state, ``(sweeps // every, chains, n_vars)``; ``say(done)`` after each call."""
        call = max(every, self.per_call // every * every)
        out, done = [], 0
        while done < sweeps:
            step = min(call, sweeps - done)
            out.append(self.rec.run(self.X, self.states, step, every))
            done += step
            self.sweeps += step
            self.progress.show(say(done))
        if not out:
            return np.empty((0, self.chains, self.rec.cards.size), np.uint8)
        return np.concatenate(out)

    def burn(self, sweeps: int) -> None:
        """Run ``sweeps`` sweeps, keeping nothing."""
        call = max(1, min(sweeps, self.per_call))
        done = 0
        while done < sweeps:
            step = min(call, sweeps - done)
            self.advance(step, step, lambda d: f"burn-in {done + d:,} of {sweeps:,} sweeps")
            done += step

    def rows(self, trace: np.ndarray, per_chain: int, step: int, n: int) -> np.ndarray:
        """``trace`` (rows, chains, variables), then ``per_chain - len(trace)`` more rows of
        every chain, one every ``step`` sweeps; ``n`` the rows wanted (for progress)."""
        more = per_chain - trace.shape[0]
        kept = trace.shape[0] * self.chains
        start = time.monotonic()

        def say(done):
            rows = min(n, kept + done // step * self.chains)
            left = ""
            if done and rows < n:
                secs = (time.monotonic() - start) / done * (more * step - done)
                left = f", about {secs:.0f} s left"
            return f"rows {rows:,} of {n:,} (one every {step:,} sweeps){left}"

        if more > 0:
            trace = np.concatenate([trace, self.advance(more * step, step, say)])
        return trace

    def fixed(self, n: int, burn_in: int, thin: int, target: float, measure: bool):
        """``burn_in`` sweeps, then a row every ``thin``: the rows
        :func:`~streammn.inference.gibbs.sample_chains` draws. With ``measure``, the split
        R-hat and autocorrelation time of the rows themselves (every chain's rows a trace)."""
        self.burn(burn_in)
        per_chain = -(-n // self.chains)
        empty = np.empty((0, self.chains, self.rec.cards.size), np.uint8)
        trace = self.rows(empty, per_chain, thin, n)
        rows = trace.reshape(-1, self.rec.cards.size)[:n]
        if not measure:
            return rows, None
        rhat, tau = diagnose(trace, self.rec.cards)
        ok = bool(rhat <= target)
        tau *= thin
        return rows, ChainDiagnostics(
            self.chains, burn_in, thin, rhat, tau, ok, target, self.sweeps
        )

    def auto(self, n: int, burn_in, thin, target: float, max_sweeps: int):
        """The pilot (:mod:`streammn.inference.convergence`), then the rows."""
        cards = self.rec.cards
        if burn_in:
            self.burn(burn_in)
        trace = np.empty((0, self.chains, cards.size), np.uint8)
        pilot, stride = 0, 1
        rhat, tau, ok = float("nan"), 1.0, False
        while True:
            length = min(max(FIRST_PILOT_SWEEPS, 2 * pilot), max_sweeps)
            width = self.chains * cards.size  # bytes of one recorded state
            while length // stride * width > TRACE_BYTES and 4 * stride <= pilot:
                trace, stride = trace[1::2], 2 * stride  # keep every other recorded state
            length -= length % (2 * stride)
            if length <= pilot:
                break  # the cap
            shown = pilot

            def say(done):
                measured = "" if np.isnan(rhat) else f"; split R-hat {rhat:.3f} at {shown:,}"
                return (
                    f"burn-in {shown + done:,} of at most {max_sweeps:,} sweeps x {self.chains} "
                    f"chains{measured} (target {target})"
                )

            trace = np.concatenate([trace, self.advance(length - pilot, stride, say)])
            pilot = length
            rhat, tau = diagnose(trace[trace.shape[0] // 2 :], cards)
            tau *= stride
            ok = (burn_in is not None or rhat <= target) and (
                thin is not None or pilot // 2 >= TAU_LENGTHS * tau
            )
            if ok or pilot >= max_sweeps:
                break
        kept_from = pilot // 2 if burn_in is None else 0
        if thin is None:
            step = -(-min(MAX_THIN, int(np.ceil(tau))) // stride) * stride
        else:
            step = thin
        # the pilot's states after kept_from, every step sweeps, are the first rows
        per_chain = -(-n // self.chains)
        kept = 0 if step % stride else min(per_chain, (pilot - kept_from) // step)
        at = (kept_from + step * np.arange(1, kept + 1)) // stride - 1
        rows = self.rows(trace[at], per_chain, step, n).reshape(-1, cards.size)[:n]
        burned = burn_in if burn_in is not None else kept_from
        diag = ChainDiagnostics(self.chains, burned, step, rhat, tau, ok, target, self.sweeps)
        return rows, diag


class _Progress:
    """Progress lines on ``stream`` during a long run, the first after
    :data:`PROGRESS_DELAY` seconds: on a terminal one line rewritten in place (at most every
    :data:`PROGRESS_INTERVAL` seconds) and cleared at the end, elsewhere a line every
    :data:`PROGRESS_LINES` seconds."""

    def __init__(self, stream: TextIO | None):
        self.stream = stream
        self.tty = stream is not None and bool(getattr(stream, "isatty", lambda: False)())
        self.start = self.last = time.monotonic()
        self.width = 0

    def show(self, text: str) -> None:
        if self.stream is None:
            return
        now = time.monotonic()
        wait = PROGRESS_INTERVAL if self.tty else PROGRESS_LINES
        if now - self.start < PROGRESS_DELAY or now - self.last < wait:
            return
        self.last = now
        line = f"sampling: {text} [{now - self.start:.0f} s]"
        if self.tty:
            self.stream.write("\r" + line.ljust(self.width))
            self.width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.width:
            assert self.stream is not None  # a terminal
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
