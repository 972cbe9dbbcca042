"""Convergence benchmark: does one-pass DTSL at its defaults keep learning on a long stream?

Sections (each can run alone; results merge into ``benchmarks/results/convergence.json`` and the
Markdown table ``convergence.md``):

- ``planted``: streams from sparse logistic Bayesian networks (:class:`streammn.planted.
  LogisticBN`, 60 and 200 variables) whose test PLL is known in closed form. One pass at the
  defaults, scored at 10k, 100k, 1M, 3M and 10M rows: gap to the true PLL, leaves, features,
  rows/s. Exact DTSL at the validation-best fixed kappa on the same prefixes (up to 1M rows for 60
  variables, 100k for 200: an exact fit per kappa of the grid on millions of rows is hours here).
- ``gibbs``: a Markov network learned from nltcs (exact DTSL + DN2MN), Gibbs-sampled; the truth
  is that network's own PLL.
- ``datasets``: the five shared datasets and msnbc_stream: one pass at defaults vs exact DTSL
  with ``kappa='auto'`` and at the validation-best kappa (test DN PLL).
- ``wide``: a nips-like synthetic set, 1,000 variables x 2,000 rows: exact ``auto`` vs kappa 0.1.
- ``throughput``: one pass over 1M x 100 binary rows, defaults vs the previous defaults (kappa
  0.1, 64 leaves per tree, no replay), in the same run.

    PYTHONPATH=. python -m benchmarks.convergence [planted60|planted200|gibbs|datasets|wide|throughput]
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time

import numpy as np

from streammn.connectors import CsvSource
from streammn.dtsl import DTSL
from streammn.planted import LogisticBN
from streammn.schema import Schema

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results", "convergence.json")
DATA = os.environ.get("STREAMMN_DATA", os.path.join(HERE, "..", "..", "shared", "data"))
KAPPAS = (1e-4, 1e-3, 1e-2, 1e-1)
CHECKPOINTS = (10_000, 100_000, 1_000_000, 3_000_000, 10_000_000)
PREVIOUS_DEFAULTS = {"kappa": 0.1, "max_tree_leaves": 64, "replay_rows": 0}
BATCH = 65_536


def n_features(model: DTSL) -> int:
    return sum(fs.n_features for fs in model.features())


def pll(model: DTSL, rows: np.ndarray) -> float:
    return float(model.pll_terms(rows).sum(axis=1).mean())


def best_exact(train: np.ndarray, valid: np.ndarray, test: np.ndarray) -> dict:
    """Exact DTSL at every kappa of the grid; the validation-best one's figures."""
    schema = Schema.binary(train.shape[1])
    best = None
    for kappa in KAPPAS:
        t = time.perf_counter()
        model = DTSL(schema, cpd="tree", mode="exact", kappa=kappa).fit(train)
        entry = {
            "kappa": kappa,
            "valid_pll": pll(model, valid),
            "test_pll": pll(model, test),
            "leaves": int(model.tree_stats()["n_leaves"].sum()),
            "features": n_features(model),
            "seconds": time.perf_counter() - t,
        }
        if best is None or entry["valid_pll"] > best["valid_pll"]:
            best = entry
    return best


def exact_auto(train: np.ndarray, test: np.ndarray) -> dict:
    t = time.perf_counter()
    model = DTSL(Schema.binary(train.shape[1]), cpd="tree", mode="exact").fit(train)
    return {
        "test_pll": pll(model, test),
        "leaves": int(model.tree_stats()["n_leaves"].sum()),
        "features": n_features(model),
        "seconds": time.perf_counter() - t,
    }


