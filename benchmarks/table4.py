"""Tables 4 and 5 of the DN2MN paper (tree CPDs) on one dataset directory.

For DTSL dependency networks (exact level-wise trees, kappa in 1e-4 .. 1 chosen on validation
PLL, separately for the DN and for the Markov networks: the DN row uses the kappa whose DN scores
best, the other rows the kappa whose default DN2MN conversion scores best, as Libra's figures
in REFERENCE.md do), report test PLL and CMLL and CPU seconds of:

* the DN itself;
* DN2MN, default (all rotations of two opposite orders, product of training marginals) and the
  paper's five other variants (one / two orders with a single base instance; one / two orders /
  rotations of one order with marginals). The single base instance is the most probable value
  of every variable under the training marginals (the paper does not say which it used);
* LW: the DN's leaf features, duplicates merged, weights learned from zero by PLL with a
  Gaussian prior (stddev chosen on validation from 0.05, 0.1, 0.2, 0.5, 1; L-BFGS, at most
  100 iterations), as in Section 6.2;
* DN2MN+refine (beyond the paper): ``--refine`` L-BFGS PLL iterations from the DN2MN weights
  (Gaussian prior of ``--refine-stddev`` centred on them), kept only if validation PLL
  improves.

CMLL follows Section 6.2 (four variable groups, Rao-Blackwellised Gibbs, 100 burn-in and 1000
samples by default); ``--cmll-rows`` scores a seeded random subset of the test rows to bound its
cost (all rows by default). CPU seconds are process times (all threads) of each step alone:
DN learning for the chosen kappa, conversion (including the training marginals), weight
learning (including the stddev search), and scoring.

    PYTHONPATH=. python benchmarks/table4.py /work/shared/data/nltcs [--cmll-rows 1000]

Results are merged into ``benchmarks/results/table4.json`` (one entry per dataset) and the
Markdown table ``table4.md`` is regenerated from it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numba
import numpy as np

from streammn.connectors.array import ArraySource
from streammn.dn.conversion import dn2mn, marginals_from_rows
from streammn.dtsl import DTSL
from streammn.features import FeatureSet
from streammn.inference import cmll, pll
from streammn.network.model import MarkovNetwork
from streammn.schema import Schema
from streammn.network.weights import fit_weights

RESULTS = Path(__file__).resolve().parent / "results"
VARIANTS = [  # (label, base, orderings) in the paper's order; the last is the default
    ("1 order, 1 base", "single", "one"),
    ("2 orders, 1 base", "single", "two"),
    ("1 order, marginals", "marginals", "one"),
    ("2 orders, marginals", "marginals", "two"),
    ("n rotations, marginals", "marginals", "rotations"),
    ("2n rotations, marginals (default)", "marginals", "rotations2"),
]
STDDEVS = (0.05, 0.1, 0.2, 0.5, 1.0)
KAPPAS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
# published DN2MN Table 4 (tree CPDs) and Libra on this hardware class (REFERENCE.md)
PAPER = {
    "nltcs": {"LW": (-5.02, -5.25), "DN2MN": (-4.93, -5.20)},
    "plants": {"LW": (-8.75, -10.00), "DN2MN": (-9.17, -10.67)},
    "jester": {"LW": (-51.42, -51.49), "DN2MN": (-50.77, -51.42)},
}
LIBRA = {
    "nltcs": {"MN": -4.928, "DN": -4.972, "DN2MN s": 0.08, "score s": 1.8},
    "plants": {"MN": -9.141, "DN": -9.125, "DN2MN s": 1.28, "score s": 20.4},
    "jester": {"MN": -50.568, "DN": -53.160, "DN2MN s": 0.75, "score s": 18.9},
    "accidents": {"MN": -14.352, "DN": -12.175, "DN2MN s": 0.24, "score s": 4.0},
    "mushrooms": {"MN": -3.174, "DN": -0.616, "DN2MN s": 0.04, "score s": 1.7},
}


def cpu(fn):
    """(result, CPU seconds of all threads of this process)."""
    start = time.process_time()
    out = fn()
    return out, round(time.process_time() - start, 3)


def load_split(directory: Path, split: str) -> np.ndarray:
    return np.loadtxt(
        directory / f"{directory.name}.{split}.data", delimiter=",", dtype=np.uint8, ndmin=2
    )


def learn_dns(schema, train, valid, log):
    """Exact DTSL DNs for kappa in 1e-4 .. 1, each scored on validation as a DN and after the
    default DN2MN conversion (the paper tunes kappa on validation for each model)."""
    out = []
    for kappa in KAPPAS:
        (dn, secs) = cpu(
            lambda: (
                DTSL(schema, kappa=kappa, mode="exact")
                .fit(ArraySource(train, schema=schema))
                .to_dependency_network()
            )
        )
        dn_score = dn.pll(valid)
        mn_score = dn2mn(dn, train=train, weights="closed-form").pll(valid)
        log(
            f"  kappa {kappa:g}: valid PLL DN {dn_score:.4f}, DN2MN {mn_score:.4f} "
            f"({secs:.1f} s CPU to learn)"
        )
        out.append(
            {"kappa": kappa, "dn": dn, "learn_s": secs, "dn_valid": dn_score, "mn_valid": mn_score}
        )
    return out


def leaf_feature_model(dn) -> MarkovNetwork:
    """LW's starting point: every CPD feature once (duplicates merged), all weights zero."""
    feats = FeatureSet.concat(dn.schema, dn.cpds).merge_duplicates(drop_zero=False)
    return MarkovNetwork(dn.schema, feats.with_weights(np.zeros(feats.n_features)))


