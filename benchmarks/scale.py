"""Scale benchmark: Kafka into a streaming learner, and exact DTSL on one process vs Dask.

Two sections, run separately; each updates its part of ``results/scale.json`` and the whole of
``results/scale.md``.

``python -m benchmarks.scale kafka``: rows of 100 binary variables sampled from a random sparse
Bayesian network are produced into a topic of librdkafka's mock cluster (loopback, no broker
needed; several partitions, as the mock keeps about 5 MB each) as one CSV line per message
(``--format``). In the same run the topic is read three ways, from offset 0 each time: by a bare
confluent-kafka consumer that only touches every message (the ceiling for any Python reader),
by :class:`~streammn.connectors.kafka.KafkaSource` alone (decoded, validated batches), and three times by
``streammn learn``'s engine, a :class:`~streammn.stream.engine.StreamLearner` with Hoeffding DTSL at the
CLI defaults: publishing snapshots every ``--every-rows`` rows in the background (the default),
the same with every snapshot written before learning goes on (``--foreground-snapshots``), and
with no snapshot until the end (the learner alone on the same stream). Reported:
rows/s of each up to the last row learned and end to end (with the final, blocking snapshot),
the time each snapshot took from the learning thread (the cut, and any wait for the previous
snapshot), and the learner's rate on the same rows from memory.

``python -m benchmarks.scale dask --rows N``: ``N`` rows (default 20M) of ``--vars`` binary
variables (default 100) from the same kind of network, in Parquet files of ``--file-rows`` rows;
exact level-wise DTSL learned twice, each run in its own process so that peak RSS figures are
clean:

- ``single``: ``DTSL(mode='exact').fit(ParquetSource)`` in one process;
- ``dask``: the same through :class:`streammn.connectors.distributed.DaskPasses` on a LocalCluster of
  ``--workers`` single-threaded worker processes (numba/BLAS pinned to one thread).

Reported: wall time of the learning (and of cluster start-up, separately), passes, tree sizes,
peak RSS of every process (driver and each worker), and whether the two learned states are
byte-identical. ``--memory-mb`` is the learner's budget, which in exact mode also bounds the
table of each row's node kept between passes (per process, per Dask worker).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: unlike ru_maxrss it is not inherited across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class RandomNetwork:
    """A random sparse Bayesian network over binary variables: up to three earlier parents
    each, logistic conditionals (the data every section of this benchmark learns from)."""

    def __init__(self, n_vars: int, rng: np.random.Generator):
        self.parents = [
            rng.choice(j, size=min(j, int(rng.integers(0, 4))), replace=False)
            for j in range(n_vars)
        ]
        self.weights = [rng.normal(0.0, 2.0, size=p.size) for p in self.parents]
        self.bias = rng.normal(0.0, 1.0, size=n_vars)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        x = np.zeros((n, self.bias.size), dtype=np.uint8)
        for j, (parents, weights) in enumerate(zip(self.parents, self.weights)):
            logit = self.bias[j] + x[:, parents].astype(np.float64) @ weights
            x[:, j] = rng.random(n) < 1.0 / (1.0 + np.exp(-logit))
        return x


def generate(directory: str, n_rows: int, n_vars: int, file_rows: int, seed: int) -> None:
    """Write ``n_rows`` rows from a :class:`RandomNetwork` as Parquet files."""
    from streammn.connectors.parquet import write_parquet
    from streammn.schema import Schema

    rng = np.random.default_rng(seed)
    network = RandomNetwork(n_vars, rng)
    schema = Schema.from_cardinalities([2] * n_vars)
    for k, start in enumerate(range(0, n_rows, file_rows)):
        x = network.sample(min(file_rows, n_rows - start), rng)
        write_parquet(os.path.join(directory, f"part-{k:04d}.parquet"), x, schema)


def _learner(schema, args):
    from streammn.dtsl import DTSL

    return DTSL(
        schema,
        mode="exact",
        kappa=args.kappa,
        max_depth=args.max_depth,
        memory_mb=args.memory_mb,
        cpd="tree",  # the Dask passes learn trees: so does the single process
    )


# section 1: Kafka into the streaming learner ---------------------------------------------------
def kafka_section(args) -> dict:
    """Rows/s of a raw consumer, of KafkaSource and of StreamLearner + DTSL on one topic."""
    from benchmarks.kafka_throughput import MOCK_PARTITION_BYTES, fill_topic, payloads, raw_consume
    from streammn.connectors.array import ArraySource
    from streammn.connectors.kafka import KafkaSource
    from streammn.connectors.kafka_mock import MockKafkaCluster
    from streammn.dtsl import DTSL
    from streammn.stream.engine import StreamLearner
    from streammn.schema import Schema
    from streammn.stream.snapshot import read_snapshot

    rng = np.random.default_rng(args.seed)
    schema = Schema.binary(args.vars)
    n_rows = args.partitions * args.rows_per_partition
    rows = RandomNetwork(args.vars, rng).sample(n_rows, rng)
    values = payloads(rows, args.format, args.rows_per_message)
    if sum(map(len, values)) / args.partitions > MOCK_PARTITION_BYTES:
        raise SystemExit(
            "more bytes per partition than the mock cluster keeps: use more "
            "--partitions or fewer --rows-per-partition"
        )
    DTSL(schema).fit(rows[:5000])  # numba kernels compiled (or loaded) before any timing

    def source(group):
        return KafkaSource(
            mock.bootstrap,
            "scale",
            group,
            schema=schema,
            format=args.format,
            partitions=range(args.partitions),
            batch_size=args.batch_size,
            stop_at_end=True,
            config={"log_level": 0},
        )

    with MockKafkaCluster() as mock, tempfile.TemporaryDirectory() as tmp:
        fill_topic(mock, "scale", values, args.partitions)
        n_msgs, n_bytes, raw_s = raw_consume(mock.bootstrap, "scale", args.partitions, len(values))
        reader = source("source-only")
        started = time.perf_counter()
        read = sum(len(b) for b in reader)
        source_s = time.perf_counter() - started
        reader.close()

        runs = {}
        for name, every, background in (
            ("snapshots", args.every_rows, True),
            ("blocking", args.every_rows, False),
            ("alone", None, True),
        ):
            stream = source(f"learner-{name}")
            engine = StreamLearner(
                stream,
                DTSL(schema),
                os.path.join(tmp, name),
                every_rows=every,
                progress=None,
                background=background,
            )
            learned_at = [0.0]
            learn = engine._learn

            def timed_learn(batch, learn=learn, learned_at=learned_at):
                learn(batch)
                learned_at[0] = time.perf_counter()  # when the last row so far was learned

            engine._learn = timed_learn
            started = time.perf_counter()
            engine.run()
            ended = time.perf_counter()
            stream.close()
            history = engine.state.history
            runs[name] = {
                "rows": engine.state.rows_seen,
                "stream_s": learned_at[0] - started,
                "end_to_end_s": ended - started,
                "engine": engine,
                "cuts": [h for h in history if h["reason"] == "periodic"],
                "features": read_snapshot(engine.published[-1]["path"]).manifest["model"][
                    "n_features"
                ],
            }
        learned = min(r["rows"] for r in runs.values())
    if n_msgs != len(values) or read != n_rows or learned != n_rows:
        raise RuntimeError(
            f"read {n_msgs}/{len(values)} messages, source {read}/{n_rows}, "
            f"learner {learned}/{n_rows} rows"
        )
    memory = DTSL(schema)
    started = time.perf_counter()
    for batch in ArraySource(rows, schema=schema, batch_size=args.batch_size):
        memory.partial_fit(batch)
    memory_s = time.perf_counter() - started
    with_snaps, alone, blocking = runs["snapshots"], runs["alone"], runs["blocking"]
    cuts = with_snaps["cuts"]
    engine = with_snaps["engine"]
    return {
        "format": args.format,
        "vars": args.vars,
        "partitions": args.partitions,
        "rows": n_rows,
        "messages": n_msgs,
        "megabytes": round(n_bytes / 1e6, 1),
        "every_rows": args.every_rows,
        "snapshots": len(engine.published),
        "learner": "DTSL hoeffding, CLI defaults",
        "leaves": int(engine.learner.forest.n_leaves().sum()),
        "features": with_snaps["features"],
        "per_snapshot_s": {
            "cut (fork) on the learning thread, max": round(
                max(h["pause_seconds"] for h in cuts), 4
            ),
            "cut (fork) on the learning thread, mean": round(
                float(np.mean([h["pause_seconds"] for h in cuts])), 4
            ),
            "learning waited for the previous snapshot, mean": round(
                float(np.mean([h["wait_seconds"] for h in cuts])), 3
            ),
            "convert in the writer, mean": round(
                float(np.mean([h["convert_seconds"] for h in cuts if "convert_seconds" in h])), 3
            ),
            "write in the writer, mean": round(
                float(np.mean([h["write_seconds"] for h in cuts if "write_seconds" in h])), 3
            ),
        },
        "rows_per_s": {
            "raw consumer": round(n_rows / raw_s),
            "KafkaSource": round(n_rows / source_s),
            "StreamLearner + DTSL from Kafka, a snapshot every "
            f"{args.every_rows:,} rows, to the last row": round(n_rows / with_snaps["stream_s"]),
            "the same, snapshots written in the foreground (--foreground-"
            "snapshots), to the last row": round(n_rows / blocking["stream_s"]),
            "the same, no snapshot until the end (learner alone), to the last row": round(
                n_rows / alone["stream_s"]
            ),
            "with snapshots, end to end (final blocking snapshot included)": round(
                n_rows / with_snaps["end_to_end_s"]
            ),
            "learner alone, end to end (its one final snapshot included)": round(
                n_rows / alone["end_to_end_s"]
            ),
            "DTSL from memory": round(n_rows / memory_s),
        },
        "snapshots_vs_alone": round(alone["stream_s"] / with_snaps["stream_s"], 3),
        "snapshots_vs_alone_end_to_end": round(
            alone["end_to_end_s"] / with_snaps["end_to_end_s"], 3
        ),
        "foreground_snapshots_vs_alone": round(alone["stream_s"] / blocking["stream_s"], 3),
        "learner_vs_raw": round(raw_s / with_snaps["stream_s"], 3),
    }


# section 2: exact DTSL, one process vs Dask ----------------------------------------------------
def run_single(args) -> dict:
    from streammn.connectors.parquet import ParquetSource

    source = ParquetSource(args.data)
    _learner(source.schema, args).fit(
        np.zeros((64, source.schema.n_vars), np.uint8)
    )  # load kernels
    started = time.perf_counter()
    model = _learner(source.schema, args).fit(source)
    wall = time.perf_counter() - started
    with open(args.model_out, "wb") as f:
        f.write(model.to_bytes())
    return {
        "wall_s": wall,
        "passes": model.n_passes,
        "peak_rss_mb": {"driver": _peak_rss_mb()},
        "leaves": int(model.forest.n_leaves().sum()),
        "depth": int(model.forest.depths().max()),
    }


def _worker_rss():
    return _peak_rss_mb()


def run_dask(args) -> dict:
    from streammn.connectors.parquet import ParquetSource
    from streammn.connectors.distributed import DaskPasses, dask_client

    source = ParquetSource(args.data)
    started = time.perf_counter()
    with dask_client(f"local[{args.workers}]") as client:
        client.wait_for_workers(args.workers)
        startup = time.perf_counter() - started
        started = time.perf_counter()
        passes = DaskPasses(client, source, cache_bytes=int(args.memory_mb * 2**20))
        model = _learner(source.schema, args).fit(source, count_pass=passes)
        wall = time.perf_counter() - started
        workers = client.run(_worker_rss)
    with open(args.model_out, "wb") as f:
        f.write(model.to_bytes())
    rss = {"driver": _peak_rss_mb()}
    rss.update({f"worker {i}": v for i, (_, v) in enumerate(sorted(workers.items()))})
    return {
        "wall_s": wall,
        "cluster_startup_s": startup,
        "passes": model.n_passes,
        "tasks_per_pass": len(passes.groups),
        "peak_rss_mb": rss,
        "leaves": int(model.forest.n_leaves().sum()),
        "depth": int(model.forest.depths().max()),
    }


def _in_subprocess(mode: str, args, model_out: str) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.scale",
        "dask",
        "--run",
        mode,
        "--data",
        args.data,
        "--model-out",
        model_out,
        "--kappa",
        str(args.kappa),
        "--workers",
        str(args.workers),
        "--memory-mb",
        str(args.memory_mb),
    ]
    if args.max_depth is not None:
        cmd += ["--max-depth", str(args.max_depth)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def dask_section(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="streammn-scale-") as tmp:
        if args.data is None:
            args.data = os.path.join(tmp, "data")
            os.makedirs(args.data)
            started = time.perf_counter()
            generate(args.data, args.rows, args.vars, args.file_rows, args.seed)
            print(
                f"generated {args.rows:,} rows in {time.perf_counter() - started:.1f} s",
                file=sys.stderr,
            )
        files = [f for f in os.listdir(args.data) if f.endswith(".parquet")]
        size_mb = sum(os.path.getsize(os.path.join(args.data, f)) for f in files) / 2**20
        runs, models = {}, {}
        for mode in ("single", "dask"):
            out = os.path.join(tmp, f"{mode}.bin")
            runs[mode] = _in_subprocess(mode, args, out)
            with open(out, "rb") as f:
                models[mode] = f.read()
            print(mode, runs[mode], file=sys.stderr)
    return {
        "dataset": {
            "rows": args.rows,
            "vars": args.vars,
            "file_rows": args.file_rows,
            "files": len(files),
            "parquet_mb": round(size_mb, 1),
            "seed": args.seed,
        },
        "dtsl": {
            "mode": "exact",
            "kappa": args.kappa,
            "max_depth": args.max_depth,
            "memory_mb": args.memory_mb,
        },
        "workers": args.workers,
        "runs": runs,
        "identical_model": models["single"] == models["dask"],
        "speedup": round(runs["single"]["wall_s"] / runs["dask"]["wall_s"], 2),
    }


# driver -----------------------------------------------------------------------------------------
def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sections = p.add_subparsers(dest="section", required=True)
    k = sections.add_parser("kafka", help="Kafka topic -> StreamLearner with DTSL")
    k.add_argument("--format", choices=["csv", "json", "arrow"], default="csv")
    k.add_argument("--partitions", type=int, default=32)
    k.add_argument("--rows-per-partition", type=int, default=20_000)
    k.add_argument("--rows-per-message", type=int, default=1000, help="arrow format only")
    k.add_argument("--every-rows", type=int, default=100_000, help="snapshot cadence")
    k.add_argument("--batch-size", type=int, default=65536)
    d = sections.add_parser("dask", help="exact DTSL, one process vs a Dask LocalCluster")
    d.add_argument("--rows", type=int, default=20_000_000)
    d.add_argument("--file-rows", type=int, default=1_000_000, help="rows per Parquet file")
    d.add_argument("--kappa", type=float, default=0.1)
    d.add_argument("--max-depth", type=int, default=None)
    d.add_argument("--memory-mb", type=float, default=256.0)
    d.add_argument("--workers", type=int, default=2)
    d.add_argument("--data", help="existing dataset directory (skips generation)")
    d.add_argument("--run", choices=["single", "dask"], help=argparse.SUPPRESS)
    d.add_argument("--model-out", help=argparse.SUPPRESS)
    for sub in (k, d):
        sub.add_argument("--vars", type=int, default=100)
        sub.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.section == "dask" and args.run:
        result = run_single(args) if args.run == "single" else run_dask(args)
        print(json.dumps(result))
        return
    section = kafka_section(args) if args.section == "kafka" else dask_section(args)
    section["command"] = "python -m benchmarks.scale " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    section["machine"] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "load_average_end": round(os.getloadavg()[0], 2),
    }
    path = os.path.join(RESULTS, "scale.json")
    results = {}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    results[args.section] = section
    os.makedirs(RESULTS, exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(RESULTS, "scale.md"), "w") as f:
        f.write(markdown(results))
    print(markdown(results))


def _kafka_markdown(r: dict) -> list[str]:
    m = r["machine"]
    lines = [
        "## (1) Kafka topic into StreamLearner with DTSL",
        "",
        f"`{r['command']}`",
        "",
        f"{r['rows']:,} rows x {r['vars']} binary variables (random sparse Bayesian network) in "
        f"{r['messages']:,} {r['format']} messages, {r['megabytes']} MB over {r['partitions']} "
        f"partitions of librdkafka's mock cluster on loopback; every reader starts at offset 0 "
        f"and stops at the end of the topic. The learner is `streammn learn`'s engine: "
        f"{r['learner']}, a snapshot every {r['every_rows']:,} rows and at the end "
        f"({r['snapshots']} snapshots: DN2MN conversion, JSON/.mn/UAI files, checkpoint, "
        f"durable write, offset commit; the periodic ones written by a forked child while "
        f"learning goes on), {r['leaves']:,} leaves learned, {r['features']:,} features. The "
        f"same engine also ran without periodic snapshots (learner alone). Machine: "
        f"{m['cpus']} CPUs, {m['platform']}, load average {m['load_average_end']} at the end "
        f"(shared with other jobs: compare ratios within the run).",
        "",
        "| reader | rows/s |",
        "|---|---|",
    ]
    lines += [f"| {name} | {rate:,} |" for name, rate in r["rows_per_s"].items()]
    lines += ["", "| per periodic snapshot | seconds |", "|---|---|"]
    lines += [f"| {name} | {v} |" for name, v in r.get("per_snapshot_s", {}).items()]
    lines += [
        "",
        f"With a snapshot every {r['every_rows']:,} rows the stream runs at "
        f"**{r.get('snapshots_vs_alone', 0):.2f}x** the learner-alone rate up to the last "
        f"row ({r.get('snapshots_vs_alone_end_to_end', 0):.2f}x end to end; with the "
        f"snapshots written in the foreground "
        f"{r.get('foreground_snapshots_vs_alone', 0):.2f}x), and at "
        f"{r['learner_vs_raw']:.2f}x the raw consumer's rate on the same topic.",
    ]
    return lines


def _dask_markdown(r: dict) -> list[str]:
    d, m = r["dataset"], r["machine"]
    lines = [
        "## (2) Exact DTSL, one process vs Dask",
        "",
        f"`{r['command']}`",
        "",
        f"{d['rows']:,} rows x {d['vars']} binary variables (random sparse Bayesian network), "
        f"{d['files']} Parquet files, {d['parquet_mb']} MB; exact DTSL kappa "
        f"{r['dtsl']['kappa']}, max_depth {r['dtsl']['max_depth']}, memory_mb "
        f"{r['dtsl'].get('memory_mb', 256)} (per process / per worker). Machine: {m['cpus']} "
        f"CPUs, {m['platform']}, load average {m['load_average_end']} at the end. Dask: "
        f"LocalCluster of {r['workers']} single-threaded worker processes; wall time excludes "
        "cluster start-up (listed separately) and, for the single process, numba compilation. "
        f"Learned states byte-identical: **{r['identical_model']}**; speed-up {r['speedup']}x.",
        "",
        "| run | wall s | passes | leaves | depth | start-up s | peak RSS MB per process |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, run in r["runs"].items():
        rss = ", ".join(f"{k} {v:.0f}" for k, v in run["peak_rss_mb"].items())
        lines.append(
            f"| {name} | {run['wall_s']:.1f} | {run['passes']} | {run['leaves']:,} | "
            f"{run['depth']} | {run.get('cluster_startup_s', 0):.1f} | {rss} |"
        )
    return lines


def markdown(results: dict) -> str:
    lines = ["# Scale benchmark", ""]
    if "kafka" in results:
        lines += _kafka_markdown(results["kafka"]) + [""]
    if "dask" in results:
        lines += _dask_markdown(results["dask"]) + [""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