def one_pass(
    chunks, test: np.ndarray, checkpoints, truth: float | None = None, **params
) -> list[dict]:
    """Stream ``chunks`` (an iterator of row blocks) through DTSL at ``params`` (defaults when
    empty), scoring at each checkpoint; learning time excludes scoring."""
    model = None
    seen, learn_s, out = 0, 0.0, []
    pending = list(checkpoints)
    for block in chunks:
        if model is None:
            model = DTSL(Schema.binary(block.shape[1]), cpd="tree", **params)
        for start in range(0, len(block), BATCH):
            batch = block[start : start + BATCH]
            while batch.shape[0]:
                take = min(batch.shape[0], pending[0] - seen) if pending else batch.shape[0]
                t = time.perf_counter()
                model.partial_fit(batch[:take])
                learn_s += time.perf_counter() - t
                seen += take
                batch = batch[take:]
                if pending and seen == pending[0]:
                    pending.pop(0)
                    score = pll(model, test)
                    stats = model.tree_stats()
                    out.append(
                        {
                            "rows": seen,
                            "test_pll": score,
                            "gap_pct": None
                            if truth is None
                            else 100.0 * (truth - score) / abs(truth),
                            "leaves": int(stats["n_leaves"].sum()),
                            "max_depth": int(stats["depth"].max()),
                            "features": n_features(model),
                            "rows_per_s": seen / learn_s,
                        }
                    )
                    print(f"  {seen:>10,} rows: {out[-1]}", file=sys.stderr, flush=True)
        if not pending:
            break
    return out


def bn_chunks(bn: LogisticBN, seed: int, total: int, chunk: int = 1_000_000):
    rng = np.random.default_rng(seed)
    for start in range(0, total, chunk):
        yield bn.sample(min(chunk, total - start), rng)


def section_planted(n_vars: int, exact_upto: int) -> dict:
    bn = LogisticBN(n_vars, seed=1)
    test = bn.sample(20_000, np.random.default_rng(99))
    valid = bn.sample(20_000, np.random.default_rng(98))
    truth = bn.pll(test)
    print(f"planted {n_vars} variables, true test PLL {truth:.4f}", file=sys.stderr)
    stream = one_pass(bn_chunks(bn, 5, CHECKPOINTS[-1]), test, CHECKPOINTS, truth)
    exact = []
    prefix = next(bn_chunks(bn, 5, CHECKPOINTS[-1]))[:exact_upto]  # the stream's first rows
    for rows in (c for c in CHECKPOINTS if c <= exact_upto):
        best = best_exact(prefix[:rows], valid, test)
        best.update(rows=rows, gap_pct=100.0 * (truth - best["test_pll"]) / abs(truth))
        exact.append(best)
        print(f"  exact {rows:,}: {best}", file=sys.stderr, flush=True)
    return {"true_pll": truth, "one_pass": stream, "exact_best_kappa": exact}


def section_gibbs() -> dict:
    from streammn.connectors.synthetic import SyntheticSource
    from streammn.dn.conversion import dn2mn

    train = CsvSource(os.path.join(DATA, "nltcs", "nltcs.train.data")).read_all()
    learner = DTSL(Schema.binary(train.shape[1]), cpd="tree", mode="exact")
    dn = learner.fit(train).to_dependency_network()
    mn = dn2mn(dn, train=train, weights="closed-form")
    test = np.concatenate([b.rows for b in SyntheticSource(mn, n_rows=20_000, seed=99)])
    truth = float(mn.pll(test))
    checkpoints = CHECKPOINTS[:3]
    source = SyntheticSource(mn, n_rows=checkpoints[-1], batch_size=BATCH, seed=5)
    stream = one_pass((b.rows for b in source), test, checkpoints, truth)
    return {
        "model": "nltcs exact DTSL + DN2MN",
        "features": mn.n_features,
        "true_pll": truth,
        "one_pass": stream,
    }


def _dataset(name: str):
    base = os.path.join(DATA, name, name)
    return [CsvSource(f"{base}.{s}.data").read_all() for s in ("train", "valid", "test")]


