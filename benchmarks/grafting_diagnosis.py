"""Why false edges win: instrumented grafting runs on planted Potts models (issue 16, item 1).

For each configuration (learner settings as JSON) on one planted model (graph family, number of
variables and of states, couplings 0.8-1.5, 20,000 Gibbs rows), the run records for every activated edge: its
score over lambda when it was chosen (from the model it was scored against), whether it is a
planted edge and its distance on the planted graph, its rank among all inactive pairs at that
moment, and the state of inference and weights at that moment: for the likelihood objective the
loopy-BP sweeps, whether BP converged and its largest node-marginal error against BP run to
1e-9; for both objectives the largest KKT violation over active edge groups (in units of
lambda), ``| ||grad_g|| / d_g - lambda | / lambda`` of the penalised data term. Finally the
weight norms of the false edges kept, and the same weights after re-optimising with 1,000
L-BFGS iterations (and BP to 1e-6) to test whether they were merely under-optimised.

Run: ``python benchmarks/grafting_diagnosis.py`` (the configurations of the issue-16 closing
note); output ``benchmarks/results/grafting_diagnosis.json`` (the Ising scale-free runs, ``--only
6 7``: ``grafting_diagnosis_ising.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import networkx as nx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streammn.grafting import EdgeGrafting, planted_potts  # noqa: E402
from streammn.grafting.bp import belief_propagation  # noqa: E402

# family, n, states, learner settings
CONFIGS = [
    ("tree_loops", 30, 3, {"objective": "likelihood", "climb": False}),  # issue 16's state
    ("tree_loops", 30, 3, {"objective": "likelihood", "strategy": "exhaustive"}),
    ("tree_loops", 30, 3, {"objective": "likelihood"}),  # + climbing
    ("random", 30, 3, {"objective": "likelihood"}),
    ("random", 30, 3, {}),  # defaults: pseudo-likelihood scores
    ("scale_free", 30, 3, {}),
    # the Ising scale-free graph: scores at the penalised optimum with the earlier lambda
    # 9 sqrt(log n / N) / k^3, then the defaults (scores at the unpenalised weights)
    ("scale_free", 50, 2, {"score_refit": False, "lambda_c": 4.5}),
    ("scale_free", 50, 2, {}),
]


def inactive_scores(learner):
    n = learner.n_vars
    iu, ju = np.triu_indices(n, 1)
    pairs = np.stack([iu, ju], 1)
    keep = np.array([(i, j) not in learner.active for i, j in pairs.tolist()])
    got, scores = learner.score_pairs(pairs[keep])
    return {tuple(p): s for p, s in zip(got.tolist(), scores.tolist())}


def kkt_violation(learner) -> float:
    if not learner.edges:
        return 0.0
    _, grad = learner._objective(0.0)(learner.theta)
    lay, lam = learner.layout, learner.strength
    return max(
        abs(
            np.linalg.norm(grad[lay.eoff[k] : lay.eoff[k + 1]]) / (lay.eoff[k + 1] - lay.eoff[k])
            - lam
        )
        / lam
        for k in range(lay.n_edges)
    )


def inference_state(learner) -> dict:
    if learner.objective != "likelihood" or learner._exact:
        return {}
    res = belief_propagation(
        learner.layout, learner.theta, learner.bp_damping, learner.bp_tol, learner.bp_max_iter
    )
    tight = belief_propagation(learner.layout, learner.theta, learner.bp_damping, 1e-9, 2000)
    nodes = learner.layout.uoff[-1]
    return {
        "bp_sweeps": int(res.iterations),
        "bp_converged": bool(res.converged),
        "bp_node_error": float(np.abs(res.marginals[:nodes] - tight.marginals[:nodes]).max()),
    }


def false_weight_norms(learner, true) -> list[float]:
    lay = learner.layout
    return sorted(
        float(np.linalg.norm(learner.theta[lay.eoff[k] : lay.eoff[k + 1]]))
        for k, e in enumerate(lay.edges.tolist())
        if tuple(e) not in true
    )


def run(family: str, n: int, states: int, params: dict, seed: int, rows: int) -> dict:
    mrf = planted_potts(family, n, states=states, coupling=(0.8, 1.5), seed=seed)
    data = mrf.sample(rows, seed=seed + 1, burn_in=200, thin=2, chains=8)
    true, graph = mrf.edges, nx.Graph(sorted(mrf.edges))
    learner = EdgeGrafting(mrf.schema, **params)
    learner.stats.update(data)
    learner.optimise()
    state = {
        "scores": inactive_scores(learner),
        "inference": inference_state(learner),
        "kkt": kkt_violation(learner),
    }
    log = []

    def record(lr):
        before, lam = state["scores"], lr.strength
        ranked = sorted(before, key=lambda e: -before[e])
        best_true = next((before[e] for e in ranked if e in true), 0.0)
        for e in (tuple(x) for x in lr.history[-1]["added"]):
            log.append(
                {
                    "step": lr.steps,
                    "edge": list(e),
                    "true": e in true,
                    "distance": nx.shortest_path_length(graph, *e),
                    "score_over_lambda": before[e] / lam,
                    "rank": ranked.index(e) + 1,
                    "best_true_score_over_lambda": best_true / lam,
                    "kkt_violation_before": state["kkt"],
                    **state["inference"],
                }
            )
        state.update(
            scores=inactive_scores(lr), inference=inference_state(lr), kkt=kkt_violation(lr)
        )

    learner.graft(callback=record)
    edges = set(learner.edges)
    kept = false_weight_norms(learner, true)
    learner.max_iter, learner.bp_tol, learner.bp_max_iter = 1000, 1e-6, 500
    learner.optimise()
    out = {
        "family": family,
        "n": n,
        "states": states,
        "params": params,
        "true_edges": len(true),
        "edges": len(edges),
        "recall": len(edges & true) / len(true),
        "precision": len(edges & true) / max(len(edges), 1),
        "false_activations": sum(not a["true"] for a in log),
        "false_at_distance_2": sum(not a["true"] and a["distance"] == 2 for a in log),
        "false_weight_norms": kept,
        "false_weight_norms_after_1000_iterations": false_weight_norms(learner, true),
        "activations": log,
    }
    print(json.dumps({k: v for k, v in out.items() if k != "activations"}), flush=True)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--only", type=int, nargs="*", help="indices into CONFIGS")
    p.add_argument("--out", default=str(ROOT / "benchmarks/results/grafting_diagnosis.json"))
    args = p.parse_args(argv)
    picked = [CONFIGS[k] for k in args.only] if args.only else CONFIGS
    results = [run(*config, args.seed, args.rows) for config in picked]
    Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
