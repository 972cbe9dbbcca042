"""Recover a planted graph: edge grafting and the ensemble of trees on Gibbs-sampled rows.

    python examples/planted_structure.py [family [n [states [rows]]]]

A Potts model is planted on a graph of the family (tree, tree_loops, grid, random, scale_free),
couplings 0.8-1.5; both learners run at their defaults on the sampled rows, and their graphs
are compared with the planted one (recall, precision) and their Markov networks with it on
test PLL.
"""

import sys

from streammn.et import EnsembleOfTrees
from streammn.grafting import EdgeGrafting, planted_potts


def recovery(found: set, truth: set) -> tuple[float, float]:
    """(recall, precision) of a found edge set against the true one."""
    hits = len(found & truth)
    return hits / len(truth), (hits / len(found) if found else 1.0)


def main(
    family: str = "random", n: int = 30, states: int = 3, rows: int = 20_000, seed: int = 0
) -> dict:
    planted = planted_potts(family, n, states, seed=seed)
    train = planted.sample(rows, seed=seed + 1)
    test = planted.sample(5_000, seed=seed + 2)
    results = {
        "planted": {"edges": len(planted.edges), "test_pll": planted.to_markov_network().pll(test)}
    }
    print(
        f"planted {family} graph: {n} variables with {states} states, "
        f"{len(planted.edges)} edges; {rows:,} training rows; "
        f"test PLL of the planted model {results['planted']['test_pll']:.4f}"
    )
    for name, learner in (
        ("grafting", EdgeGrafting(planted.schema)),
        ("ensemble of trees", EnsembleOfTrees(planted.schema)),
    ):
        learner.fit(train)
        found = {tuple(sorted(map(int, e))) for e in learner.edges}
        recall, precision = recovery(found, planted.edges)
        pll = learner.to_markov_network().pll(test)
        results[name] = {
            "edges": len(found),
            "recall": recall,
            "precision": precision,
            "test_pll": pll,
        }
        print(
            f"{name:>18}: {len(found)} edges, recall {recall:.3f}, "
            f"precision {precision:.3f}, test PLL {pll:.4f}"
        )
    return results


if __name__ == "__main__":
    args = sys.argv[1:]
    main(*(args[:1]), *(int(a) for a in args[1:4]))
