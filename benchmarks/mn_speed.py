"""Speed of DN2MN, PLL weight learning, PLL scoring and CMLL, next to Libra's figures.

Two parts (``--part``):

* ``synthetic``: a plants-sized synthetic dependency network (no DTSL): one random decision tree
  per variable over the plants schema (69 binary variables; see ``random_trees.py``), sized so
  that DN2MN's default conversion yields about 430k features like Libra's plants model.
  Conversion uses the plants training marginals; scoring the plants test set (3,482 rows).
* ``real`` (issue 13): the exact-DTSL DN of plants and of nltcs at kappa 0.1 (Libra's choice in
  REFERENCE.md) and its default DN2MN MN. LW (the DN's leaf features from zero weights, one
  prior stddev 1.0, 100 L-BFGS iterations, plants train), DN2MN+refine (10 iterations as in
  ``table4.py``, plants train / valid), MN PLL scoring of the plants test set, and CMLL (4
  groups, 100 burn-in, 1,000 samples as Libra) of the full nltcs test set and of the first
  ``--plants-cmll-rows`` plants test rows (0: all 3,482), extrapolated linearly to the full set
  when a subset is run (chains are independent, so cost is linear in rows). ``--part cmll``
  reruns only the CMLL figures, ``--part weights`` only LW, refine and scoring (the other
  ``real`` figures are kept from the results file).

Times: the ``synthetic`` part reports the best of ``--repeat`` warm runs; the ``real`` part one
warm run per step (compilation excluded by a warm-up on a few rows), wall-clock and process CPU
seconds (all threads). The machine is shared: the load average is recorded with the results.

    PYTHONPATH=. python benchmarks/mn_speed.py [--part real] [--plants-cmll-rows 128]

Writes ``benchmarks/results/mn_speed.json`` (both parts) and ``.md``.
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

from streammn.connectors.array import ArraySource  # noqa: E402
from streammn import Schema  # noqa: E402
from streammn.dn.conversion import ORDERINGS, dn2mn  # noqa: E402
from streammn.dtsl import DTSL  # noqa: E402
from streammn.features import FeatureSet  # noqa: E402
from streammn.inference import cmll, pll  # noqa: E402
from streammn.network.model import MarkovNetwork  # noqa: E402
from streammn.network.weights import fit_weights, pll_objective  # noqa: E402

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


def synthetic(args):
    """DN2MN and PLL on the plants-sized synthetic DN (see the module docstring)."""
    d = Path(args.data) / "plants"
    train, test = load(d / "plants.train.data"), load(d / "plants.test.data")
    schema = Schema.binary(train.shape[1])
    dn = random_tree_dn(schema, args.leaves, seed=args.seed)
    res = {
        "dataset": "plants schema, random trees",
        "leaves_per_tree": args.leaves,
        "dn_features": dn.n_features,
        "train_rows": len(train),
        "test_rows": len(test),
    }
    mn, res["dn2mn_wall_s"], res["dn2mn_cpu_s"] = timed(
        lambda: dn2mn(dn, train=train, weights="closed-form"), args.repeat
    )
    res["mn_features"] = mn.n_features
    res["mn_mean_feature_length"] = round(float(mn.features.lengths().mean()), 2)
    raw = dn2mn(dn, train=train, merge=False, weights="closed-form")
    res["mn_features_before_merge"] = raw.n_features
    res["variants"] = {}
    for base in ("marginals", "single"):
        for orderings in ORDERINGS:
            m, wall, cpu = timed(
                lambda: dn2mn(
                    dn,
                    base=base,
                    orderings=orderings,
                    train=train,
                    base_instance=np.zeros(schema.n_vars, int),
                    weights="closed-form",
                ),
                1,
            )
            res["variants"][f"{base}/{orderings}"] = {
                "features": m.n_features,
                "wall_s": wall,
                "cpu_s": cpu,
            }
    res["mn_test_pll"], res["mn_pll_wall_s"], res["mn_pll_cpu_s"] = timed(
        lambda: mn.pll(test), args.repeat
    )
    res["dn_test_pll"], res["dn_pll_wall_s"], res["dn_pll_cpu_s"] = timed(
        lambda: pll(dn, test), args.repeat
    )
    _, res["pll_gradient_train_wall_s"], res["pll_gradient_train_cpu_s"] = timed(
        lambda: pll_objective(mn.features, train), 1
    )
    leaves = FeatureSet.concat(schema, dn.cpds).merge_duplicates(drop_zero=False)
    res["lw_features"] = leaves.n_features
    _, res["lw_gradient_train_wall_s"], res["lw_gradient_train_cpu_s"] = timed(
        lambda: pll_objective(leaves, train), args.repeat
    )
    res["machine"] = machine()
    return res


def synthetic_markdown(res):
    lines = [
        "# DN2MN and PLL speed (plants-sized synthetic DN)",
        "",
        f"Random trees, {res['leaves_per_tree']} leaves per tree, over the plants schema; "
        f"{res['dn_features']:,} DN leaf features. Machine: {res['machine']}. "
        "Best of warm runs.",
        "",
        "| step | result | wall s | CPU s | Libra reference |",
        "|---|---|---|---|---|",
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
        "",
        "| variant | features | wall s | CPU s |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {k} | {v['features']:,} | {v['wall_s']} | {v['cpu_s']} |"
        for k, v in res["variants"].items()
    ]
    return lines


def machine():
    return {
        "cpus": os.cpu_count(),
        "numba_threads": numba.get_num_threads(),
        "processor": platform.processor() or platform.machine(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset (spin)"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def once(fn):
    """(result, wall s, CPU s) of one run."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, round(time.perf_counter() - w, 3), round(time.process_time() - c, 3)