def run(directory: Path, args, log=print) -> dict:
    train, valid, test = (load_split(directory, s) for s in ("train", "valid", "test"))
    cards = np.maximum(np.max([train.max(0), valid.max(0), test.max(0)], axis=0) + 1, 2)
    schema = Schema.from_cardinalities(cards.tolist())
    rng = np.random.default_rng(args.seed)
    cmll_rows = (
        test
        if args.cmll_rows is None or args.cmll_rows >= len(test)
        else test[np.sort(rng.choice(len(test), args.cmll_rows, replace=False))]
    )

    def scores(model, label, extra):
        (p, t_pll) = cpu(lambda: pll(model, test))
        entry = {"test_pll": round(p, 4), "pll_cpu_s": t_pll, **extra}
        if not args.no_cmll:
            (c, t_cmll) = cpu(
                lambda: cmll(
                    model, cmll_rows, burn_in=args.burn_in, samples=args.samples, seed=args.seed
                )
            )
            entry.update(test_cmll=round(c, 4), cmll_cpu_s=t_cmll)
        if isinstance(model, MarkovNetwork):
            entry["features"] = model.n_features
        log(f"  {label}: {entry}")
        return entry

    log(
        f"{directory.name}: {train.shape[0]} train, {valid.shape[0]} valid, "
        f"{test.shape[0]} test rows, {schema.n_vars} variables"
    )
    dns = learn_dns(schema, train, valid, log)
    best_dn = max(dns, key=lambda d: d["dn_valid"])
    best_mn = max(dns, key=lambda d: d["mn_valid"])
    out = {
        "dataset": directory.name,
        "kappa": best_dn["kappa"],
        "kappa_mn": best_mn["kappa"],
        "dn_valid_pll": round(best_dn["dn_valid"], 4),
        "dn_features": best_dn["dn"].n_features,
        "cmll_rows": len(cmll_rows),
        "burn_in": args.burn_in,
        "samples": args.samples,
    }
    out["DN"] = scores(best_dn["dn"], "DN", {"learn_cpu_s": best_dn["learn_s"]})
    dn = best_mn["dn"]  # every Markov network below starts from the DN best for DN2MN

    mode_instance = np.array([np.argmax(m) for m in marginals_from_rows(train, schema)])
    out["DN2MN"] = {}
    default = None
    for label, base, orderings in VARIANTS:
        (mn, secs) = cpu(
            lambda: dn2mn(
                dn,
                base=base,
                orderings=orderings,
                train=train,
                base_instance=mode_instance,
                weights="closed-form",
            )
        )
        out["DN2MN"][label] = scores(mn, f"DN2MN {label}", {"convert_cpu_s": secs})
        default = mn

    start = leaf_feature_model(dn)
    best, lw_s = None, 0.0
    for sd in args.stddevs:
        (fit, secs) = cpu(lambda: fit_weights(start, train, stddev=sd, max_iter=args.lw_iter))
        lw_s += secs
        v = fit.pll(valid)
        log(f"  LW stddev {sd}: valid PLL {v:.4f} ({secs:.1f} s CPU)")
        if best is None or v > best[1]:
            best = (sd, v, fit)
    out["LW"] = scores(
        best[2],
        "LW",
        {
            "stddev": best[0],
            "learn_cpu_s": round(lw_s, 3),
            "stddevs_tried": list(args.stddevs),
            "max_iter": args.lw_iter,
        },
    )

    (refined, secs) = cpu(
        lambda: dn2mn(
            dn, train=train, valid=valid, refine=args.refine, refine_stddev=args.refine_stddev
        )
    )
    out["DN2MN+refine"] = scores(
        refined,
        "DN2MN+refine",
        {
            "convert_and_refine_cpu_s": secs,
            "iterations": args.refine,
            "stddev": args.refine_stddev,
            "kept_refined": not np.array_equal(refined.weights, default.weights),
        },
    )
    out["machine"] = {
        "cpus": os.cpu_count(),
        "numba_threads": numba.get_num_threads(),
        "processor": platform.processor() or platform.machine(),
    }
    return out


