"""Progress bars where a person waits (score, every learner's fit, with the phases after the
rows): on a terminal only, silent with --quiet, and the CMLL's blocked runs give the same
marginals as one run."""

import io
import sys

import numpy as np

from tqdm import tqdm

from helpers.helpers_mn import random_featureset
from streammn import Schema
from streammn.cli import main
from streammn.formats import write_model
from streammn.inference.gibbs import gibbs_marginals
from streammn.network.model import MarkovNetwork
from streammn.progress_bar import counting_steps, next_phase, progress_bar


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_score_shows_a_bar_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(0)
    schema = Schema.binary(8)
    write_model(tmp_path / "m.json", schema, random_featureset(rng, schema, 20))
    np.savetxt(tmp_path / "rows.data", rng.integers(0, 2, (700, 8)), fmt="%d", delimiter=",")
    args = ["score", str(tmp_path / "m.json"), str(tmp_path / "rows.data"), "--cmll"]
    for extra, shown in (([], True), (["--quiet"], False)):
        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        assert main([*args, "--samples", "20", *extra]) == 0
        bar = terminal.getvalue()
        assert ("scoring rows.data: " in bar) == shown, bar
        assert "cmll" in capsys.readouterr().out
    assert main([*args, "--samples", "20"]) == 0  # stderr no terminal: nothing on it
    assert capsys.readouterr().err == ""


def test_blocked_gibbs_marginals_equal_one_run():
    rng = np.random.default_rng(1)
    schema = Schema.from_cardinalities([2, 3, 2, 4, 2, 2, 3, 2])
    model = MarkovNetwork(schema, random_featureset(rng, schema, 30))
    evidence = rng.integers(0, 2, (1100, 8))
    evidence[rng.random(evidence.shape) < 0.4] = -1
    for method in ("table", "bitset", "incremental"):
        once = gibbs_marginals(model, evidence, burn_in=3, samples=10, chains=2, method=method)
        done = []
        blocked = gibbs_marginals(
            model, evidence, burn_in=3, samples=10, chains=2, method=method, progress=done.append
        )
        np.testing.assert_array_equal(blocked, once)
        assert sum(done) == 1100 and len(done) > 1


def test_dtsl_fit_shows_a_bar_only_when_asked_and_learns_the_same(capsys):
    from streammn.connectors import ArraySource
    from streammn.dtsl import DTSL

    rows = np.random.default_rng(2).integers(0, 2, (3000, 6)).astype(np.uint8)
    schema = Schema.binary(6)
    for mode, what in (("hoeffding", "learning DTSL"), ("exact", "growing exact DTSL")):
        learners = []
        for progress in (True, False):
            learner = DTSL(schema, mode=mode, cpd="tree", weights="closed-form", grace_period=50)
            learners.append(learner.fit(ArraySource(rows, schema, 500), progress=progress))
            assert (what in capsys.readouterr().err) == progress
        assert learners[0].to_bytes() == learners[1].to_bytes()


def test_dtsl_fit_counts_the_regressions_batch_fits(capsys):
    from streammn.dtsl import DTSL
    from streammn.logistic.batch import PATH_STEPS

    rows = np.random.default_rng(4).integers(0, 2, (2000, 6)).astype(np.uint8)
    for mode in ("hoeffding", "exact"):
        shown = DTSL(Schema.binary(6), mode=mode, cpd="lr", weights="closed-form")
        shown.fit(rows, progress=True)
        assert (
            f"fitting the regressions:   0%|          | 0/{PATH_STEPS + 1}"
            in capsys.readouterr().err
        )
        quiet = DTSL(Schema.binary(6), mode=mode, cpd="lr", weights="closed-form").fit(rows)
        assert capsys.readouterr().err == ""
        assert shown.to_bytes() == quiet.to_bytes()


def test_every_learner_fit_takes_progress_and_learns_the_same(capsys):
    from streammn.csgs import CSGS
    from streammn.et import EnsembleOfTrees
    from streammn.grafting import EdgeGrafting

    rows = np.random.default_rng(3).integers(0, 2, (600, 5)).astype(np.uint8)
    schema = Schema.binary(5)
    for make, phases in (
        (lambda: EdgeGrafting(schema), ["grafting edges"]),
        (
            lambda: CSGS(schema, max_iter=20),
            ["graphs (CSGS): 0 steps", "fitting the weights (CSGS): 0 evaluations"],
        ),
        (lambda: EnsembleOfTrees(schema, sample_rows=300), ["weights (ET): 0 iterations"]),
    ):
        shown = make().fit(rows, progress=True)
        err = capsys.readouterr().err
        assert all(phase in err for phase in phases), err
        quiet = make().fit(rows)
        assert capsys.readouterr().err == ""
        assert shown.to_bytes() == quiet.to_bytes(), phases
        published = (shown.to_markov_network(), quiet.to_markov_network())
        assert published[0].features.equals(published[1].features), phases


def test_a_phase_counts_the_steps_its_search_asks_about():
    bar = tqdm(file=io.StringIO(), total=10, unit=" rows", unit_scale=True)
    bar.update(10)
    stops = iter([False, False, True])
    next_phase(bar, "searching", "steps")
    step = counting_steps(bar, lambda: next(stops))
    assert [step(), step(), step()] == [False, False, True]
    assert (bar.n, bar.total, bar.desc, bar.unit) == (3, None, "searching", " steps")
    never = counting_steps(bar)
    assert not never() and bar.n == 4


def test_a_row_count_reads_whole_below_a_thousand_and_scaled_above():
    """tqdm's scaled count would read '0.00 rows' before the first batch."""
    seen = []
    for n in (0, 5, 999, 1_234_567):
        bar = progress_bar(True, "learning")
        bar.fp = Terminal()
        bar.update(n)
        seen.append(str(bar).split(" [")[0])
        bar.close()
    assert seen == [
        "learning: 0 rows",
        "learning: 5 rows",
        "learning: 999 rows",
        "learning: 1.23M rows",
    ]
