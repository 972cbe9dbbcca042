"""ET benchmark: the ET paper's Section 3.1.2, Chow-Liu on the shared datasets, and fit time.

Structure recovery (paper Section 3.1.2, Eq. 16). Binary networks ``P(x) ∝ exp(sum theta_uv
x_u x_v + sum psi_u x_u)`` over ``x in {-1, +1}^M`` on random graphs: 50 nodes with 3 and 6
neighbours on average (uniform: Erdős-Rényi with exactly ``M d / 2`` edges), 200 nodes with 4
(uniform, and power-law degrees: Barabási-Albert with 2 edges per new node). Couplings
``theta_uv = s (0.1 + 0.2 n)``, ``s`` a random sign and ``n ~ U[0, 1]``; ``psi`` the same but
positive. Rows by Gibbs sampling (a numba single-site sampler: 1,000 burn-in sweeps, then one row
every 10 sweeps). Hamming distance to the true graph (edges missed + edges added) for ET
(:class:`streammn.et.EnsembleOfTrees` at its defaults: theta from all the rows, beta on a
sample of up to 2,000 of them, so on all rows of the 50-node networks and on half of the 200-node
ones, which run only at the paper's 4,000 rows) and for L1-regularised
logistic regression neighbourhoods (scikit-learn, liblinear, ``lambda = sqrt(log(M) / N)`` on
the mean log-loss, i.e. ``C = 1 / (N lambda)``) combined by AND and by OR, over sample sizes.

Exact test LL (Eq. 6) of ET on the shared datasets next to Chow-Liu (ET with beta on the
maximum mutual-information tree of the same theta, through the same likelihood code).

Fit time: 100 binary variables, 10,000 rows (a planted random tree), ET at its defaults.

Writes ``benchmarks/results/et.json`` after every measurement, then ``et.md``.

    PYTHONPATH=. python benchmarks/et.py --parts timing,datasets,structure
    PYTHONPATH=. python benchmarks/et.py --parts structure --networks 50-3,50-6 --trials 2
    PYTHONPATH=. python benchmarks/et.py --parts diagnosis --networks 50-6,200-4
    PYTHONPATH=. python benchmarks/et.py --parts full_model --out benchmarks/results/et_diagnosis.json
    PYTHONPATH=. python benchmarks/et.py --parts learn_theta --networks 200-4 --trials 1

The ``full_model`` part (issue 14's last missed target) fits the full Eq. 7 model (theta learned
with beta) and random PGD restarts on the 50-node, 6-neighbour networks: see
``benchmarks/et_full_model.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
from numba import njit

from streammn import Schema
from streammn.et import EnsembleOfTrees, ETDensity
from streammn.et.density import chow_liu_beta, edge_appearance, graph_edges, mutual_information
from streammn.et.kernels import ratio_table, structure_objective_and_gradient

from benchmarks import et_full_model

RESULTS = Path(__file__).parent / "results"
DATA = Path("/work/shared/data")
DATASETS = ("nltcs", "plants", "jester", "accidents", "mushrooms")
NETWORKS = {
    "50-3": (50, 3, "uniform", 1000),
    "50-6": (50, 6, "uniform", 1000),
    "200-4": (200, 4, "uniform", 4000),
    "200-4-powerlaw": (200, 4, "powerlaw", 4000),
}


def random_graph(m, degree, kind, rng):
    if kind == "powerlaw":
        g = nx.barabasi_albert_graph(m, degree // 2, seed=int(rng.integers(2**31)))
        return sorted((min(u, v), max(u, v)) for u, v in g.edges())
    pairs = [(u, v) for u in range(m) for v in range(u + 1, m)]
    pick = rng.choice(len(pairs), size=m * degree // 2, replace=False)
    return sorted(pairs[i] for i in pick)


@njit(cache=True)
def gibbs_ising(theta, psi, n_rows, burn_in, thin, seed):
    """Single-site Gibbs sampling of Eq. 16 over {-1, +1}; returns 0/1 rows."""
    np.random.seed(seed)
    m = psi.shape[0]
    x = np.where(np.random.random(m) < 0.5, -1.0, 1.0)
    out = np.empty((n_rows, m), dtype=np.uint8)
    for sweep in range(burn_in + n_rows * thin):
        for u in range(m):
            field = psi[u]
            for v in range(m):
                field += theta[u, v] * x[v]
            x[u] = 1.0 if np.random.random() < 1.0 / (1.0 + math.exp(-2.0 * field)) else -1.0
        k = sweep - burn_in
        if k >= 0 and (k + 1) % thin == 0:
            for u in range(m):
                out[k // thin, u] = 1 if x[u] > 0 else 0
    return out


def ising_model(m, edges, rng):
    theta = np.zeros((m, m))
    for u, v in edges:
        theta[u, v] = theta[v, u] = rng.choice([-1.0, 1.0]) * (0.1 + 0.2 * rng.random())
    return theta, 0.1 + 0.2 * rng.random(m)


def ising_rows(m, edges, n_rows, rng):
    theta, psi = ising_model(m, edges, rng)
    return gibbs_ising(theta, psi, n_rows, 1000, 10, int(rng.integers(2**31)))


def l1_lr_graphs(rows):
    from sklearn.linear_model import LogisticRegression

    # sklearn >= 1.8 deprecates penalty= in favour of l1_ratio=; penalty="l1" works on both
    warnings.filterwarnings("ignore", message=".*penalty.*", module="sklearn")
    n, m = rows.shape
    lam = math.sqrt(math.log(m) / n)
    x = rows.astype(np.float64) * 2 - 1
    nbr = np.zeros((m, m), dtype=bool)
    for u in range(m):
        y = rows[:, u]
        if y.min() == y.max():
            continue
        others = np.delete(np.arange(m), u)
        lr = LogisticRegression(
            penalty="l1", C=1.0 / (n * lam), solver="liblinear", tol=1e-6, max_iter=1000
        ).fit(x[:, others], y)
        nbr[u, others] = np.abs(lr.coef_[0]) > 1e-8
    iu = np.triu_indices(m, 1)
    both, either = (nbr & nbr.T)[iu], (nbr | nbr.T)[iu]
    as_set = lambda mask: {(int(a), int(b)) for a, b, k in zip(*iu, mask) if k}  # noqa: E731
    return as_set(both), as_set(either)


def hamming(found, truth):
    return len(set(found) ^ set(truth))


def structure(results, networks, trials, fractions, sample_cap, save):
    for name in networks:
        m, degree, kind, n_full = NETWORKS[name]
        for trial in range(trials):
            rng = np.random.default_rng(1000 * trial + m + degree)
            edges = random_graph(m, degree, kind, rng)
            rows = ising_rows(m, edges, n_full, rng)
            schema = Schema.from_cardinalities([2] * m)
            for f in fractions if m <= 50 else [1.0]:
                n = int(n_full * f)
                t0 = time.process_time()
                et = EnsembleOfTrees(schema, sample_rows=min(n, sample_cap)).fit(rows[:n])
                et_edges, et_cpu = et.edges, time.process_time() - t0
                and_, or_ = l1_lr_graphs(rows[:n])
                results["structure"].append(
                    {
                        "network": name,
                        "trial": trial,
                        "n_rows": n,
                        "true_edges": len(edges),
                        "et": hamming(et_edges, edges),
                        "et_edges": len(et_edges),
                        "l1lr_and": hamming(and_, edges),
                        "l1lr_or": hamming(or_, edges),
                        "beta_sample_rows": min(n, sample_cap),
                        "et_cpu_seconds": round(et_cpu, 2),
                    }
                )
                print(results["structure"][-1], flush=True)
                save()


# (network, trial, rows, beta sample rows, shrink, PGD tolerance); beta on all rows unless noted
DIAGNOSIS = (
    [
        ("50-6", t, n, n, shrink, 1e-4)
        for t in (0, 1)
        for n in (1000, 4000, 16000)
        for shrink in (True, False)
    ]
    + [("50-6", t, 1000, 1000, True, 1e-8) for t in (0, 1)]
    + [
        ("200-4", 0, 4000, 2000, True, 1e-4),
        ("200-4", 0, 4000, 4000, True, 1e-4),
        ("200-4", 0, 16000, 4000, True, 1e-4),
    ]
)


def diagnosis(results, networks, save):
    """Why ET misses true edges: Hamming as the rows grow (the model's limit, not the sample),
    PGD run to 1e-8, the Eq. 9 gradient of the missed edges at the fitted beta (negative: the
    optimum leaves them out, positive: PGD stopped early), and where the missed edges' plug-in
    mutual information ranks among the non-edges'."""
    generated = {}
    for name, trial, n, sample, shrink, tol in DIAGNOSIS:
        if name not in networks:
            continue
        m, degree, kind, _ = NETWORKS[name]
        if (name, trial) not in generated:
            rng = np.random.default_rng(1000 * trial + m + degree)  # as in structure()
            edges = random_graph(m, degree, kind, rng)
            theta, psi = ising_model(m, edges, rng)
            longest = max(d[2] for d in DIAGNOSIS if d[:2] == (name, trial))
            # one chain, so the first rows are those structure() learns from
            rows = gibbs_ising(theta, psi, longest, 1000, 10, int(rng.integers(2**31)))
            generated[(name, trial)] = edges, theta, rows
        edges, theta, rows = generated[(name, trial)]
        t0 = time.process_time()
        et = EnsembleOfTrees(
            Schema.from_cardinalities([2] * m),
            shrink=shrink,
            sample_rows=sample,
            tol=tol,
            max_iter=100 if tol >= 1e-4 else 2000,
        ).fit(rows[:n])
        cpu = time.process_time() - t0
        node, pair = et.theta()
        grad = structure_objective_and_gradient(et.beta, et.sample.rows, ratio_table(node, pair))[1]
        mi = mutual_information(node, pair, [2] * m)
        truth, found = set(edges), set(et.edges)
        missed = sorted(truth - found)
        iu = zip(*np.triu_indices(m, 1))
        non_edge_mi = np.sort([mi[u, v] for u, v in iu if (u, v) not in truth])[::-1]
        missed_mi = np.array([mi[u, v] for u, v in missed])
        off = [grad[u, v] for u, v in missed if et.beta[u, v] == 0]
        results["diagnosis"].append(
            {
                "network": name,
                "trial": trial,
                "n_rows": n,
                "beta_sample_rows": sample,
                "shrink": shrink,
                "tol": tol,
                "pgd_iterations": len(et.history) - 1,
                "hamming": len(truth ^ found),
                "missed": len(missed),
                "added": len(found - truth),
                "support": int((np.triu(et.beta, 1) > 0).sum()),
                "missed_max_gradient": round(float(max(off)), 4) if off else None,
                "missed_positive_gradient": int(sum(g > 0 for g in off)),
                "missed_coupling": round(float(np.mean([abs(theta[u, v]) for u, v in missed])), 3),
                "found_coupling": round(
                    float(np.mean([abs(theta[u, v]) for u, v in truth & found])), 3
                ),
                "missed_median_mi": round(float(np.median(missed_mi)) * 1000, 2),
                "non_edge_10th_mi": round(float(non_edge_mi[9]) * 1000, 2),
                "missed_above_10th_non_edge": int((missed_mi > non_edge_mi[9]).sum()),
                "et_cpu_seconds": round(cpu, 1),
            }
        )
        print(results["diagnosis"][-1], flush=True)
        save()


# (network, trial, training rows): the learner's beta on all of them; held-out rows follow them
FULL_MODEL = [("50-6", 0, 1000), ("50-6", 1, 1000)]
HELD_OUT_ROWS = 4000
RESTARTS = 6


def full_model(results, save):
    """The full Eq. 7 model and random restarts against the learner's fit (see
    et_full_model.py), with the false edges' distance in the true graph."""
    for name, trial, n in FULL_MODEL:
        m, degree, kind, _ = NETWORKS[name]
        rng = np.random.default_rng(1000 * trial + m + degree)  # as in structure()
        edges = random_graph(m, degree, kind, rng)
        theta, psi = ising_model(m, edges, rng)
        rows = gibbs_ising(theta, psi, n + HELD_OUT_ROWS, 1000, 10, int(rng.integers(2**31)))
        train, test = rows[:n], rows[n:].astype(np.int64)
        truth = set(edges)
        graph = nx.Graph(edges)
        graph.add_nodes_from(range(m))
        distance = dict(nx.all_pairs_shortest_path_length(graph))
        t0 = time.process_time()
        et = EnsembleOfTrees(Schema.from_cardinalities([2] * m), sample_rows=n).fit(train)
        cpu = round(time.process_time() - t0, 1)
        and_, or_ = l1_lr_graphs(train)
        restarts = et_full_model.random_restarts(et, truth, test, RESTARTS)
        case = {
            "network": name,
            "trial": trial,
            "n_rows": n,
            "held_out_rows": HELD_OUT_ROWS,
            "et_cpu_seconds": cpu,
            "l1lr_and": hamming(and_, edges),
            "l1lr_or": hamming(or_, edges),
            "restarts": restarts,
        }
        for key, prior in (("ml", 0.0), ("map", et.pseudo_count / 4)):
            rounds, beta, _ = et_full_model.full_model(et, truth, test, prior=prior)
            false_edges = set(graph_edges(edge_appearance(beta))) - truth
            case[key] = {
                "prior": prior,
                "rounds": rounds,
                "false_edge_distances": np.bincount(
                    [min(distance[u].get(v, 3), 3) for u, v in false_edges], minlength=4
                ).tolist(),
            }
        results["full_model"].append(case)
        save()


def full_model_markdown(results):
    lines = [
        "## The full model (Eq. 7) and random PGD restarts",
        "",
        "Objective: mean per-row Eq. 9/Eq. 7 objective (log det terms, nats per row; the node "
        f"term is the same for all fits) on the training rows and on {HELD_OUT_ROWS:,} held-out "
        "rows that continue the Gibbs chain. Graph: rho > 2/M as the learner. Full Eq. 7: "
        "theta_uv learned with beta (binary tables, margins at the node estimates, one log odds "
        "ratio per pair), alternating rounds from the learner's fit until a round gains less than "
        "1e-4 nats per row. Restarts: PGD on Eq. 9 (the learner's theta) from random "
        "Dirichlet beta.",
        "",
        "| network | trial | rows | fit | train objective | held-out objective | Hamming | "
        "missed | added | CPU s |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for case in results.get("full_model", []):
        head = f"| {case['network']} | {case['trial']} | {case['n_rows']:,} | "
        row = (
            lambda label, r, cpu: lines.append(  # noqa: E731
                head
                + f"{label} | {r['objective']:.4f} | {r['test_objective']:.4f} | {r['hamming']} | "
                f"{r['missed']} | {r['added']} | {cpu} |"
            )
        )
        restarts = case["restarts"]
        row("ET at its defaults (Eq. 9)", case["ml"]["rounds"][0], case["et_cpu_seconds"])
        best = max(restarts, key=lambda r: r["objective"])
        row(
            f"best of {len(restarts)} random restarts (Hamming "
            f"{min(r['hamming'] for r in restarts)}-{max(r['hamming'] for r in restarts)})",
            best,
            round(sum(r["cpu_seconds"] for r in restarts), 1),
        )
        for key, label in (("ml", "full Eq. 7 (ML)"), ("map", "full Eq. 7 (MAP, learner's prior)")):
            rounds = case[key]["rounds"]
            row(f"{label}, round 1", rounds[1], rounds[1]["cpu_seconds"])
            peak = max(rounds, key=lambda r: r["test_objective"])
            row(f"{label}, best held-out (round {peak['round']})", peak, peak["cpu_seconds"])
            d = case[key]["false_edge_distances"]
            row(
                f"{label}, converged (round {rounds[-1]['round']}; false edges at distance "
                f"2: {d[2]}, 3+: {d[3]})",
                rounds[-1],
                rounds[-1]["cpu_seconds"],
            )
        lines.append(head + f"L1-LR AND / OR | | | {case['l1lr_and']} / {case['l1lr_or']} | | | |")
    lines.append("")
    if results.get("full_model_note"):
        lines += [results["full_model_note"], ""]
    return lines


def learn_theta(results, networks, trials, save, first_trial=0):
    """ET with ``learn_theta=True`` (edge tables learned with beta, Eq. 7 MAP) at the paper's
    sample sizes, beta (and the learned tables) on up to 2,000 rows, next to L1-LR."""
    for name in networks:
        m, degree, kind, n = NETWORKS[name]
        for trial in range(first_trial, first_trial + trials):
            rng = np.random.default_rng(1000 * trial + m + degree)  # as in structure()
            edges = random_graph(m, degree, kind, rng)
            rows = ising_rows(m, edges, n, rng)
            t0, c0 = time.perf_counter(), time.process_time()
            et = EnsembleOfTrees(
                Schema.from_cardinalities([2] * m), learn_theta=True, sample_rows=min(n, 2000)
            ).fit(rows)
            cpu, wall = round(time.process_time() - c0, 1), round(time.perf_counter() - t0, 1)
            and_, or_ = l1_lr_graphs(rows)
            found, truth = set(et.edges), set(edges)
            rho = et.rho
            iu = np.triu_indices(m, 1)
            top = np.argsort(-rho[iu])[: len(edges)]  # the |E| pairs of largest rho
            graph = nx.Graph(edges)
            graph.add_nodes_from(range(m))
            two_steps = sum(
                1
                for u, v in found - truth
                if nx.has_path(graph, u, v) and nx.shortest_path_length(graph, u, v) == 2
            )
            results["learn_theta"] = [
                r for r in results["learn_theta"] if (r["network"], r["trial"]) != (name, trial)
            ]
            results["learn_theta"].append(
                {
                    "network": name,
                    "trial": trial,
                    "n_rows": n,
                    "true_edges": len(edges),
                    "et_learn_theta": len(found ^ truth),
                    "missed": len(truth - found),
                    "added": len(found - truth),
                    "added_two_steps_apart": two_steps,
                    "true_in_top_rho": int(sum((iu[0][i], iu[1][i]) in truth for i in top)),
                    "rounds": len(et.history) - 1,
                    "objective": round(et.history[-1], 4),
                    "l1lr_and": hamming(and_, edges),
                    "l1lr_or": hamming(or_, edges),
                    "et_cpu_seconds": cpu,
                    "et_wall_seconds": wall,
                }
            )
            print(results["learn_theta"][-1], flush=True)
            save()


def read_data(name, split):
    return np.loadtxt(DATA / name / f"{name}.{split}.data", delimiter=",", dtype=np.uint8)


def datasets(results, names, sample_rows, save, learn_theta=False):
    key = "datasets_learn_theta" if learn_theta else "datasets"
    results[key] = [d for d in results.get(key, []) if d["dataset"] not in names]
    for name in names:
        train, test = read_data(name, "train"), read_data(name, "test")
        schema = Schema.from_cardinalities([2] * train.shape[1])
        t0 = time.process_time()
        et = EnsembleOfTrees(schema, sample_rows=sample_rows, learn_theta=learn_theta).fit(train)
        cpu = time.process_time() - t0
        node, pair = et.theta()
        cl = ETDensity(schema, chow_liu_beta(node, pair, schema.cardinalities), node, pair)
        results[key].append(
            {
                "dataset": name,
                "n_vars": train.shape[1],
                "train_rows": train.shape[0],
                "sample_rows": min(sample_rows, train.shape[0]),
                "et_test_ll": float(et.density().log_likelihood(test).mean()),
                "chow_liu_test_ll": float(cl.log_likelihood(test).mean()),
                "et_edges": len(et.edges),
                "et_cpu_seconds": round(cpu, 1),
            }
        )
        print(results[key][-1], flush=True)
        save()


def timing(results, save, learn_theta=False):
    rng = np.random.default_rng(7)
    m, n = 100, 10000
    rows = np.empty((n, m), dtype=np.uint8)
    rows[:, 0] = rng.integers(0, 2, n)
    for v in range(1, m):
        rows[:, v] = rows[:, rng.integers(0, v)] ^ (rng.random(n) > 0.8)
    schema = Schema.from_cardinalities([2] * m)
    t0, c0 = time.perf_counter(), time.process_time()
    et = EnsembleOfTrees(schema, learn_theta=learn_theta).fit(rows)
    key = "timing_learn_theta" if learn_theta else "timing"
    results[key] = {
        "n_vars": m,
        "n_rows": n,
        "sample_rows": et.sample_rows,
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(time.process_time() - c0, 1),
        "pgd_iterations": len(et.history) - 1,
        "target_seconds": 60,
    }
    print(results[key], flush=True)
    save()


def write_markdown(results, path):
    lines = [
        "# ET benchmark",
        "",
        f"Machine: {results['machine']}, shared with other jobs "
        f"(load average {results.get('load', 'not recorded')} during the run): wall times "
        "are upper bounds.",
        "",
    ]
    if results.get("timing"):
        t = results["timing"]
        lines += [
            "## Fit time (target <= 60 s on 2 cores)",
            "",
            f"{t['n_vars']} variables, {t['n_rows']:,} rows, beta on a "
            f"{t['sample_rows']:,}-row sample: {t['wall_seconds']} s wall, "
            f"{t['cpu_seconds']} s CPU, {t['pgd_iterations']} PGD iterations.",
            "",
        ]
    if results.get("timing_learn_theta"):
        t = results["timing_learn_theta"]
        lines += [
            f"With `learn_theta=True`: {t['wall_seconds']} s wall, {t['cpu_seconds']} s CPU, "
            f"{t['pgd_iterations']} rounds.",
            "",
        ]
    for key, label in (("datasets", ""), ("datasets_learn_theta", ", `learn_theta=True`")):
        if not results.get(key):
            continue
        lines += [
            f"## Exact test LL (Eq. 6), ET{label} vs Chow-Liu (target: ET >= Chow-Liu)",
            "",
            "| dataset | vars | beta sample rows | ET test LL | Chow-Liu test LL | "
            "ET edges | ET CPU s |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for d in results[key]:
            lines.append(
                f"| {d['dataset']} | {d['n_vars']} | {d['sample_rows']:,} | "
                f"{d['et_test_ll']:.4f} | {d['chow_liu_test_ll']:.4f} | "
                f"{d['et_edges']} | {d['et_cpu_seconds']} |"
            )
        lines.append("")
    if results["structure"]:
        lines += [
            "## Hamming distance to the true graph (paper Figure 2; target: ET <= the "
            "better of L1-LR AND/OR)",
            "",
            "Mean over trials.",
            "",
            "| network | rows | beta sample rows | trials | true edges | ET | L1-LR AND | L1-LR OR | "
            "ET edges | ET CPU s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        keys = sorted({(r["network"], r["n_rows"]) for r in results["structure"]})
        for name, n in keys:
            rs = [r for r in results["structure"] if r["network"] == name and r["n_rows"] == n]
            mean = lambda k: np.mean([r[k] for r in rs])  # noqa: E731
            sample = rs[0].get("beta_sample_rows", n)
            lines.append(
                f"| {name} | {n:,} | {sample:,} | {len(rs)} | {mean('true_edges'):.1f} | "
                f"{mean('et'):.1f} | {mean('l1lr_and'):.1f} | {mean('l1lr_or'):.1f} | "
                f"{mean('et_edges'):.1f} | {mean('et_cpu_seconds'):.1f} |"
            )
        lines += [
            "",
            "Per trial (ET / AND / OR): "
            + "; ".join(
                f"{r['network']}@{r['n_rows']} t{r['trial']}: {r['et']}/{r['l1lr_and']}/{r['l1lr_or']}"
                for r in results["structure"]
            )
            + ".",
            "",
        ]
    if results.get("learn_theta"):
        lines += [
            "## ET with the edge tables learned (`learn_theta=True`, Eq. 7 MAP)",
            "",
            "| network | trial | rows | true edges | ET learn_theta | missed | added | "
            "L1-LR AND | L1-LR OR | rounds | objective | ET CPU s | ET wall s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in sorted(results["learn_theta"], key=lambda r: (r["network"], r["trial"])):
            lines.append(
                f"| {r['network']} | {r['trial']} | {r['n_rows']:,} | {r['true_edges']} | "
                f"{r['et_learn_theta']} | {r['missed']} | {r['added']} | "
                f"{r['l1lr_and']} | {r['l1lr_or']} | {r['rounds']} | "
                f"{r.get('objective', '')} | {r['et_cpu_seconds']} | "
                f"{r.get('et_wall_seconds', '')} |"
            )
        lines.append("")
    if results.get("note"):
        lines += [results["note"], ""]
    if results.get("diagnosis"):
        lines += [
            "## Why ET misses edges (diagnosis)",
            "",
            "Beta on all rows unless the sample column says otherwise. Gradient: the largest "
            "Eq. 9 gradient (per unit beta; zero on the support at an optimum) over the missed "
            "true edges with beta = 0, and how many of them have a positive one (PGD stopped "
            "before adding them). MI in 1e-3 nats: median over the missed edges, the 10th "
            "largest over the non-edges, and how many missed edges lie above it.",
            "",
            "| network | trial | rows | beta sample rows | shrink | PGD tol (iterations) | "
            "Hamming | missed | added | support | missed max gradient (n > 0) | "
            "mean coupling missed / found | missed median MI | 10th non-edge MI | "
            "missed above it | ET CPU s |",
            "|---|---:|---:|---:|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|",
        ]
        for d in results["diagnosis"]:
            lines.append(
                f"| {d['network']} | {d['trial']} | {d['n_rows']:,} | {d['beta_sample_rows']:,} | "
                f"{'James-Stein' if d['shrink'] else 'plug-in'} | {d['tol']:g} "
                f"({d['pgd_iterations']}) | {d['hamming']} | {d['missed']} | {d['added']} | "
                f"{d['support']} | {d['missed_max_gradient']} ({d['missed_positive_gradient']}) | "
                f"{d['missed_coupling']} / {d['found_coupling']} | {d['missed_median_mi']} | "
                f"{d['non_edge_10th_mi']} | {d['missed_above_10th_non_edge']} | "
                f"{d['et_cpu_seconds']} |"
            )
        lines.append("")
    if results.get("diagnosis_note"):
        lines += [results["diagnosis_note"], ""]
    if results.get("full_model"):
        lines += full_model_markdown(results)
    path.write_text("\n".join(lines))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", default="timing,datasets,structure")
    p.add_argument("--networks", default=",".join(NETWORKS))
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--first-trial", type=int, default=0, help="learn_theta part: first trial")
    p.add_argument("--fractions", default="0.25,0.5,1.0")
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--sample-rows", type=int, default=2000)
    p.add_argument(
        "--structure-sample-rows",
        type=int,
        default=2000,
        help="cap on the rows beta is learned on in the structure part",
    )
    p.add_argument("--load", default=None, help="machine load average to state in the results")
    p.add_argument("--note", default=None, help="what ran and how, printed under the tables")
    p.add_argument("--diagnosis-note", default=None, help="conclusion printed under the diagnosis")
    p.add_argument("--full-model-note", default=None, help="conclusion under the full-model table")
    p.add_argument(
        "--learn-theta",
        action="store_true",
        help="the timing and datasets parts with learn_theta=True (kept apart)",
    )
    p.add_argument("--out", default=str(RESULTS / "et.json"))
    args = p.parse_args()
    out = Path(args.out)
    results = (
        json.loads(out.read_text())
        if out.exists()
        else {"structure": [], "datasets": [], "timing": None}
    )
    results["machine"] = f"{platform.machine()}, {os.cpu_count()} cores"
    if args.load:
        results["load"] = args.load
    if args.note:
        results["note"] = args.note
    if args.diagnosis_note:
        results["diagnosis_note"] = args.diagnosis_note
    if args.full_model_note:
        results["full_model_note"] = args.full_model_note
    results.setdefault("diagnosis", [])
    results.setdefault("full_model", [])
    results.setdefault("learn_theta", [])

    def save():
        out.write_text(json.dumps(results, indent=1))
        write_markdown(results, out.with_suffix(".md"))

    parts = args.parts.split(",")
    if "timing" in parts:
        timing(results, save, args.learn_theta)
    if "datasets" in parts:
        datasets(results, args.datasets.split(","), args.sample_rows, save, args.learn_theta)
    if "structure" in parts:
        nets = args.networks.split(",")
        results["structure"] = [r for r in results["structure"] if r["network"] not in nets]
        structure(
            results,
            nets,
            args.trials,
            [float(f) for f in args.fractions.split(",")],
            args.structure_sample_rows,
            save,
        )
    if "diagnosis" in parts:
        nets = args.networks.split(",")
        results["diagnosis"] = [d for d in results["diagnosis"] if d["network"] not in nets]
        diagnosis(results, nets, save)
    if "learn_theta" in parts:
        learn_theta(results, args.networks.split(","), args.trials, save, args.first_trial)
    if "full_model" in parts:
        results["full_model"] = []
        full_model(results, save)
    save()


if __name__ == "__main__":
    main()