def markdown(results: dict) -> str:
    lines = [
        "# DN2MN paper Tables 4 and 5 (tree CPDs), streammn",
        "",
        "Test PLL / CMLL per example (natural log); CPU seconds. Paper = published DN2MN "
        "Table 4; Libra = Libra 1.1.2 on this hardware class (REFERENCE.md).",
        "",
        "| dataset | model | test PLL | test CMLL | CPU s (learn/convert) | CPU s (PLL) | "
        "features | paper PLL / CMLL | Libra PLL |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in sorted(results.items()):
        rows = (
            [("DN", r["DN"])]
            + [(f"DN2MN {k}", v) for k, v in r["DN2MN"].items()]
            + [("LW", r["LW"]), ("DN2MN+refine", r["DN2MN+refine"])]
        )
        for label, e in rows:
            t = e.get("learn_cpu_s", e.get("convert_cpu_s", e.get("convert_and_refine_cpu_s")))
            paper = ""
            if label == "LW" and name in PAPER:
                paper = "%s / %s" % PAPER[name]["LW"]
            elif label.endswith("(default)") and name in PAPER:
                paper = "%s / %s" % PAPER[name]["DN2MN"]
            libra = ""
            if name in LIBRA and label == "DN":
                libra = LIBRA[name]["DN"]
            elif name in LIBRA and label.endswith("(default)"):
                libra = (
                    f"{LIBRA[name]['MN']} (convert {LIBRA[name]['DN2MN s']} s, "
                    f"score {LIBRA[name]['score s']} s)"
                )
            kappa = r["kappa"] if label == "DN" else r.get("kappa_mn", r["kappa"])
            lines.append(
                f"| {name} (kappa {kappa:g}) | {label} | {e['test_pll']} | "
                f"{e.get('test_cmll', '')} | {t} | {e['pll_cpu_s']} | "
                f"{e.get('features', r['dn_features'])} | {paper} | {libra} |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description="DN2MN paper Tables 4-5 on one dataset directory")
    ap.add_argument("dataset", type=Path, help="e.g. /work/shared/data/nltcs")
    ap.add_argument("--refine", type=int, default=10, help="refine iterations (default 10)")
    ap.add_argument(
        "--refine-stddev",
        type=float,
        default=1.0,
        help="prior stddev around the DN2MN weights when refining (default 1)",
    )
    ap.add_argument(
        "--stddevs",
        type=lambda t: tuple(float(x) for x in t.split(",")),
        default=STDDEVS,
        help="LW prior stddevs tried on validation (default 0.05,0.1,0.2,0.5,1)",
    )
    ap.add_argument("--lw-iter", type=int, default=100, help="LW L-BFGS iterations (100)")
    ap.add_argument("--burn-in", type=int, default=100)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument(
        "--cmll-rows",
        type=int,
        default=None,
        help="score CMLL on this many random test rows (default: all)",
    )
    ap.add_argument("--no-cmll", action="store_true", help="skip CMLL")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    result = run(args.dataset, args)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "table4.json"
    allres = json.loads(path.read_text()) if path.exists() else {}
    allres[result["dataset"]] = result
    path.write_text(json.dumps(allres, indent=2) + "\n")
    (args.out / "table4.md").write_text(markdown(allres))
    print(markdown(allres))


if __name__ == "__main__":
    main()
