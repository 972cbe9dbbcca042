"""Source throughput next to the raw reader of the same bytes: JSON (and CSV) log messages.

``python -m benchmarks.sources`` writes ``benchmarks/results/sources.json`` and
``sources.md``. Rows hold 100 integer fields (``json.dumps`` of a dict, ~1 kB a message with
binary states, as in ``scale_kafka``). Two sections:

- ``json_decoders``: rows/s of decoding the same in-memory JSON payloads into a ``uint8``
  state matrix, poll by poll (10,000 messages a poll), by
  :class:`~streammn.connectors.messages.MessageDecoder` (its numba kernel, :mod:`streammn.connectors.flatjson`),
  by its general pyarrow reader alone (the decoder before the kernel), and by the
  alternatives the kernel was chosen over: pyarrow's JSON reader over the newline-joined poll
  with threads, orjson and msgspec (each only when installed; they are not dependencies).
  Every alternative ends at the same matrix, so each row is a complete decoder. Two value
  widths: binary states (one digit: the kernel's layout path) and states ``0..99`` (one or
  two digits, messages of varying length: its parsing path).
- ``kafka``: the same topic on librdkafka's mock cluster (loopback, a helper process) read
  from the start by a bare consumer that only touches every message's value (the ceiling of
  any Python reader) and by :class:`~streammn.connectors.kafka.KafkaSource` (validated batches).
  Each is repeated, alternating the order; the table shows medians and the median of the
  paired source/raw ratios. The mock keeps ~5 MB a partition, so rows are spread over
  partitions.
- ``mixed_csv`` (issue 37): a headed CSV of ordinary events, 40 categorical string columns
  (5 to 12 names each), 40 booleans (``true``/``false``) and 20 numbers, read by
  :class:`~streammn.connectors.csv.CsvSource` with its schema inferred (names, booleans, quantile bins),
  next to the same rows written as their state numbers: rows/s decoded (every batch of the
  file) and end to end through one pass of DTSL (``partial_fit`` of every batch), each the
  median of the repeats, alternating the two files.

The figures are wall-clock on a shared machine: the load average before and after the run is
recorded next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

from streammn.connectors.messages import MessageDecoder
from streammn.schema import Schema

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
POLL = 10_000  # messages a KafkaSource poll holds at most (streammn.connectors.kafka)
#: librdkafka fetch settings both Kafka readers get (``--fetch-backoff-ms``): KafkaSource's
#: own, so that the raw consumer differs from it only on the Python side
FETCH: dict = {}


def json_payloads(rows: np.ndarray) -> list[bytes]:
    names = [f"x{j}" for j in range(rows.shape[1])]
    return [json.dumps(dict(zip(names, r))).encode() for r in rows.tolist()]


def csv_payloads(rows: np.ndarray) -> list[bytes]:
    return [",".join(map(str, r)).encode() for r in rows.tolist()]


# the decoders ---------------------------------------------------------------------------
class _General(MessageDecoder):
    _use_kernel = False


def _where(i):
    return {"index": i}


def decoders(schema: Schema) -> dict:
    """name -> function(poll of payloads) -> uint8 rows, for those that can run here."""
    import pyarrow as pa
    import pyarrow.json as pajson

    names = schema.names
    kernel = MessageDecoder("json", schema)
    general = _General("json", schema)
    out = {
        "MessageDecoder (numba kernel, streammn.connectors.flatjson)": lambda v: kernel.decode(
            v, _where, 0
        ),
        "MessageDecoder, general path alone (pyarrow, no threads; the decoder before)": (
            lambda v: general.decode(v, _where, 0)
        ),
    }
    parse = pajson.ParseOptions(
        explicit_schema=pa.schema([(n, pa.int64()) for n in names]),
        unexpected_field_behavior="error",
    )

    def pyarrow_threads(values):
        buf = b"\n".join(values)
        read = pajson.ReadOptions(use_threads=True, block_size=1 << 20)
        table = pajson.read_json(pa.BufferReader(buf), read_options=read, parse_options=parse)
        return schema.validate(np.column_stack([c.to_numpy() for c in table.columns]))

    out["pyarrow.json.read_json over the joined poll, use_threads=True, 1 MB blocks"] = (
        pyarrow_threads
    )
    try:
        import orjson

        def with_orjson(values):
            objs = orjson.loads(b"[" + b",".join(values) + b"]")
            return schema.validate(np.array([[o[n] for n in names] for o in objs]))

        out[f"orjson {orjson.__version__} (one array per poll) + numpy"] = with_orjson
    except ImportError:
        pass
    try:
        import msgspec

        row = msgspec.defstruct(
            "Row", [(n, int | None) for n in names], forbid_unknown_fields=True, gc=False
        )
        decode_list = msgspec.json.Decoder(list[row]).decode
        astuple = msgspec.structs.astuple

        def with_msgspec(values):
            structs = decode_list(b"[" + b",".join(values) + b"]")
            return schema.validate(np.array([astuple(s) for s in structs]))

        out[f"msgspec {msgspec.__version__} (Struct of 100 ints, one array per poll) + numpy"] = (
            with_msgspec
        )
    except ImportError:
        pass
    return out


def measure_decoders(n_vars: int, n_rows: int, repeats: int, seed: int = 0) -> list[dict]:
    runs = []
    for card in (2, 100):
        rng = np.random.default_rng(seed)
        rows = rng.integers(0, card, size=(n_rows, n_vars), dtype=np.uint8)
        values = json_payloads(rows)
        schema = Schema.from_cardinalities([card] * n_vars)
        polls = [values[i : i + POLL] for i in range(0, n_rows, POLL)]
        for name, decode in decoders(schema).items():
            got = decode(polls[0])  # warm-up (numba cache, imports) and check
            np.testing.assert_array_equal(got, rows[: got.shape[0]])
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for p in polls:
                    decode(p)
                times.append(time.perf_counter() - t0)
            runs.append(
                {
                    "decoder": name,
                    "states": f"0..{card - 1}",
                    "bytes_per_message": round(sum(map(len, values)) / n_rows),
                    "rows": n_rows,
                    "rows_per_s_best": round(n_rows / min(times)),
                    "rows_per_s_median": round(n_rows / statistics.median(times)),
                }
            )
            print(runs[-1], flush=True)
    return runs


# Kafka ----------------------------------------------------------------------------------
def raw_consume(bootstrap: str, topic: str, partitions: int, expected: int) -> float:
    """Seconds a bare consumer takes from offset 0 to the ``expected`` messages' values.

    Like KafkaSource's replay it asks each poll for no more messages than are left, so
    neither waits out a poll's timeout for messages that will never come."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "raw",
            "enable.auto.commit": False,
            "log_level": 0,
            **FETCH,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n = 0
    t0 = time.perf_counter()
    while n < expected:
        for m in consumer.consume(min(POLL, expected - n), 0.2):
            if m.error() is None:
                n += 1
                m.value()
    elapsed = time.perf_counter() - t0
    consumer.close()
    return elapsed


