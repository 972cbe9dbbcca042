"""Kafka read throughput: raw confluent-kafka consumer vs :class:`KafkaSource`, per format.

Runs on librdkafka's mock cluster (loopback, in a helper process), so it needs no broker. For
each message format the same topic is read twice from the start: once by a bare consumer that
only touches every message's value (the ceiling any Python reader of this topic can reach), and
once by ``KafkaSource`` producing validated ``uint8`` batches. A third figure times
:class:`~streammn.connectors.messages.MessageDecoder` alone on the same payloads held in memory.

The mock keeps about 5 MB per partition, so rows are spread over ``partitions`` partitions and
each partition stays below that. It breaks the reading side of ``benchmarks.scale kafka`` down
by format; ``python -m benchmarks.kafka_throughput`` writes ``benchmarks/results/scale_kafka.json`` and a
Markdown table next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, Producer, TopicPartition

from streammn.connectors.kafka import KafkaSource
from streammn.connectors.kafka_mock import MockKafkaCluster
from streammn.connectors.messages import MessageDecoder
from streammn.schema import Schema

#: keep each partition below the mock cluster's ~5 MB retention
MOCK_PARTITION_BYTES = 4_500_000
#: rows per partition that fit that budget with 100 binary variables
DEFAULT_ROWS = {"csv": 20_000, "json": 4_000, "arrow": 20_000}
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def payloads(rows: np.ndarray, format: str, rows_per_message: int) -> list[bytes]:
    """Encode rows of small integers (< 10) as CSV lines, JSON objects or Arrow IPC streams."""
    n, d = rows.shape
    if format == "csv":
        text = np.full((n, 2 * d), ord(","), dtype=np.uint8)
        text[:, 0::2] = rows + ord("0")
        text[:, -1] = ord("\n")
        return text.tobytes().splitlines()
    if format == "json":
        names = [f"x{j}" for j in range(d)]
        return [json.dumps(dict(zip(names, r))).encode() for r in rows.tolist()]
    out = []
    for i in range(0, n, rows_per_message):
        chunk = rows[i : i + rows_per_message]
        table = pa.table({f"x{j}": chunk[:, j] for j in range(d)})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        out.append(sink.getvalue().to_pybytes())
    return out


def fill_topic(mock: MockKafkaCluster, topic: str, values: list[bytes], partitions: int) -> None:
    """Create ``topic`` on the mock cluster and produce ``values`` in order, the first
    ``len(values) // partitions`` to partition 0, the next to partition 1, and so on."""
    mock.create_topic(topic, partitions)
    per_part = max(1, len(values) // partitions)
    producer = Producer({"bootstrap.servers": mock.bootstrap, "linger.ms": 20, "log_level": 0})
    for i, v in enumerate(values):
        while True:
            try:
                producer.produce(topic, v, partition=min(i // per_part, partitions - 1))
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def raw_consume(
    bootstrap: str, topic: str, partitions: int, expected: int
) -> tuple[int, int, float]:
    """Messages and bytes read by a bare consumer from offset 0 until all ``expected``
    messages arrived (the same stopping rule a finite replay has, without its bookkeeping)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "raw",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n, size = 0, 0
    t0 = time.perf_counter()
    while n < expected:
        for m in consumer.consume(10_000, 0.1):
            if m.error() is None:
                n += 1
                size += len(m.value())
    elapsed = time.perf_counter() - t0
    consumer.close()
    return n, size, elapsed


def measure(
    format: str = "csv",
    n_vars: int = 100,
    partitions: int = 8,
    rows_per_partition: int = 20_000,
    rows_per_message: int = 1000,
    batch_size: int = 65536,
    seed: int = 0,
) -> dict:
    """Rows/s of the raw consumer, of KafkaSource and of the decoder alone, for one format."""
    rng = np.random.default_rng(seed)
    schema = Schema.binary(n_vars)
    n_rows = partitions * rows_per_partition
    rows = rng.integers(0, 2, size=(n_rows, n_vars), dtype=np.uint8)
    values = payloads(rows, format, rows_per_message)
    part_bytes = sum(map(len, values)) / partitions
    if part_bytes > MOCK_PARTITION_BYTES:
        raise ValueError(
            f"{format}: {part_bytes / 1e6:.1f} MB per partition exceeds the mock "
            f"cluster's retention; use fewer rows or more partitions"
        )
    with MockKafkaCluster() as mock:
        topic = f"bench-{format}"
        fill_topic(mock, topic, values, partitions)

        n_msgs, n_bytes, raw_s = raw_consume(mock.bootstrap, topic, partitions, len(values))
        src = KafkaSource(
            mock.bootstrap,
            topic,
            "bench",
            schema=schema,
            format=format,
            partitions=range(partitions),
            batch_size=batch_size,
            stop_at_end=True,
            config={"log_level": 0},
        )
        t0 = time.perf_counter()
        got = sum(len(b) for b in src)
        src_s = time.perf_counter() - t0
        src.close()
    if n_msgs != len(values) or got != n_rows:
        raise RuntimeError(
            f"{format}: read {n_msgs}/{len(values)} messages, {got}/{n_rows} "
            f"rows (retention too small for this size?)"
        )
    decoder = MessageDecoder(format, schema)
    chunk = max(1, batch_size // (rows_per_message if format == "arrow" else 1))
    t0 = time.perf_counter()
    for i in range(0, len(values), chunk):
        decoder.decode(values[i : i + chunk], lambda j: {"index": j}, 0)
    decode_s = time.perf_counter() - t0
    return {
        "format": format,
        "n_vars": n_vars,
        "partitions": partitions,
        "rows": n_rows,
        "messages": n_msgs,
        "megabytes": round(n_bytes / 1e6, 2),
        "raw_consumer_rows_per_s": round(n_rows / raw_s),
        "raw_consumer_messages_per_s": round(n_msgs / raw_s),
        "kafka_source_rows_per_s": round(n_rows / src_s),
        "decoder_only_rows_per_s": round(n_rows / decode_s),
        "source_vs_raw": round(raw_s / src_s, 3),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default="csv,json,arrow")
    ap.add_argument(
        "--rows-per-partition", type=int, default=None, help=f"default per format: {DEFAULT_ROWS}"
    )
    ap.add_argument("--out", default=os.path.join(RESULTS, "scale_kafka.json"))
    args = ap.parse_args(argv)
    runs = [
        measure(f, rows_per_partition=args.rows_per_partition or DEFAULT_ROWS[f])
        for f in args.formats.split(",")
    ]
    machine = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(
            {"benchmark": "kafka read throughput (mock cluster)", "machine": machine, "runs": runs},
            f,
            indent=2,
        )
    header = (
        "| format | rows | MB | raw consumer rows/s | KafkaSource rows/s | "
        "decoder only rows/s | source/raw |\n|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['format']} | {r['rows']:,} | {r['megabytes']} | "
        f"{r['raw_consumer_rows_per_s']:,} | {r['kafka_source_rows_per_s']:,} | "
        f"{r['decoder_only_rows_per_s']:,} | {r['source_vs_raw']} |"
        for r in runs
    ]
    table = header + "\n".join(lines) + "\n"
    with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
        f.write(
            f"Kafka read throughput, {machine['cpus']} CPUs, {machine['platform']}, "
            f"load average {machine['load_average_1min']} at the end of the run; "
            f"{runs[0]['n_vars']} binary variables, mock cluster on loopback. The raw "
            f"consumer only touches each message's value and stops at the known message count; "
            f"both rates include the fetch start-up from the first poll.\n\n{table}"
        )
    print(table)


if __name__ == "__main__":
    main()
