"""Gibbs sampling a user can trust (issue 38): split R-hat and autocorrelation times on chains
whose answers are known by hand, rows whose column means match nltcs's exact marginals, the cap's
warning, progress lines, and the ``sample`` command's report."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers.datasets import DATA, ROOT
from streammn import DTSL, FeatureSet, MarkovNetwork, Schema
from streammn.dn import DependencyNetwork
from streammn.inference import (
    InferenceError,
    SamplingWarning,
    convergence,
    gibbs,
    sample,
    sample_chains,
    sample_diagnosed,
    sampling,
)
from streammn.inference.convergence import autocorrelation_time, diagnose, split_rhat


@pytest.fixture(scope="module")
def nltcs_model():
    """DTSL's network of nltcs's first 4,000 training rows (16 binary variables, 65,536 joint
    states; about 2,600 features, so enumerating them takes a second, not the full data's 5)."""
    rows = np.loadtxt(DATA / "nltcs" / "nltcs.train.data", delimiter=",", dtype=np.uint8)
    learner = DTSL(Schema.binary(16), weights="closed-form", seed=0).fit(rows[:4000])
    return learner.to_markov_network()


def _ferromagnet(n_vars=8, coupling=0.5):
    """Every pair prefers equal values: two modes that Gibbs chains leave slowly."""
    schema = Schema.from_cardinalities([2] * n_vars)
    feats = [(0.3, [(0, 1, True)])]
    for i in range(n_vars):
        for j in range(i + 1, n_vars):
            feats += [(coupling, [(i, 1, True), (j, 1, True)])]
            feats += [(coupling, [(i, 0, True), (j, 0, True)])]
    return MarkovNetwork(schema, FeatureSet.from_features(schema, feats))


# split R-hat and autocorrelation time -------------------------------------------------------
def test_split_rhat_of_chains_known_by_hand():
    # two identical chains 0,1,0,1,...: four halves of mean 1/2 and variance 1/3 (ddof 1), so
    # W = 1/3, B/n = 0 and R = sqrt((3/4 * 1/3) / (1/3)) = sqrt(3/4)
    chain = np.array([0, 1, 0, 1, 0, 1, 0, 1], dtype=float)
    same = np.stack([chain, chain], axis=1)[:, :, None]
    assert split_rhat(same)[0] == pytest.approx(np.sqrt(3 / 4))
    # the second chain shifted by 1: half means 1/2, 1/2, 3/2, 3/2, whose variance is 1/3, so
    # R = sqrt((1/4 + 1/3) / (1/3)) = sqrt(7/4)
    shifted = np.stack([chain, chain + 1], axis=1)[:, :, None]
    assert split_rhat(shifted)[0] == pytest.approx(np.sqrt(7 / 4))
    # a chain that drifts: its own two halves disagree (means 0.5 and 2.5, W = 1/3):
    # B/n = var(0.5, 2.5, 0.5, 2.5) = 4/3, R = sqrt((1/4 + 4/3) / (1/3)) = sqrt(19/4)
    drift = np.concatenate([chain[:4], chain[4:] + 2])
    assert split_rhat(np.stack([drift, drift], 1)[:, :, None])[0] == pytest.approx(np.sqrt(19 / 4))
    # constant halves: all at one value (1), or at different values (infinite)
    flat = np.zeros((8, 3, 2))
    flat[:, 2, 1] = 1.0
    np.testing.assert_array_equal(split_rhat(flat), [1.0, np.inf])


def test_autocorrelation_time_of_an_ar1_process():
    # x_t = rho x_{t-1} + noise: rho_t = rho**t, so tau = 1 + 2 sum rho**t = (1 + rho) / (1 - rho)
    rng = np.random.default_rng(0)
    rho, n, chains = 0.8, 50_000, 4
    x = np.zeros((n, chains))
    noise = rng.normal(size=(n, chains))
    for t in range(1, n):
        x[t] = rho * x[t - 1] + noise[t]
    assert autocorrelation_time(x[:, :, None])[0] == pytest.approx(9.0, rel=0.1)
    assert autocorrelation_time(noise[:, :, None])[0] == pytest.approx(1.0, abs=0.05)


def test_diagnose_sees_chains_stuck_in_different_modes():
    rng = np.random.default_rng(1)
    mixed = rng.integers(0, 3, size=(2000, 4, 2), dtype=np.uint8)
    rhat, tau = diagnose(mixed, np.array([3, 3]))
    assert rhat < 1.01 and tau < 1.2
    stuck = mixed.copy()
    stuck[:, :2, 0] = np.minimum(stuck[:, :2, 0], 1)  # two chains never visit value 2
    assert diagnose(stuck, np.array([3, 3]))[0] > 1.1


# rows against exact marginals ---------------------------------------------------------------
def test_defaults_give_nltcs_exact_marginals_within_001(nltcs_model):
    """The column means of sampled rows against the model's own marginals, enumerated over
    its 65,536 states. 100,000 rows: independent draws would be about 0.003 off at worst, so
    0.01 tells a chain that has not forgotten its start or rows closer than its
    autocorrelation time (the old default, 100 sweeps of burn-in and every sweep kept, was
    0.05-0.1 off at 1,000 rows)."""
    exact = np.array([p[1] for p in nltcs_model.marginals()])
    rows, diag = sample_diagnosed(nltcs_model, 100_000, seed=0)
    assert rows.shape == (100_000, 16)
    assert np.abs(rows.mean(axis=0) - exact).max() < 0.01
    assert diag.converged and diag.rhat <= convergence.RHAT_TARGET
    assert diag.chains == convergence.DEFAULT_CHAINS
    assert diag.thin >= diag.tau >= 1 and diag.burn_in >= convergence.FIRST_PILOT_SWEEPS // 2
    # the pilot's kept half gave the first rows: burn-in, then one row every thin sweeps
    assert diag.sweeps >= diag.burn_in + 100_000 // diag.chains * diag.thin
    assert diag.sweeps < 2 * diag.burn_in + (100_000 // diag.chains + 1) * diag.thin


def test_options_of_the_python_api():
    model = _ferromagnet()
    _, diag = sample_diagnosed(model, 1000, seed=0)
    _, strict = sample_diagnosed(model, 1000, seed=0, rhat_target=1.002, chains=8)
    assert strict.chains == 8 and strict.rhat_target == 1.002
    assert strict.rhat <= 1.002 < diag.rhat and strict.burn_in > diag.burn_in
    _, given = sample_diagnosed(model, 1000, seed=0, burn_in=300)  # thinning still chosen
    assert given.burn_in == 300 and given.thin > 1 and given.converged
    _, given = sample_diagnosed(model, 1000, seed=0, thin=3)  # burn-in still chosen
    assert given.thin == 3 and given.rhat <= 1.01
    with pytest.raises(InferenceError, match="rhat_target"):
        sample_diagnosed(model, 10, rhat_target=1.0)
    with pytest.raises(InferenceError, match="max_sweeps"):
        sample_diagnosed(model, 10, max_sweeps=0)


def test_auto_burn_in_and_thinning_on_a_slowly_mixing_model():
    model = _ferromagnet()
    exact = np.array([p[1] for p in model.marginals()])  # brute-force enumeration
    for seed in (0, 1):
        rows, diag = sample_diagnosed(model, 4000, seed=seed)
        assert diag.converged and diag.thin > 10 and diag.burn_in >= 64
        assert np.abs(rows.mean(axis=0) - exact).max() < 0.035
        # the old default (100 sweeps of burn-in, every sweep kept) is 0.05-0.08 off here
        old = sample(model, 4000, seed=seed, burn_in=100, thin=1)
        assert np.abs(old.mean(axis=0) - exact).max() > 0.035
        auto = sample(model, 4000, seed=seed, burn_in="auto", thin="auto")
        np.testing.assert_array_equal(auto, rows)


def test_rows_do_not_depend_on_how_the_run_is_cut(monkeypatch):
    model = _ferromagnet()
    rows, diag = sample_diagnosed(model, 3000, seed=2)
    assert sampling._Chains(model, 4, 2, sampling._Progress(None)).per_call > 10_000
    # 7 sweeps per kernel call (a sweep of 4 chains costs 4 * 10 * 8 units), a number that
    # divides neither the pilot's rounds nor the thinning
    monkeypatch.setattr(sampling, "CALL_NS", 7 * 4 * 10 * 8)
    again, diag_again = sample_diagnosed(model, 3000, seed=2)
    np.testing.assert_array_equal(again, rows)
    assert diag_again == diag
    # the incremental chains (models too large to tabulate) follow the same paths
    monkeypatch.setattr(gibbs, "TABLE_STATES", 0)
    incremental, diag_incremental = sample_diagnosed(model, 3000, seed=2)
    np.testing.assert_array_equal(incremental, rows)
    assert diag_incremental == diag


def test_a_long_pilot_keeps_every_other_state(monkeypatch):
    """With a record budget of a few sweeps, the pilot keeps every 2**k-th state: the
    thinning is then a multiple of that stride and the rows still match the marginals."""
    model = _ferromagnet()
    exact = np.array([p[1] for p in model.marginals()])
    monkeypatch.setattr(sampling, "TRACE_BYTES", 4 * 8 * 64)
    rows, diag = sample_diagnosed(model, 20_000, seed=3)
    # 64 states of 4 chains fit: the stride is 32 or more once the pilot has its 2,048 sweeps,
    # the fewest that are 40 autocorrelation times (about 43 sweeps) here
    assert diag.converged and diag.thin % 32 == 0
    assert np.abs(rows.mean(axis=0) - exact).max() < 0.03


def test_fixed_counts_draw_the_rows_they_always_did(monkeypatch):
    rng = np.random.default_rng(11)
    schema = Schema.from_cardinalities([2, 3, 2, 2, 3, 2])
    from helpers.helpers_mn import random_featureset

    mn = MarkovNetwork(schema, random_featureset(rng, schema, 16, max_len=3, scale=0.8))
    dn = DependencyNetwork(schema, [random_featureset(rng, schema, 5) for _ in range(6)])
    for table in (gibbs.TABLE_STATES, 0):
        monkeypatch.setattr(gibbs, "TABLE_STATES", table)
        for model in (mn, dn):
            rows = sample(model, 500, seed=4, burn_in=30, thin=2)
            old = sample_chains(model, 500, 16, 30, 2, gibbs.chain_seeds(4, 16))
            np.testing.assert_array_equal(rows, old)
    # with both counts given the diagnostics are those of the rows (no warning)
    _, diag = sample_diagnosed(_ferromagnet(), 4000, seed=0, burn_in=100, thin=1)
    assert (diag.chains, diag.burn_in, diag.thin) == (16, 100, 1)
    assert not diag.converged and diag.rhat > 1.01  # every sweep kept: the chains disagree


def test_the_cap_warns_with_the_rhat_reached():
    model = _ferromagnet(coupling=1.0)  # the two modes are nearly never crossed
    with pytest.warns(SamplingWarning, match=r"NOT converged.*split R-hat .*cap of 256 sweeps"):
        rows, diag = sample_diagnosed(model, 100, seed=0, max_sweeps=256)
    assert not diag.converged and diag.rhat > 1.01 and diag.burn_in == 128
    assert rows.shape == (100, 8)


def test_progress_only_on_a_stream_that_asks_for_it(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sampling, "PROGRESS_DELAY", 0.0)
    monkeypatch.setattr(sampling, "PROGRESS_INTERVAL", 0.0)
    monkeypatch.setattr(sampling, "CALL_NS", 1e5)  # many calls, so many chances to print
    model = _ferromagnet()
    quiet, _ = sample_diagnosed(model, 2000, seed=1)
    tty = Terminal()
    rows, _ = sample_diagnosed(model, 2000, seed=1, progress=tty)
    np.testing.assert_array_equal(rows, quiet)
    text = tty.getvalue()
    assert "\rsampling: burn-in" in text and "split R-hat" in text and "rows " in text
    assert text.endswith("\r") and "\n" not in text  # one line rewritten, then cleared


# the command -------------------------------------------------------------------------------
def test_sample_command_verbose_reports_burn_in_and_rhat(nltcs_model, tmp_path):
    """``streammn sample --verbose`` end to end: rows on standard output, the chains' report
    on standard error, and no progress line when standard error is not a terminal."""
    from streammn.formats import write_model

    path = tmp_path / "nltcs.json"
    write_model(path, nltcs_model.schema, nltcs_model.features)
    proc = subprocess.run(
        [sys.executable, "-m", "streammn.cli", "sample", str(path), "-n", "300", "--verbose"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    rows = np.loadtxt(io.StringIO(proc.stdout), delimiter=",", dtype=np.uint8)
    assert rows.shape == (300, 16)
    _, diag = sample_diagnosed(nltcs_model, 300)
    np.testing.assert_array_equal(rows, sample(nltcs_model, 300, burn_in="auto", thin="auto"))
    assert proc.stderr == f"streammn sample: {diag.describe()}\n"
    assert "4 Gibbs chains converged: burn-in" in proc.stderr and "split R-hat 1.0" in proc.stderr


def test_sample_command_options(tmp_path, capsys):
    from streammn.cli import main
    from streammn.formats import write_model

    model = _ferromagnet(n_vars=5)
    write_model(tmp_path / "m.json", model.schema, model.features)
    out = tmp_path / "rows.data"
    argv = ["sample", str(tmp_path / "m.json"), "-n", "50", "--out", str(out)]
    assert main([*argv, "--rhat", "1.05", "--chains", "6", "--verbose", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "6 Gibbs chains" in err and "target 1.05" in err
    assert main([*argv, "--max-sweeps", "128", "--verbose"]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "NOT converged" in err and "cap of 128 sweeps" in err
    assert main([*argv, "--rhat", "1"]) == 2 and "above 1" in capsys.readouterr().err
    assert main([*argv, "--thin", "often"]) == 2
    assert main([*argv, "--burn-in", "100", "--thin", "1"]) == 0  # the rows sample() draws
    np.testing.assert_array_equal(
        np.loadtxt(out, delimiter=",", dtype=np.uint8), sample(model, 50, burn_in=100)
    )
    # the help names the library's defaults
    assert main(["sample", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default: {convergence.RHAT_TARGET})" in text
    assert f"(default: {convergence.MAX_SWEEPS:,})" in text
    assert f"default: {convergence.DEFAULT_CHAINS} with auto" in text
    assert f"else {sampling.FIXED_CHAINS})" in text