def split(data, name, part):
    return load(Path(data) / name / f"{name}.{part}.data")


def real(args, res=None):
    """Issue 13's figures on the DTSL models of plants and nltcs (see the module docstring);
    with ``--part cmll`` / ``--part weights`` only those figures of ``res`` are replaced."""
    cmll_only, weights_only = args.part == "cmll", args.part == "weights"
    res = res if cmll_only or weights_only else {"kappa": 0.1}
    load_key = {"cmll": "cmll_machine", "weights": "weights_machine"}.get(args.part, "machine")
    res[f"{load_key}_before"] = machine()
    models = {}
    for name in ("plants",) if weights_only else ("plants", "nltcs"):
        train = split(args.data, name, "train")
        schema = Schema.binary(train.shape[1])
        dn, wall, cpu = once(
            lambda: (
                DTSL(schema, kappa=0.1, mode="exact", cpd="tree")
                .fit(ArraySource(train, schema=schema))
                .to_dependency_network()
            )
        )
        mn = dn2mn(dn, train=train, weights="closed-form")
        models[name] = (
            dn,
            mn,
            train,
            split(args.data, name, "valid"),
            split(args.data, name, "test"),
        )
        if not cmll_only:
            res[name] = res[name] if weights_only else {}
            res[name].update(
                {
                    "dtsl_wall_s": wall,
                    "dtsl_cpu_s": cpu,
                    "dn_features": dn.n_features,
                    "mn_features": mn.n_features,
                }
            )
    if not cmll_only:
        lw_refine_pll(res["plants"], *models["plants"])
    if not weights_only:
        cmll_figures(res, args, models)
    res[f"{load_key}_after"] = machine()
    return res


def lw_refine_pll(p, dn, mn, train, valid, test):
    """LW, DN2MN + refine and MN PLL scoring on plants."""
    leaves = FeatureSet.concat(dn.schema, dn.cpds).merge_duplicates(drop_zero=False)
    start = MarkovNetwork(dn.schema, leaves.with_weights(np.zeros(leaves.n_features)))
    fit_weights(start, train[:300], max_iter=2)  # warm-up: compilation / cache load
    fit, p["lw_wall_s"], p["lw_cpu_s"] = once(
        lambda: fit_weights(start, train, stddev=1.0, max_iter=100)
    )
    p["lw_features"] = leaves.n_features
    p["lw_iterations"] = fit.fit_info["iterations"]
    p["lw_test_pll"] = round(fit.pll(test), 4)
    refined, p["refine_wall_s"], p["refine_cpu_s"] = once(
        lambda: dn2mn(dn, train=train, valid=valid, refine=10)
    )
    p["refine_kept"] = not np.array_equal(refined.weights, mn.weights)
    p["refine_test_pll"] = round(refined.pll(test), 4)
    mn.pll(test[:10])
    p["mn_test_pll"], p["mn_pll_wall_s"], p["mn_pll_cpu_s"] = once(lambda: mn.pll(test))


