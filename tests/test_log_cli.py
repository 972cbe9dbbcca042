"""``streammn learn kafka://...`` and ``redis://...`` end to end: rows produced while the
learner runs, the learner killed and resumed, every row learned exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

from helpers.datasets import ROOT
from helpers.killresume import learned_value_counts, same_counts, value_counts
from helpers.logrows import N_PARTS, SCHEMA, encode, make_rows
from streammn import read_snapshot
from streammn.stream.snapshot import list_snapshots, resolve_snapshot

# both tests learn from Kafka/Redis in killed and resumed subprocesses
pytestmark = pytest.mark.slow


def produce_kafka(bootstrap, topic, parts):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p, rows in enumerate(parts):
        for message in encode(rows, "csv"):
            producer.produce(topic, message, partition=p)
    assert producer.flush(30) == 0


def produce_redis(client, streams, parts):
    pipe = client.pipeline()
    for name, rows in zip(streams, parts):
        for message in encode(rows, "csv"):
            pipe.xadd(name, {"data": message})
    pipe.execute()


def learn_cmd(uri, schema_file, out, *extra):
    return [
        sys.executable,
        "-m",
        "streammn.cli",
        "learn",
        uri,
        "--schema",
        str(schema_file),
        "--out",
        str(out),
        "--every-rows",
        "300",
        "--batch-size",
        "100",
        "--formats",
        "json",
        "--keep",
        "50",
        "--quiet",
        *extra,
    ]


def kill_and_resume(tmp_path, uri, produce, final_position):
    """Produce a third of the rows, start the learner following ``uri``, produce another third
    while it runs, SIGKILL it after a snapshot, produce the rest, resume with stop_at_end;
    then every row must have been learned exactly once."""
    schema_file = tmp_path / "rows.schema"
    schema_file.write_text(SCHEMA.libra_line() + "\n")
    parts = make_rows(600, seed=5)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    produce([p[:200] for p in parts])
    out = tmp_path / "snaps"
    proc = subprocess.Popen(
        learn_cmd(uri, schema_file, out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        produce([p[200:400] for p in parts])
        deadline = time.monotonic() + 120
        while not any(read_snapshot(s).manifest["rows_seen"] >= 900 for s in list_snapshots(out)):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the learner never caught up"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    killed_at = read_snapshot(resolve_snapshot(out)).manifest["rows_seen"]
    produce([p[400:] for p in parts])
    resumed = subprocess.run(
        learn_cmd(uri + "&stop_at_end=true", schema_file, out, "--resume"),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    final = read_snapshot(resolve_snapshot(out))
    total = sum(len(p) for p in parts)
    assert killed_at < total and final.manifest["rows_seen"] == total
    assert final.manifest["source"]["position"] == final_position(parts)
    assert same_counts(learned_value_counts(final), value_counts(SCHEMA, np.concatenate(parts)))


def test_kafka_kill_and_resume_learns_every_row_exactly_once(tmp_path):
    pytest.importorskip("confluent_kafka", reason="the 'kafka' extra is not installed")
    if os.environ.get("KAFKA_BOOTSTRAP"):
        pytest.skip("uses the mock cluster to control partitions and timing")
    from streammn.connectors.kafka_mock import MockKafkaCluster

    with MockKafkaCluster() as cluster:
        topic = f"cli-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, N_PARTS)
        uri = (
            f"kafka://{cluster.bootstrap}/{topic}?group=g&format=csv&partitions=0,1,2"
            f"&max_wait=0.2&poll_timeout=0.05"
        )
        kill_and_resume(
            tmp_path,
            uri,
            lambda parts: produce_kafka(cluster.bootstrap, topic, parts),
            lambda parts: {str(p): len(parts[p]) for p in range(N_PARTS)},
        )


def test_redis_kill_and_resume_learns_every_row_exactly_once(tmp_path):
    pytest.importorskip("redis", reason="the 'redis' extra is not installed")
    from helpers.redisserver import REDIS_SERVER, RedisServer

    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (Debian package redis-server)")
    server = RedisServer(tmp_path)
    try:
        streams = [f"cli-{uuid.uuid4().hex[:6]}-{p}" for p in range(N_PARTS)]
        uri = (
            f"redis://{server.address}/{','.join(streams)}?group=g&format=csv"
            f"&max_wait=0.2&poll_timeout=0.05"
        )

        def last_ids(parts):
            return {name: server.client.xrevrange(name, count=1)[0][0].decode() for name in streams}

        kill_and_resume(
            tmp_path, uri, lambda parts: produce_redis(server.client, streams, parts), last_ids
        )
    finally:
        server.stop()
