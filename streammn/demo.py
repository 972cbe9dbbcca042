"""``streammn demo``: learn online from rows sampled from a planted Markov network.

The demo builds a pairwise binary Markov network (a random spanning tree plus a few extra
edges, each an agreement or disagreement coupling), streams rows Gibbs-sampled from it, learns
with one-pass Hoeffding DTSL while writing snapshots, and reports how the score evolved and how
many planted edges the learned trees found (recall and precision of the tested variable pairs).
"""

from __future__ import annotations

import contextlib
from typing import cast

import numpy as np

from streammn.connectors.synthetic import SyntheticSource
from streammn.features import FeatureSet
from streammn.network.model import MarkovNetwork
from streammn.schema import Schema
from streammn.errors import SettingsError


def planted_network(
    n_vars: int, seed: int = 0, coupling: float = 1.0, extra_edges: int | None = None
) -> tuple[MarkovNetwork, set[tuple[int, int]]]:
    """A pairwise binary network and its edge set.

    Edges: each variable ``i > 0`` joins a random earlier one (a spanning tree), plus
    ``extra_edges`` (default ``n_vars // 4``) random other pairs. An edge ``(i, j)`` adds weight
    ``s * w`` when ``x_i == x_j`` with ``w ~ U(0.7, 1.3) * coupling`` and a random sign ``s``;
    each variable gets a small bias ``U(-0.3, 0.3)`` on ``x_i = 1``.
    """
    if n_vars < 2:
        raise SettingsError("the planted network needs at least 2 variables")
    rng = np.random.default_rng(seed)
    edges = {(int(rng.integers(i)), i) for i in range(1, n_vars)}
    extra = n_vars // 4 if extra_edges is None else extra_edges
    max_edges = n_vars * (n_vars - 1) // 2
    while len(edges) < min(n_vars - 1 + extra, max_edges):
        a, b = sorted(rng.choice(n_vars, size=2, replace=False).tolist())
        edges.add((a, b))
    features = []
    for a, b in sorted(edges):
        w = rng.uniform(0.7, 1.3) * coupling * rng.choice([-1.0, 1.0])
        features += [(w, [(a, 0, True), (b, 0, True)]), (w, [(a, 1, True), (b, 1, True)])]
    features += [(rng.uniform(-0.3, 0.3), [(i, 1, True)]) for i in range(n_vars)]
    schema = Schema.binary(n_vars)
    return MarkovNetwork(schema, FeatureSet.from_features(schema, features)), edges


def dependency_edges(dn) -> set[tuple[int, int]]:
    """Pairs ``(i, j)``, ``i < j``, where the CPD of one variable tests the other: the
    dependency network's estimate of the Markov blankets."""
    edges = set()
    for i, cpd in enumerate(dn.cpds):
        for j in np.unique(cpd.var).tolist():
            if j != i:
                edges.add((min(i, j), max(i, j)))
    return edges


def run_demo(
    out: str,
    n_rows: int = 100_000,
    n_vars: int = 16,
    seed: int = 0,
    progress=None,
    compile_ahead: bool = False,
) -> str:
    """Run the demo into snapshot directory ``out``; returns the report text.
    ``compile_ahead``: on a first run, compile the snapshots' kernels in a second process
    from the start (:mod:`streammn.stream.compile_ahead`), beside the sampler's and the
    learner's."""
    from streammn.dtsl import DTSL
    from streammn.stream.compile_ahead import CompileAhead
    from streammn.stream.engine import StreamLearner
    from streammn.inference import sample
    from streammn.stream.snapshot import load_snapshot

    planted, truth = planted_network(n_vars, seed=seed)
    learner = DTSL(planted.schema, mode="hoeffding", seed=seed)
    formats = ("json", "mn", "uai")
    with (
        CompileAhead(learner, formats, refine=True, validate=True)
        if compile_ahead
        else contextlib.nullcontext()
    ):
        validation = sample(planted, 5000, seed=seed + 1)
        source = SyntheticSource(planted, n_rows=n_rows, batch_size=4096, seed=seed)
        engine = StreamLearner(
            source,
            learner,
            out,
            every_rows=max(n_rows // 5, 1),
            keep=10,
            validation=validation,
            formats=formats,
            progress=progress,
        )
        engine.run()
    model = load_snapshot(out)
    found = dependency_edges(cast(DTSL, engine.learner).to_dependency_network())
    hits = len(found & truth)
    lines = [
        f"Planted network: {n_vars} binary variables, {len(truth)} edges; streamed "
        f"{n_rows:,} sampled rows.",
        "",
        "rows seen   prequential PLL   validation PLL (MN)",
    ]
    for h in engine.state.history:
        preq = "n/a" if h["prequential_pll"] is None else f"{h['prequential_pll']:.4f}"
        val = "n/a" if h["validation_pll"] is None else f"{h['validation_pll']:.4f}"
        lines.append(f"{h['rows_seen']:>9,}   {preq:>15}   {val:>14}")
    lines += [
        "",
        f"Planted model's own validation PLL: {planted.pll(validation):.4f}",
        f"Learned model's validation PLL: {model.pll(validation):.4f} "
        f"({model.n_features:,} features)",
        f"Structure: the learned trees test {len(found)} variable pairs; {hits} of the "
        f"{len(truth)} planted edges among them (recall {hits / len(truth):.0%}, "
        f"precision {hits / max(len(found), 1):.0%}).",
        f"Snapshots in {out} (load one with streammn.load_snapshot(path)).",
    ]
    return "\n".join(lines)