def section_datasets() -> dict:
    out = {}
    sets = {
        name: _dataset(name) for name in ("nltcs", "plants", "jester", "accidents", "mushrooms")
    }
    rows = CsvSource(os.path.join(DATA, "msnbc_stream", "msnbc_stream.data")).read_all()
    sets["msnbc_stream"] = (rows[:72_000], rows[72_000:80_000], rows[80_000:])
    for name, (train, valid, test) in sets.items():
        learn = np.concatenate([train, valid]) if name == "msnbc_stream" else train
        schema = Schema.binary(train.shape[1])
        t = time.perf_counter()
        model = DTSL(schema, cpd="tree").fit(learn)
        seconds = time.perf_counter() - t
        entry = {
            "one_pass": {
                "test_pll": pll(model, test),
                "seconds": seconds,
                "leaves": int(model.tree_stats()["n_leaves"].sum()),
            },
            "exact_auto": exact_auto(learn, test),
            "exact_best_kappa": best_exact(train, valid, test),
        }
        if name == "msnbc_stream":  # exact at the chosen kappa on all 80,000 learning rows
            kappa = entry["exact_best_kappa"]["kappa"]
            entry["exact_best_kappa"]["test_pll"] = pll(
                DTSL(schema, cpd="tree", mode="exact", kappa=kappa).fit(learn), test
            )
        print(f"  {name}: {entry}", file=sys.stderr, flush=True)
        out[name] = entry
    return out


def section_wide() -> dict:
    bn = LogisticBN(1000, seed=3, max_parents=2)
    train = bn.sample(2000, np.random.default_rng(1))
    test = bn.sample(5000, np.random.default_rng(2))
    schema = Schema.binary(1000)
    out = {"true_pll": bn.pll(test), "exact_auto": exact_auto(train, test)}
    for label, params in (
        ("exact_kappa_0.1", {"mode": "exact", "kappa": 0.1}),
        ("empty", {"mode": "exact", "max_depth": 0}),
        ("one_pass", {}),
    ):
        t = time.perf_counter()
        model = DTSL(schema, cpd="tree", **params).fit(train)
        out[label] = {
            "test_pll": pll(model, test),
            "leaves": int(model.tree_stats()["n_leaves"].sum()),
            "features": n_features(model),
            "seconds": time.perf_counter() - t,
        }
        print(f"  wide {label}: {out[label]}", file=sys.stderr, flush=True)
    return out


def section_throughput() -> dict:
    bn = LogisticBN(100, seed=7, weight_low=1.0, weight_high=3.0)
    rows = bn.sample(1_000_000, np.random.default_rng(0))
    test = bn.sample(10_000, np.random.default_rng(1))
    DTSL(Schema.binary(100), cpd="tree").fit(rows[:5000])  # load compiled kernels
    out = {}
    for label, params in (("defaults", {}), ("previous_defaults", PREVIOUS_DEFAULTS)):
        out[label] = one_pass(iter([rows]), test, (len(rows),), bn.pll(test), **params)[-1]
    return out


SECTIONS = {
    "planted60": lambda: section_planted(60, 1_000_000),
    "planted200": lambda: section_planted(200, 100_000),
    "gibbs": section_gibbs,
    "datasets": section_datasets,
    "wide": section_wide,
    "throughput": section_throughput,
}


def fmt(x, spec=".3f"):
    return "—" if x is None else format(x, spec)


