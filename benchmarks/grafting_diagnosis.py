"""Why false edges win: one instrumented grafting run on issue 16's planted Potts model.

The model: 30 variables, 3 states, a random tree plus 9 loops (38 edges), Potts couplings of
magnitude 0.8-1.5, 20,000 Gibbs rows. The learner runs at the settings given (``--lambda`` etc.)
with the activation score computed either from the product of node marginals (``--score
product``, the first implementation) or from the model's pairwise marginal (``--score model``,
the fix). After every activation step it records, for each edge activated: its score, whether it
is a true edge, the score the same edge gets from the model's pairwise marginal by clamped BP,
the state of inference (BP sweeps, converged, node-marginal error against BP run to tol 1e-9)
and of the weights (the largest KKT violation over active groups, ``| ||grad_g|| / d_g -
lambda |`` on the data term, in units of lambda), and the rank of the best-scoring inactive true
edge among all inactive pairs under both scores. Output: JSON + a Markdown summary in
``benchmarks/results/grafting_diagnosis.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streammn.grafting import EdgeGrafting, planted_potts  # noqa: E402
from streammn.grafting.bp import belief_propagation  # noqa: E402
from streammn.grafting.inference import pair_offsets  # noqa: E402


def planted(seed: int, rows: int):
    mrf = planted_potts("tree_loops", 30, states=3, coupling=(0.8, 1.5), seed=seed)
    data = mrf.sample(rows, seed=seed + 1, burn_in=200, thin=2, chains=8)
    return mrf, data


def all_scores(learner, model_pairs: bool):
    """Scores of every inactive pair: product of node marginals or clamped-BP pair tables."""
    n = learner.n_vars
    iu, ju = np.triu_indices(n, 1)
    pairs = np.stack([iu, ju], 1)
    keep = np.array([(i, j) not in learner.active for i, j in pairs.tolist()])
    pairs = pairs[keep]
    got, counts, offsets, n_rows = learner.stats.flat_tables(pairs)
    cards = learner.cards
    if model_pairs:
        model = learner._inference.pair_tables(got)
    else:
        node = learner._inference.node_marginals
        uoff = learner.layout.uoff
        model = np.concatenate([np.outer(node[uoff[i]:uoff[i + 1]],
                                         node[uoff[j]:uoff[j + 1]]).ravel()
                                for i, j in got.tolist()])
    off = pair_offsets(got, cards)
    per = np.repeat(np.maximum(n_rows, 1), np.diff(offsets))
    diff = model - counts / per
    sq = np.add.reduceat(diff * diff, off[:-1])
    d = (cards[got[:, 0]] * cards[got[:, 1]]).astype(float)
    return got, np.sqrt(sq) / d


def kkt_violation(learner) -> float:
    """Largest ``| ||E_model - E_data||_g / d_g - lambda | / lambda`` over active edge groups."""
    if not learner.edges:
        return 0.0
    res = belief_propagation(learner.layout, learner.theta, learner.bp_damping, 1e-9, 2000)
    grad = res.marginals - learner._data_marginals() + 2 * learner.lambda2 * learner.theta
    lay = learner.layout
    worst = 0.0
    for k in range(lay.n_edges):
        g = grad[lay.eoff[k]:lay.eoff[k + 1]]
        worst = max(worst, abs(np.linalg.norm(g) / g.size - learner.strength) / learner.strength)
    return worst


def best_true_rank(pairs, scores, true) -> int:
    order = np.argsort(-scores)
    for r, k in enumerate(order.tolist()):
        if tuple(pairs[k].tolist()) in true:
            return r + 1
    return -1


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--steps", type=int, default=40, help="activation steps to instrument")
    p.add_argument("--out", default=str(ROOT / "benchmarks/results/grafting_diagnosis.json"))
    p.add_argument("--params", default="{}", help="EdgeGrafting settings as JSON")
    args = p.parse_args(argv)
    mrf, data = planted(args.seed, args.rows)
    true = mrf.edges
    learner = EdgeGrafting(mrf.schema, **json.loads(args.params))
    learner.stats.update(data)
    learner.optimise()
    log = []

    def record(lr):
        added = [tuple(e) for e in lr.history[-1]["added"]]
        res = belief_propagation(lr.layout, lr.theta, lr.bp_damping, lr.bp_tol, lr.bp_max_iter)
        tight = belief_propagation(lr.layout, lr.theta, lr.bp_damping, 1e-9, 2000)
        nodes = lr.layout.uoff[-1]
        entry = {"step": lr.steps, "edges": len(lr.edges),
                 "added": [[int(i), int(j), (i, j) in true] for i, j in added],
                 "added_scores": lr.history[-1].get("scores"),
                 "bp_sweeps": res.iterations, "bp_converged": res.converged,
                 "bp_node_error": float(np.abs(res.marginals[:nodes]
                                               - tight.marginals[:nodes]).max()),
                 "kkt_violation": kkt_violation(lr),
                 "recall": len(set(lr.edges) & true) / len(true),
                 "precision": len(set(lr.edges) & true) / max(len(lr.edges), 1)}
        for name, model_pairs in (("product", False), ("model", True)):
            pairs, scores = all_scores(lr, model_pairs)
            is_true = np.array([tuple(e) in true for e in pairs.tolist()])
            entry[f"{name}_best_true_rank"] = best_true_rank(pairs, scores, true)
            entry[f"{name}_max_false"] = float(scores[~is_true].max()) if (~is_true).any() else 0
            entry[f"{name}_max_true"] = float(scores[is_true].max()) if is_true.any() else 0
            entry[f"{name}_false_passing"] = int((scores[~is_true] > lr.strength).sum())
            entry[f"{name}_true_passing"] = int((scores[is_true] > lr.strength).sum())
        log.append(entry)
        print(json.dumps(entry), flush=True)

    # step 0: the empty model
    pairs, scores = all_scores(learner, False)
    is_true = np.array([tuple(e) in true for e in pairs.tolist()])
    start = {"lambda": learner.strength, "true_scores": np.percentile(scores[is_true], [0, 50, 100]).tolist(),
             "false_scores": np.percentile(scores[~is_true], [50, 90, 99, 100]).tolist(),
             "false_above_min_true": int((scores[~is_true] > scores[is_true].min()).sum())}
    print(json.dumps(start), flush=True)
    learner.graft(max_steps=args.steps, callback=record)
    out = Path(args.out)
    out.write_text(json.dumps({"params": learner.get_params() | {"schema": None},
                               "start": start, "steps": log}, indent=1, default=str))


if __name__ == "__main__":
    main()
