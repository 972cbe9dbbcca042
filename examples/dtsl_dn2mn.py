"""Exact DTSL trees -> dependency network -> Markov network (DN2MN) on a benchmark dataset: the
paper's closed form, and the weights streammn publishes (refined on the training rows, judged on
one row in five held out of the fit).

    python examples/dtsl_dn2mn.py ../shared/data nltcs 0.1
"""

import sys
import time
from pathlib import Path

from streammn.connectors import open_source
from streammn.dn.conversion import dn2mn
from streammn.dtsl import DTSL


def main(data_dir: str, name: str, kappa: float) -> dict:
    base = Path(data_dir) / name
    source = open_source(base / f"{name}.train.data")
    t0 = time.process_time()
    dn = DTSL(source.schema, kappa=kappa, mode="exact").fit(source).to_dependency_network()
    t1 = time.process_time()
    source.rewind()
    train = source.read_all()
    mn = dn2mn(dn, train=train, weights="closed-form")
    t2 = time.process_time()
    published = dn2mn(dn, train=train)  # weights="refined" when given rows
    t3 = time.process_time()
    test = open_source(base / f"{name}.test.data", schema=source.schema).read_all()
    result = {
        "dn_pll": dn.pll(test),
        "mn_pll": mn.pll(test),
        "published_pll": published.pll(test),
        "features": mn.n_features,
        "learn_cpu_s": t1 - t0,
        "dn2mn_cpu_s": t2 - t1,
        "refine_cpu_s": t3 - t2,
    }
    print(
        f"{name}: test PLL DN {result['dn_pll']:.3f}, MN closed form {result['mn_pll']:.3f}, "
        f"refined {result['published_pll']:.3f} ({mn.n_features:,} features); CPU s: trees "
        f"{t1 - t0:.2f}, DN2MN {t2 - t1:.2f}, refinement {t3 - t2:.2f}"
    )
    return result


if __name__ == "__main__":
    args = sys.argv[1:] or ["../shared/data", "nltcs", "0.1"]
    main(args[0], args[1], float(args[2]))
