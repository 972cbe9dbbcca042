"""Read a file in batches, count every pairwise joint table, and show the strongest pairs.

python examples/count_pairs.py ../shared/data/plants/plants.train.data
"""

import sys

import numpy as np

from streammn.connectors import open_source
from streammn.stats import PairCounts


def main(path: str, top: int = 5) -> None:
    with open_source(path) as source:
        pairs = PairCounts(source.schema)
        for batch in source:
            pairs.update(batch)
    n = source.schema.n_vars
    scores = []
    for i in range(n):
        for j in range(i + 1, n):
            p = (pairs.table(i, j) + 0.5) / (pairs.table(i, j).sum() + 2.0)
            mi = float((p * np.log(p / np.outer(p.sum(1), p.sum(0)))).sum())
            scores.append((mi, source.schema[i].name, source.schema[j].name))
    print(f"{source.schema}: {source.offset:,} rows")
    for mi, a, b in sorted(scores, reverse=True)[:top]:
        print(f"  {a} - {b}: mutual information {mi:.3f} nats")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/plants/plants.train.data")