def measure_kafka(format: str, n_vars: int, partitions: int, rows_per_partition: int, repeats: int):
    from benchmarks.kafka_throughput import fill_topic
    from streammn.connectors.kafka import KafkaSource
    from streammn.connectors.kafka_mock import MockKafkaCluster

    rng = np.random.default_rng(1)
    n_rows = partitions * rows_per_partition
    rows = rng.integers(0, 2, size=(n_rows, n_vars), dtype=np.uint8)
    values = json_payloads(rows) if format == "json" else csv_payloads(rows)
    schema = Schema.binary(n_vars)
    rates = {"raw": [], "source": []}

    def read_source(bootstrap, topic, group):
        src = KafkaSource(
            bootstrap,
            topic,
            group,
            schema=schema,
            format=format,
            partitions=range(partitions),
            stop_at_end=True,
            config={"log_level": 0, **FETCH},
        )
        t0 = time.perf_counter()
        got = sum(len(b) for b in src)
        elapsed = time.perf_counter() - t0
        src.close()
        if got != n_rows:
            raise RuntimeError(f"KafkaSource read {got}/{n_rows} rows")
        return n_rows / elapsed

    with MockKafkaCluster() as mock:
        topic = f"bench-sources-{format}"
        fill_topic(mock, topic, values, partitions)
        for r in range(repeats):
            for what in ["raw", "source"] if r % 2 == 0 else ["source", "raw"]:
                if what == "raw":
                    elapsed = raw_consume(mock.bootstrap, topic, partitions, len(values))
                    rates["raw"].append(n_rows / elapsed)
                else:
                    rates["source"].append(read_source(mock.bootstrap, topic, f"source-{r}"))
    ratios = [s / r for s, r in zip(rates["source"], rates["raw"])]
    run = {
        "format": format,
        "n_vars": n_vars,
        "partitions": partitions,
        "rows": n_rows,
        "megabytes": round(sum(map(len, values)) / 1e6, 2),
        "repeats": repeats,
        "raw_consumer_rows_per_s_median": round(statistics.median(rates["raw"])),
        "kafka_source_rows_per_s_median": round(statistics.median(rates["source"])),
        "source_vs_raw_median": round(statistics.median(ratios), 3),
        "source_vs_raw_all": [round(x, 3) for x in ratios],
        "rows_per_s_all": {k: [round(x) for x in v] for k, v in rates.items()},
    }
    print(run, flush=True)
    return run


