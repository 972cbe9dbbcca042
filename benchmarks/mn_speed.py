"""Speed of DN2MN conversion and PLL scoring on a plants-sized synthetic dependency network.

Needs no DTSL: the DN has one random decision tree per variable over the plants schema (69
binary variables; see ``random_trees.py``), sized so that DN2MN's default conversion yields
about 430k features like Libra's plants model. Conversion uses the plants training marginals;
scoring uses the plants test set (3,482 rows). Times are the best of ``--repeat`` warm runs
(numba compilation excluded), as wall-clock and process CPU seconds.

    PYTHONPATH=. python benchmarks/mn_speed.py [--data /work/shared/data] [--leaves 175]

Writes ``benchmarks/results/mn_speed.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from random_trees import random_tree_dn  # noqa: E402

from streammn import Schema  # noqa: E402
from streammn.dn2mn import ORDERINGS, dn2mn  # noqa: E402
from streammn.features import FeatureSet  # noqa: E402
from streammn.inference import pll  # noqa: E402
from streammn.weights import pll_objective  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def timed(fn, repeat):
    fn()  # warm-up: compilation / cache load
    best_wall, best_cpu, out = np.inf, np.inf, None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        best_wall = min(best_wall, time.perf_counter() - w)
        best_cpu = min(best_cpu, time.process_time() - c)
    return out, round(best_wall, 3), round(best_cpu, 3)


def load(path):
    return np.loadtxt(path, delimiter=",", dtype=np.uint8)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/work/shared/data")
    ap.add_argument("--leaves", type=int, default=175)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    d = Path(args.data) / "plants"
    train, test = load(d / "plants.train.data"), load(d / "plants.test.data")
    schema = Schema.binary(train.shape[1])
    dn = random_tree_dn(schema, args.leaves, seed=args.seed)
    res = {"dataset": "plants schema, random trees", "leaves_per_tree": args.leaves,
           "dn_features": dn.n_features, "train_rows": len(train), "test_rows": len(test)}
    mn, res["dn2mn_wall_s"], res["dn2mn_cpu_s"] = timed(lambda: dn2mn(dn, train=train),
                                                        args.repeat)
    res["mn_features"] = mn.n_features
    res["mn_mean_feature_length"] = round(float(mn.features.lengths().mean()), 2)
    raw = dn2mn(dn, train=train, merge=False)
    res["mn_features_before_merge"] = raw.n_features
    res["variants"] = {}
    for base in ("marginals", "single"):
        for orderings in ORDERINGS:
            m, wall, cpu = timed(lambda: dn2mn(dn, base=base, orderings=orderings, train=train,
                                               base_instance=np.zeros(schema.n_vars, int)), 1)
            res["variants"][f"{base}/{orderings}"] = {"features": m.n_features, "wall_s": wall,
                                                      "cpu_s": cpu}
    res["mn_test_pll"], res["mn_pll_wall_s"], res["mn_pll_cpu_s"] = timed(
        lambda: mn.pll(test), args.repeat)
    res["dn_test_pll"], res["dn_pll_wall_s"], res["dn_pll_cpu_s"] = timed(
        lambda: pll(dn, test), args.repeat)
    _, res["pll_gradient_train_wall_s"], res["pll_gradient_train_cpu_s"] = timed(
        lambda: pll_objective(mn.features, train), 1)
    leaves = FeatureSet.concat(schema, dn.cpds).merge_duplicates(drop_zero=False)
    res["lw_features"] = leaves.n_features
    _, res["lw_gradient_train_wall_s"], res["lw_gradient_train_cpu_s"] = timed(
        lambda: pll_objective(leaves, train), args.repeat)
    res["machine"] = {"cpus": os.cpu_count(), "numba_threads": numba.get_num_threads(),
                      "processor": platform.processor() or platform.machine(),
                      "load_average": [round(x, 2) for x in os.getloadavg()]}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "mn_speed.json").write_text(json.dumps(res, indent=2) + "\n")
    lines = [
        "# DN2MN and PLL speed (plants-sized synthetic DN)", "",
        f"Random trees, {args.leaves} leaves per tree, over the plants schema; "
        f"{res['dn_features']:,} DN leaf features. Machine: {res['machine']}. "
        "Best of warm runs.", "",
        "| step | result | wall s | CPU s | Libra reference |", "|---|---|---|---|---|",
        f"| DN2MN default (rotations2 + marginals, merged) | {res['mn_features']:,} features "
        f"({res['mn_features_before_merge']:,} before merge) | {res['dn2mn_wall_s']} | "
        f"{res['dn2mn_cpu_s']} | 1.28 s CPU (433,724 features) |",
        f"| MN PLL, plants test (3,482 rows) | {res['mn_test_pll']:.3f} | "
        f"{res['mn_pll_wall_s']} | {res['mn_pll_cpu_s']} | 20.4 s CPU |",
        f"| DN PLL, plants test | {res['dn_test_pll']:.3f} | {res['dn_pll_wall_s']} | "
        f"{res['dn_pll_cpu_s']} | |",
        f"| PLL + gradient, plants train (17,412 rows) | | "
        f"{res['pll_gradient_train_wall_s']} | {res['pll_gradient_train_cpu_s']} | |",
        f"| PLL + gradient of the DN's leaf features (LW), plants train | "
        f"{res['lw_features']:,} features | {res['lw_gradient_train_wall_s']} | "
        f"{res['lw_gradient_train_cpu_s']} | Libra LW: 8.5 s for a whole fit |",
        "", "| variant | features | wall s | CPU s |", "|---|---|---|---|"]
    lines += [f"| {k} | {v['features']:,} | {v['wall_s']} | {v['cpu_s']} |"
              for k, v in res["variants"].items()]
    (RESULTS / "mn_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