def markdown(r: dict) -> str:
    lines = [
        "# Convergence of one-pass DTSL at its defaults",
        "",
        f"Machine: {r['machine']}. Defaults: `kappa='auto'` (split_alpha 0.05), replay "
        "buffer 'auto', no leaf cap, memory_mb 256. Gap = (true PLL - learned PLL) / |true "
        "PLL|. rows/s counts learning only (scoring excluded).",
        "",
        "Exact DTSL at the validation-best kappa (grid 1e-4..0.1) ran on the stream's "
        "prefixes up to 1M rows at 60 variables and 100k rows at 200 (one exact fit per "
        "kappa on millions of rows is hours here). " + r.get("note", ""),
        "",
    ]
    for n_vars in (60, 200):
        p = r.get(f"planted{n_vars}")
        if p is None:
            continue
        lines += [
            f"## Planted logistic BN, {n_vars} variables (true test PLL {p['true_pll']:.4f})",
            "",
            "| rows | one-pass gap % | leaves | features | depth | rows/s | exact best-kappa"
            " gap % | kappa | exact features |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        exact = {e["rows"]: e for e in p["exact_best_kappa"]}
        for s in p["one_pass"]:
            e = exact.get(s["rows"], {})
            lines.append(
                f"| {s['rows']:,} | {s['gap_pct']:.3f} | {s['leaves']:,} | "
                f"{s['features']:,} | {s['max_depth']} | {s['rows_per_s']:,.0f} | "
                f"{fmt(e.get('gap_pct'))} | {e.get('kappa', '—')} | "
                f"{e.get('features', '—')} |"
            )
        lines.append("")
    if "gibbs" in r:
        g = r["gibbs"]
        lines += [
            f"## Gibbs-sampled MN ({g['model']}, {g['features']} features, true PLL "
            f"{g['true_pll']:.4f})",
            "",
            "| rows | gap % | leaves | features | rows/s |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {s['rows']:,} | {s['gap_pct']:.3f} | {s['leaves']:,} | {s['features']:,} "
            f"| {s['rows_per_s']:,.0f} |"
            for s in g["one_pass"]
        ]
        lines.append("")
    if "datasets" in r:
        lines += [
            "## Shared datasets: test DN PLL",
            "",
            "| dataset | one pass (defaults) | exact auto | exact best kappa (kappa) | "
            "one pass vs exact auto % | exact auto vs best kappa % |",
            "|---|---|---|---|---|---|",
        ]
        for name, d in r["datasets"].items():
            o, a, b = (
                d["one_pass"]["test_pll"],
                d["exact_auto"]["test_pll"],
                d["exact_best_kappa"]["test_pll"],
            )
            lines.append(
                f"| {name} | {o:.3f} | {a:.3f} | {b:.3f} ({d['exact_best_kappa']['kappa']}"
                f") | {100 * (a - o) / abs(a):.2f} | {100 * (b - a) / abs(b):.2f} |"
            )
        lines += ["", "Positive percentages: the first model is that much below the second.", ""]
    if "wide" in r:
        w = r["wide"]
        lines += [
            f"## Wide synthetic set: 1,000 variables, 2,000 rows (true PLL {w['true_pll']:.2f})",
            "",
            "| model | test PLL | leaves | features | s |",
            "|---|---|---|---|---|",
        ]
        for label in ("exact_auto", "exact_kappa_0.1", "one_pass", "empty"):
            if label in w:
                m = w[label]
                lines.append(
                    f"| {label} | {m['test_pll']:.2f} | {m['leaves']:,} | "
                    f"{m['features']:,} | {m['seconds']:.1f} |"
                )
        lines.append("")
    if "throughput" in r:
        lines += [
            "## Throughput: 1M x 100 binary rows, one pass",
            "",
            "| settings | rows/s | gap % | leaves |",
            "|---|---|---|---|",
        ]
        for label, t in r["throughput"].items():
            lines.append(
                f"| {label} | {t['rows_per_s']:,.0f} | {t['gap_pct']:.3f} | {t['leaves']:,} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> dict:
    names = (argv if argv is not None else sys.argv[1:]) or list(SECTIONS)
    if names == ["--markdown"]:  # rewrite the table from the JSON only
        with open(RESULTS) as f:
            results = json.load(f)
        with open(RESULTS.replace(".json", ".md"), "w") as f:
            f.write(markdown(results))
        return results
    results = {}
    for name in names:
        print(f"section {name}", file=sys.stderr, flush=True)
        section = SECTIONS[name]()
        results = {}
        if os.path.exists(RESULTS):  # read just before writing: sections may run side by side
            with open(RESULTS) as f:
                results = json.load(f)
        results[name] = section
        results["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}"
        with open(RESULTS, "w") as f:
            json.dump(results, f, indent=1)
        with open(RESULTS.replace(".json", ".md"), "w") as f:
            f.write(markdown(results))
    return results


if __name__ == "__main__":
    main()