def mixed_events(n_rows: int, seed: int = 0):
    """``(table, states)``: ``n_rows`` events of the mixed schema as an Arrow table (strings,
    booleans, floats; each column depends on the one before it, so there is structure to
    learn) and, for the pre-encoded file, each column's states (names sorted, ``False < True``,
    a number's quartile)."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    columns, states = {}, {}
    previous = rng.integers(0, 2, n_rows)
    for j in range(100):
        follow = rng.random(n_rows) < 0.3  # copies (a function of) the previous column
        if j < 40:
            k = 5 + j % 8
            codes = np.where(follow, previous % k, rng.integers(0, k, n_rows))
            names = np.array([f"c{j}v{v:02d}" for v in range(k)])
            columns[f"cat{j}"], states[f"cat{j}"] = names[codes], codes
        elif j < 80:
            codes = np.where(follow, previous % 2, rng.integers(0, 2, n_rows))
            columns[f"flag{j}"], states[f"flag{j}"] = codes.astype(bool), codes
        else:
            x = np.round(rng.gamma(2.0, 20.0, n_rows) + 15.0 * (previous % 2) * follow, 2)
            codes = np.searchsorted(np.quantile(x, [0.25, 0.5, 0.75]), x, side="right")
            columns[f"num{j}"], states[f"num{j}"] = x, codes
        previous = codes
    return pa.table(columns), pa.table({k: v.astype(np.uint8) for k, v in states.items()})


def _through(path: str, learn: bool) -> tuple[float, int]:
    """Seconds to read every batch of the CSV at ``path`` (and, with ``learn``, to learn it
    with one pass of DTSL), and the rows read."""
    from streammn.connectors.csv import CsvSource
    from streammn.dtsl import DTSL

    t0 = time.perf_counter()
    n = 0
    with CsvSource(path) as source:
        learner = DTSL(source.schema, weights="closed-form") if learn else None
        for batch in source:
            n += len(batch)
            if learner is not None:
                learner.partial_fit(batch)
    return time.perf_counter() - t0, n


def measure_mixed_csv(n_rows: int, repeats: int) -> list[dict]:
    import tempfile

    import pyarrow.csv as pacsv

    events, states = mixed_events(n_rows)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"mixed (names, booleans, numbers)": os.path.join(tmp, "events.csv")}
        paths["pre-encoded state numbers"] = os.path.join(tmp, "states.csv")
        pacsv.write_csv(events, paths["mixed (names, booleans, numbers)"])
        pacsv.write_csv(states, paths["pre-encoded state numbers"])
        for learn in (False, True):
            times = {name: [] for name in paths}
            for _, name in [(r, name) for r in range(repeats) for name in paths]:
                seconds, n = _through(paths[name], learn)
                assert n == n_rows
                times[name].append(seconds)
            for name, path in paths.items():
                out.append(
                    {
                        "file": name,
                        "what": "decoded and learned (one pass)" if learn else "decoded",
                        "rows": n_rows,
                        "megabytes": round(os.path.getsize(path) / 2**20, 1),
                        "rows_per_s_median": int(n_rows / statistics.median(times[name])),
                        "seconds": [round(t, 3) for t in times[name]],
                    }
                )
    return out


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }


def write(out: str, result: dict) -> None:
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    m = result["machine"]
    lines = [
        f"Source throughput, {m['cpus']} CPUs, {m['platform']}; load average "
        f"{result['load_average_before']} before the run, {result['load_average_after']} "
        f"after (a shared machine: other jobs ran too). Command: `{result['command']}`.",
        "",
    ]
    if result.get("json_decoders"):
        lines += [
            "## JSON decoders alone (in-memory payloads, 10,000 messages a poll)",
            "",
            "100 integer fields a row (binary states: ~1 kB a JSON message).",
            "",
            "| states | bytes/message | decoder | rows | best rows/s | median rows/s |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['states']} | {r['bytes_per_message']} | {r['decoder']} | {r['rows']:,} | "
            f"{r['rows_per_s_best']:,} | {r['rows_per_s_median']:,} |"
            for r in result["json_decoders"]
        ]
        lines.append("")
    if result.get("kafka"):
        lines += [
            "## Kafka on the mock cluster: raw consumer vs KafkaSource on the same topic",
            "",
            "The raw consumer only touches each message's value, asks each poll for no more "
            "messages than are left and stops at the known message count; every rate includes "
            "the fetch start-up from the first poll. Both readers run with KafkaSource's "
            f"fetch.queue.backoff.ms ({result['fetch.queue.backoff.ms']} ms; librdkafka's default "
            "of 1000 stalls either for ~1 s whenever its prefetch queue fills). Medians over "
            "the repeats; source/raw is the median of the paired ratios.",
            "",
            "| format | rows | MB | repeats | raw consumer rows/s | KafkaSource rows/s | "
            "source/raw (median) | source/raw, each repeat |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['format']} | {r['rows']:,} | {r['megabytes']} | {r['repeats']} | "
            f"{r['raw_consumer_rows_per_s_median']:,} | {r['kafka_source_rows_per_s_median']:,} | "
            f"{r['source_vs_raw_median']} | {', '.join(map(str, r['source_vs_raw_all']))} |"
            for r in result["kafka"]
        ]
        lines.append("")
    if result.get("mixed_csv"):
        lines += [
            "## A headed CSV of mixed events (issue 37) next to the same rows pre-encoded",
            "",
            "40 categorical string columns, 40 booleans, 20 numbers (4 quantile bins), the schema "
            "inferred from the first 10,000 rows; targets: >= 300k rows/s decoded, and end to end "
            "within 1.5x of the pre-encoded file.",
            "",
            "| file | what | rows | MB | median rows/s | seconds, each repeat |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['file']} | {r['what']} | {r['rows']:,} | {r['megabytes']} | "
            f"{r['rows_per_s_median']:,} | {', '.join(map(str, r['seconds']))} |"
            for r in result["mixed_csv"]
        ]
        lines.append("")
    with open(os.path.splitext(out)[0] + ".md", "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vars", type=int, default=100)
    ap.add_argument("--decoder-rows", type=int, default=100_000)
    ap.add_argument("--kafka-formats", default="json,csv")
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument(
        "--rows-per-partition",
        type=int,
        default=4000,
        help="keep a partition below the mock's ~5 MB (4000 JSON rows of 100 fields: 4 MB)",
    )
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sections", default="json_decoders,kafka")
    ap.add_argument("--mixed-rows", type=int, default=200_000)
    ap.add_argument(
        "--fetch-backoff-ms",
        type=int,
        default=None,
        help="librdkafka fetch.queue.backoff.ms for both Kafka readers (default: KafkaSource's)",
    )
    ap.add_argument("--out", default=os.path.join(RESULTS, "sources.json"))
    args = ap.parse_args(argv)
    sections = args.sections.split(",")
    result = {
        "benchmark": "source throughput next to the raw reader",
        "machine": machine(),
        "command": " ".join(
            ["python -m benchmarks.sources", *(sys.argv[1:] if argv is None else argv)]
        ),
        "load_average_before": round(os.getloadavg()[0], 2),
    }
    if "kafka" in sections:
        from streammn.connectors.kafka import FETCH_QUEUE_BACKOFF_MS

        backoff = args.fetch_backoff_ms
        FETCH["fetch.queue.backoff.ms"] = FETCH_QUEUE_BACKOFF_MS if backoff is None else backoff
        result["fetch.queue.backoff.ms"] = FETCH["fetch.queue.backoff.ms"]
    if "json_decoders" in sections:
        result["json_decoders"] = measure_decoders(args.vars, args.decoder_rows, args.repeats)
    if "kafka" in sections:
        result["kafka"] = [
            measure_kafka(f, args.vars, args.partitions, args.rows_per_partition, args.repeats)
            for f in args.kafka_formats.split(",")
        ]
    if "mixed_csv" in sections:
        result["mixed_csv"] = measure_mixed_csv(args.mixed_rows, args.repeats)
    result["load_average_after"] = round(os.getloadavg()[0], 2)
    write(args.out, result)


if __name__ == "__main__":
    main()