def cmll_figures(res, args, models):
    """CMLL of the plants (first ``--plants-cmll-rows``) and nltcs test sets."""
    _, mn, _, _, test = models["plants"]
    p = res["plants"]
    cmll(mn, test[:2], samples=2, burn_in=1)
    n_rows = len(test) if args.plants_cmll_rows <= 0 else min(args.plants_cmll_rows, len(test))
    p["cmll_rows"] = n_rows
    p["cmll"], p["cmll_wall_s"], p["cmll_cpu_s"] = once(lambda: cmll(mn, test[:n_rows]))
    scale = len(test) / n_rows
    p["cmll_full_wall_s"] = round(p["cmll_wall_s"] * scale, 1)
    p["cmll_full_cpu_s"] = round(p["cmll_cpu_s"] * scale, 1)
    _, mn, _, _, test = models["nltcs"]
    cmll(mn, test[:2], samples=2, burn_in=1)
    q = res["nltcs"]
    q["cmll"], q["cmll_wall_s"], q["cmll_cpu_s"] = once(lambda: cmll(mn, test))
    q["cmll_rows"] = len(test)


def real_markdown(r):
    p, q = r["plants"], r["nltcs"]
    sub = (
        ""
        if p["cmll_rows"] == 3482
        else f" (first {p['cmll_rows']} rows run: {p['cmll_wall_s']} s wall / {p['cmll_cpu_s']} s CPU; "
        "full set extrapolated)"
    )
    return [
        "## Issue 13: weight learning, PLL scoring and CMLL on the DTSL models (kappa 0.1)",
        "",
        f"Shared 2-core machine, loaded by other jobs: load average before "
        f"{r['machine_before']['load_average']}, after {r['machine_after']['load_average']} "
        f"({r['machine_before']['numba_threads']} numba threads). One warm run per step."
        + (
            f" The CMLL rows were rerun alone: load average before "
            f"{r['cmll_machine_before']['load_average']}, after "
            f"{r['cmll_machine_after']['load_average']}."
            if "cmll_machine_before" in r
            else ""
        )
        + (
            f" The LW, refine and scoring rows were rerun alone (OpenMP wait policy "
            f"{r['weights_machine_before'].get('omp_wait_policy')}): load average before "
            f"{r['weights_machine_before']['load_average']}, after "
            f"{r['weights_machine_after']['load_average']}."
            if "weights_machine_before" in r
            else ""
        ),
        "",
        "| step | result | wall s | CPU s | target | Libra reference |",
        "|---|---|---|---|---|---|",
        f"| LW, plants train: {p['lw_features']:,} leaf features, stddev 1, "
        f"{p['lw_iterations']} L-BFGS iterations | test PLL {p['lw_test_pll']} | "
        f"{p['lw_wall_s']} | {p['lw_cpu_s']} | <= 3 s | mnlearnw 8.5-11 s |",
        f"| DN2MN + refine (10 iterations), plants: {p['mn_features']:,} features | "
        f"test PLL {p['refine_test_pll']} (refined kept: {p['refine_kept']}) | "
        f"{p['refine_wall_s']} | {p['refine_cpu_s']} | <= 10 s | |",
        f"| MN PLL scoring, plants test (3,482 rows) | {p['mn_test_pll']:.4f} | "
        f"{p['mn_pll_wall_s']} | {p['mn_pll_cpu_s']} | < 0.5 s | mscore 20.4 s |",
        f"| CMLL, plants test, full set{sub} | {p['cmll']:.4f} on the rows run | "
        f"{p['cmll_full_wall_s']} | {p['cmll_full_cpu_s']} | <= 120 s | Gibbs about 10 hours |",
        f"| CMLL, nltcs test (3,236 rows) | {q['cmll']:.4f} | {q['cmll_wall_s']} | "
        f"{q['cmll_cpu_s']} | < 3 s | Gibbs about 20 min (CMLL -5.30) |",
        "",
    ]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/work/shared/data")
    ap.add_argument(
        "--part",
        choices=("all", "synthetic", "real", "cmll", "weights"),
        default="all",
        help="cmll / weights: rerun only the CMLL / the LW, refine "
        "and scoring figures of the real part",
    )
    ap.add_argument("--leaves", type=int, default=175)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--plants-cmll-rows", type=int, default=128, help="plants test rows for CMLL (0: all 3,482)"
    )
    args = ap.parse_args(argv)
    path = RESULTS / "mn_speed.json"
    res = json.loads(path.read_text()) if path.exists() else {}
    res.setdefault("synthetic", {k: v for k, v in res.items() if k != "real"})
    res = {"synthetic": res["synthetic"], "real": res.get("real")}
    if args.part in ("all", "synthetic"):
        res["synthetic"] = synthetic(args)
    if args.part in ("all", "real", "cmll", "weights"):
        res["real"] = real(args, res["real"])
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(res, indent=2) + "\n")
    lines = synthetic_markdown(res["synthetic"]) if res["synthetic"] else []
    if res["real"]:
        lines += [""] + real_markdown(res["real"])
    (RESULTS / "mn_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
