"""New values benchmark: a value first seen at row 500k is learned and scored (issue 19).

Stream: a planted logistic Bayesian network over 30 binary variables
(:class:`streammn.planted.LogisticBN`, seed 1), 1M rows. From row ``NEW_AT`` = 500,000 on, the
target variable ``T`` (the one with the most parents) takes a new value 2 instead of 1 in 80%
of the rows where its first parent is 1: a value with its own dependence that no row before
row 500k holds.

Arms, all one-pass DTSL at the defaults, fed in batches of 65,536 rows:

- ``fixed``: the default schema (binary): the first row with the new value is a bad row, the
  learner stops there with everything before it learned (the error is recorded);
- ``grow``: the schema in growth mode (``T`` may grow to 3 values): the value is added at the
  row it first appears;
- ``declared``: the reference, ``T`` declared ternary from the first row;
- ``grow, half-life 100k``: growth with forgetting (:mod:`streammn.trees.decay`), whose
  leaf distributions follow the post-change rows instead of averaging over the whole stream.

The ``fixed`` arm feeds raw batches, so the batch holding the bad row is rejected whole; a file
source yields the good rows before the bad one first (the engine keeps them).

Every window of 10,000 rows is scored (mean PLL per row of the learner's trees) before it is
learned; after the stream, the Markov networks are scored on 20,000 fresh rows of the
post-change stream, and the share ``P(2) / (P(1) + P(2))`` the trees give the new value where
the parent is 1 (the generator's: 80%) is read off. ``grow`` should match ``declared`` within a few windows.

    PYTHONPATH=. python -m benchmarks.new_values [--markdown]
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time

import numpy as np

from streammn.dtsl import DTSL
from streammn.planted import LogisticBN
from streammn.schema import Schema, SchemaError

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results", "new_values.json")
N_VARS = 30
NEW_AT = 500_000
TOTAL = 1_000_000
BATCH = 65_536
WINDOW = 10_000
SHARE = 0.8  # of the rows with T = 1 and its first parent 1 that hold the new value
HALF_LIFE = 100_000


def stream_rows(
    bn: LogisticBN, target: int, parent: int, n: int, start: int, seed: int
) -> np.ndarray:
    """``n`` rows from row ``start`` of the stream (the new value from ``NEW_AT`` on)."""
    rng = np.random.default_rng(seed)
    rows = bn.sample(n, rng)
    late = start + np.arange(n) >= NEW_AT
    recode = late & (rows[:, target] == 1) & (rows[:, parent] == 1) & (rng.random(n) < SHARE)
    rows[recode, target] = 2
    return rows


def run_arm(schema: Schema, rows: np.ndarray, **params) -> dict:
    model = DTSL(schema, **params)
    windows, error = [], None
    cpu = time.process_time()
    for start in range(0, rows.shape[0], BATCH):
        batch = rows[start : start + BATCH]
        if model.rows_seen:
            for w in range(0, batch.shape[0], WINDOW):
                piece = batch[w : w + WINDOW]
                try:
                    windows.append([start + w, float(model.pll_terms(piece).sum(axis=1).mean())])
                except SchemaError:
                    break  # the fixed arm cannot score what it cannot hold
        try:
            model.partial_fit(batch)
        except SchemaError as e:
            error = str(e)
            break
    return {
        "model": model,
        "windows": windows,
        "error": error,
        "cpu_seconds": time.process_time() - cpu,
    }


def main() -> dict:
    bn = LogisticBN(N_VARS, seed=1)
    target = int(np.argmax([len(p) for p in bn.parents]))
    parent = int(bn.parents[target][0])
    rows = stream_rows(bn, target, parent, TOTAL, 0, seed=5)
    test = stream_rows(bn, target, parent, 20_000, NEW_AT, seed=9)
    first = int(np.flatnonzero(rows[:, target] == 2)[0])
    binary = Schema.binary(N_VARS)
    cards = [2] * N_VARS
    cards[target] = 3
    growing = binary.with_growth({f"x{target}": 3})
    arms = {
        "fixed": (binary, {}),
        "grow": (growing, {}),
        "declared": (Schema.from_cardinalities(cards), {}),
        "grow, half-life 100k": (growing, {"half_life": HALF_LIFE}),
    }
    out = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "note": "Shared machine, other jobs running",
        },
        "rows": TOTAL,
        "new_at": NEW_AT,
        "first_new_row": first,
        "target": target,
        "parent": parent,
        "arms": {},
    }
    context = (test[:, parent] == 1) & (test[:, target] != 0)
    for name, (schema, params) in arms.items():
        result = run_arm(schema, rows, **params)
        model = result.pop("model")
        entry = {
            "rows_learned": model.rows_seen,
            "error": result["error"],
            "cpu_seconds": round(result["cpu_seconds"], 2),
            "cardinalities": model.schema.cardinalities.tolist()[target],
            "schema_version": model.schema.version if model.schema.grows else None,
            "windows": result["windows"],
        }
        if result["error"] is None:
            terms = model.pll_terms(test)
            entry["test_pll_trees"] = float(terms.sum(axis=1).mean())
            entry["test_pll_mn"] = float(model.to_markov_network().pll(test))
            leaf = model.forest.route(test[context])[:, target]
            p = np.exp(model.forest.log_probs()[leaf])
            entry["new_value_share_in_context"] = float((p[:, 2] / (p[:, 1] + p[:, 2])).mean())
        out["arms"][name] = entry
        print(
            f"{name}: {entry['rows_learned']:,} rows, error {entry['error']}, "
            f"test PLL {entry.get('test_pll_mn')}",
            file=sys.stderr,
            flush=True,
        )
    grow, declared = (dict(out["arms"][k]["windows"]) for k in ("grow", "declared"))
    gaps = [
        (row, 100.0 * (grow[row] - declared[row]) / abs(declared[row]))
        for row in sorted(declared)
        if row >= NEW_AT and row in grow
    ]
    out["window_gap_pct_after_new_value"] = gaps
    out["true_share"] = SHARE
    with open(RESULTS, "w") as f:
        json.dump(out, f, indent=1)
    return out


def markdown(out: dict) -> str:
    a = out["arms"]
    gaps = out["window_gap_pct_after_new_value"]
    lines = [
        f"# New values: x{out['target']} gains value 2 at row {out['first_new_row']:,} "
        f"of {out['rows']:,}",
        "",
        f"Planted logistic BN, {N_VARS} binary variables; from row {NEW_AT:,} "
        f"x{out['target']} is 2 in {SHARE:.0%} of the rows where it would be 1 and its "
        f"parent x{out['parent']} is 1. One-pass DTSL at the defaults, batches of "
        f"{BATCH:,}. {out['machine']['note']}.",
        "",
        "| arm | rows learned | stops with | test PLL (MN) | P(2) / P(1 or 2) where the "
        "parent is 1 | CPU s |",
        "|---|---|---|---|---|---|",
    ]
    for name, e in a.items():
        stop = (e["error"] or "-").replace("|", "/")
        pll = f"{e['test_pll_mn']:.4f}" if "test_pll_mn" in e else "-"
        p = f"{e['new_value_share_in_context']:.3f}" if "new_value_share_in_context" in e else "-"
        lines.append(
            f"| {name} | {e['rows_learned']:,} | {stop} | {pll} | {p} | {e['cpu_seconds']} |"
        )
    lines += [
        "",
        f"The generator's share of the new value there: {out['true_share']} after "
        f"row {NEW_AT:,}, so about {out['true_share'] / 2} over the whole stream, "
        f"which is what counts that never forget estimate. `fixed` learns raw "
        f"batches: the batch holding the bad row is rejected whole (a file source "
        f"yields the rows before it first).",
        "",
        "Prequential window PLL of `grow` against `declared` after the new value "
        "(gap in %, negative: grow is worse):",
        "",
        "| window from row | gap % |",
        "|---|---|",
    ]
    for row, gap in gaps[:5] + gaps[-2:]:
        lines.append(f"| {row:,} | {gap:+.3f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--markdown"]:
        with open(RESULTS) as f:
            print(markdown(json.load(f)), end="")
    else:
        result = main()
        with open(RESULTS.replace(".json", ".md"), "w") as f:
            f.write(markdown(result))
