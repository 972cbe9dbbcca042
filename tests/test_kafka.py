"""KafkaSource against a Kafka cluster on loopback: librdkafka's mock cluster in a helper
process, or a real broker when ``KAFKA_BOOTSTRAP`` is set. Rows carry their partition and
sequence number (tests/helpers/logrows.py)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid

import numpy as np
import pytest

pytest.importorskip(
    "confluent_kafka", reason="the 'kafka' extra (confluent-kafka) is not installed"
)
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from streammn.connectors.base import SourceError, SourceUnavailable  # noqa: E402
from streammn.connectors.resolve import open_source  # noqa: E402
from streammn.connectors.kafka import KafkaSource, open_kafka  # noqa: E402
from streammn.connectors.kafka_mock import MockKafkaCluster  # noqa: E402
from streammn.errors import SettingsError  # noqa: E402
from streammn.schema import SchemaError  # noqa: E402
from helpers.logrows import (
    N_PARTS,
    SCHEMA,
    encode,
    make_rows,
    read,  # noqa: E402
    split_by_partition,
)

REAL_BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP")
# a real broker enforces a minimum session timeout; the mock lets a restarted member in sooner
GROUP_CONFIG = {
    "session.timeout.ms": 6000 if REAL_BOOTSTRAP else 1000,
    "heartbeat.interval.ms": 500 if REAL_BOOTSTRAP else 200,
    "fetch.wait.max.ms": 100,
}


class RealCluster:
    """The broker named by KAFKA_BOOTSTRAP, with the mock's create_topic interface."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def create_topic(self, topic: str, partitions: int) -> None:
        for future in self.admin.create_topics([NewTopic(topic, partitions, 1)]).values():
            future.result(timeout=30)


@pytest.fixture(scope="module")
def cluster():
    if REAL_BOOTSTRAP:
        yield RealCluster(REAL_BOOTSTRAP)
    else:
        with MockKafkaCluster() as mock:
            yield mock


def produce(cluster, topic: str, messages_by_part: list[list[bytes]]) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5})
    for p, messages in enumerate(messages_by_part):
        for m in messages:
            producer.produce(topic, m, partition=p)
    assert producer.flush(30) == 0


def new_topic(cluster, rows_by_part, format="csv", rows_per_message=1) -> str:
    topic = f"t-{uuid.uuid4().hex[:10]}"
    cluster.create_topic(topic, N_PARTS)
    produce(cluster, topic, [encode(r, format, rows_per_message) for r in rows_by_part])
    return topic


def source(cluster, topic, group=None, **kw) -> KafkaSource:
    kw.setdefault("stop_at_end", True)
    kw.setdefault("config", GROUP_CONFIG)
    return KafkaSource(
        cluster.bootstrap, topic, group or f"g-{uuid.uuid4().hex[:8]}", schema=SCHEMA, **kw
    )


@pytest.mark.parametrize("format,rows_per_message", [("csv", 1), ("json", 1), ("arrow", 40)])
def test_exact_rows_in_order_per_partition(cluster, format, rows_per_message):
    expected = make_rows(300, seed=1)
    topic = new_topic(cluster, expected, format, rows_per_message)
    with source(cluster, topic, format=format, batch_size=128) as src:
        rows, batches = read(src)
        assert src.position() == {
            str(p): 300 if format != "arrow" else 300 // 40 + 1 for p in range(N_PARTS)
        }
    assert rows.shape == (3 * 300, SCHEMA.n_vars)
    for p, got in enumerate(split_by_partition(rows)):
        np.testing.assert_array_equal(got, expected[p])
    # batches: absolute starts chain up, positions never go back, sizes honour batch_size
    assert [b.start for b in batches] == list(np.cumsum([0] + [len(b) for b in batches[:-1]]))
    for prev, cur in zip(batches, batches[1:]):
        assert all(cur.end[p] >= o for p, o in prev.end.items())
    if format != "arrow":
        assert max(len(b) for b in batches) <= 128


def test_seek_replays_from_a_batch_position(cluster):
    expected = make_rows(400, seed=2)
    topic = new_topic(cluster, expected)
    with source(cluster, topic, batch_size=150) as src:
        batches = list(src)
    middle = batches[len(batches) // 2].end
    with source(cluster, topic, batch_size=150) as replay:
        replay.seek(middle)
        rows, _ = read(replay)
    for p, got in enumerate(split_by_partition(rows)):
        np.testing.assert_array_equal(got, expected[p][middle.get(str(p), 0) :])
    # rewind goes back to the earliest retained offsets: a full second pass
    with source(cluster, topic, batch_size=500) as src:
        first, _ = read(src)
        src.rewind()
        second, _ = read(src)
    for a, b in zip(split_by_partition(first), split_by_partition(second)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("partitions", [None, [0, 2]])
def test_commit_then_restarted_member_starts_after_committed_offsets(cluster, partitions):
    """A consumer commits a position and closes; a new member of the group (after the group
    rebalances, or by direct assignment) starts exactly after the committed offsets."""
    expected = make_rows(250, seed=3)
    topic = new_topic(cluster, expected)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with source(cluster, topic, group, batch_size=100, partitions=partitions) as first:
        batches = list(first)
        committed = batches[2].end
        first.commit(committed)
        assert first.committed() == committed
    with source(cluster, topic, group, batch_size=100, partitions=partitions) as second:
        rows, _ = read(second)
        assert second.committed() == committed  # reading alone commits nothing
    for closed_call in (second.committed, lambda: second.commit(committed)):
        with pytest.raises(SourceError, match="the source is closed"):
            closed_call()
    for p, got in enumerate(split_by_partition(rows)):
        if partitions is not None and p not in partitions:
            assert got.shape[0] == 0
            continue
        np.testing.assert_array_equal(got, expected[p][committed.get(str(p), 0) :])


def test_offsets_deleted_or_beyond_the_log_are_an_error_not_a_silent_gap(cluster):
    expected = make_rows(40, seed=9)
    topic = new_topic(cluster, expected)
    with source(cluster, topic) as src:
        src.seek({"0": 5000})
        with pytest.raises(
            SourceError, match="partition 0 has offsets 0..40 but reading was to continue at 5000"
        ):
            list(src)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with source(cluster, topic, group, partitions=[1]) as src:
        src.commit({"1": 7000})  # a commit the log cannot honour
    with source(cluster, topic, group) as src:
        with pytest.raises(
            SourceError, match="partition 1 has offsets 0..40 but reading was to continue at 7000"
        ):
            list(src)


def test_start_latest_reads_only_new_messages_and_replays_resume_at_the_end(cluster):
    old = make_rows(20, seed=10)
    topic = new_topic(cluster, old)
    with source(cluster, topic, start="latest", partitions=[0, 1, 2]) as src:
        assert read(src)[0].shape[0] == 0
        assert src.position() == {"0": 20, "1": 20, "2": 20}  # read to the end, nothing new
        new = make_rows(15, seed=11)
        produce(cluster, topic, [encode(r, "csv") for r in new])
        rows, _ = read(src)  # the next replay picks up what arrived since
        assert src.position() == {"0": 35, "1": 35, "2": 35}
    for p, got in enumerate(split_by_partition(rows)):
        np.testing.assert_array_equal(got, new[p])


@pytest.mark.parametrize("format", ["csv", "json", "arrow"])
def test_bad_message_names_topic_partition_offset(cluster, format):
    rows = make_rows(60, seed=4)
    topic = f"t-{uuid.uuid4().hex[:10]}"
    cluster.create_topic(topic, N_PARTS)
    messages = [encode(r, format, 10) for r in rows]
    bad_row = rows[1][0].copy()
    bad_row[-1] = 7  # out of range for c (cardinality 5)
    bad_index = 3
    messages[1].insert(bad_index, encode(bad_row[None, :], format, 10)[0])
    produce(cluster, topic, messages)
    with source(cluster, topic, format=format, batch_size=1000) as src:
        with pytest.raises(SchemaError) as info:
            list(src)
        # nothing of the failing batch was delivered
        assert src.position() == {str(p): 0 for p in range(N_PARTS)}
        with pytest.raises(SchemaError) as again:  # never skipped: the next try fails alike
            list(src)
        # same message, same reason (its row index depends on how partitions interleave)
        assert (again.value.source, again.value.reason) == (info.value.source, info.value.reason)
    msg = str(info.value)
    assert f"topic '{topic}' partition 1 offset {bad_index}" in msg
    assert "out of range" in msg and info.value.column == SCHEMA.n_vars - 1


def test_malformed_json_stops_at_the_last_good_batch_and_resumes_losing_nothing(cluster, tmp_path):
    """A batch holding malformed JSON yields nothing; the batches before it stand, and a
    source resumed from their end (here with a dead-letter file) delivers every other row."""
    rows = make_rows(150, seed=12)
    topic = f"t-{uuid.uuid4().hex[:10]}"
    cluster.create_topic(topic, N_PARTS)
    messages = [encode(r, "json") for r in rows]
    messages[1].insert(100, b'{"part": 1, "s0": 0, "a": 1.5}')  # partition 1, offset 100
    produce(cluster, topic, messages)
    got = []
    with source(cluster, topic, partitions=[1], format="json", batch_size=40) as src:
        with pytest.raises(SchemaError, match=r"partition 1 offset 100.*couldn't parse:1\.5"):
            for batch in src:
                got.append(batch.rows)
        assert src.position() == {"1": 80}  # two batches of 40 delivered, the third failed
    dead = tmp_path / "dead.jsonl"
    with source(
        cluster, topic, partitions=[1], format="json", batch_size=40, dead_letter=dead
    ) as src:
        src.seek({"1": 80})
        got.append(read(src)[0])
        assert src.position() == {"1": 151}
    np.testing.assert_array_equal(np.concatenate(got), rows[1])
    (letter,) = [json.loads(line) for line in dead.read_text().splitlines()]
    assert (letter["partition"], letter["offset"]) == (1, 100)


def test_dead_letter_file_receives_bad_messages_and_the_rest_flows(cluster, tmp_path):
    rows = make_rows(80, seed=5)
    topic = f"t-{uuid.uuid4().hex[:10]}"
    cluster.create_topic(topic, N_PARTS)
    messages = [encode(r, "csv") for r in rows]
    messages[0].insert(5, b"0,1,1")  # wrong column count
    messages[2].insert(0, b"\xff\xfe not csv")  # not even text
    messages[2].insert(40, b"")  # empty
    produce(cluster, topic, messages)
    path = tmp_path / "dead.jsonl"
    with source(cluster, topic, batch_size=64, dead_letter=path) as src:
        got, _ = read(src)
        assert src.position() == {"0": 81, "1": 80, "2": 82}
    for p, part in enumerate(split_by_partition(got)):
        np.testing.assert_array_equal(part, rows[p])
    letters = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted((d["partition"], d["offset"]) for d in letters) == [(0, 5), (2, 0), (2, 40)]
    by_place = {(d["partition"], d["offset"]): d for d in letters}
    assert by_place[(0, 5)]["value"] == "0,1,1" and by_place[(0, 5)]["topic"] == topic
    assert "value_base64" in by_place[(2, 0)]
    assert by_place[(2, 40)]["error"] == "empty message"


def test_partial_batch_after_max_wait_and_stop(cluster):
    expected = make_rows(50, seed=6)
    topic = new_topic(cluster, expected)
    with source(cluster, topic, batch_size=10_000, stop_at_end=False, max_wait=0.3) as src:
        it = iter(src)
        rows = next(it).rows  # follows the topic: a partial batch once max_wait passed
        while rows.shape[0] < 150:
            rows = np.concatenate([rows, next(it).rows])
        timer = threading.Timer(0.3, src.stop)
        timer.start()
        assert list(it) == []  # nothing more arrives; stop() ends the iteration
        timer.join()
    for p, got in enumerate(split_by_partition(rows)):
        np.testing.assert_array_equal(got, expected[p])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_cluster_at_open_is_source_unavailable():
    with pytest.raises(SourceUnavailable, match="cannot reach the Kafka cluster"):
        KafkaSource(f"127.0.0.1:{_closed_port()}", "t", "g", schema=SCHEMA, broker_timeout=1.0)


def test_missing_topic_is_source_unavailable(cluster):
    if not REAL_BOOTSTRAP:  # the mock creates topics on first use; a real broker may too
        pytest.skip("the mock cluster auto-creates topics")
    with pytest.raises(SourceUnavailable):
        source(cluster, f"missing-{uuid.uuid4().hex[:8]}")


@pytest.mark.slow
@pytest.mark.skipif(bool(REAL_BOOTSTRAP), reason="needs a broker the test can stop")
def test_broker_gone_mid_stream_retries_then_source_unavailable():
    with MockKafkaCluster() as mock:
        expected = make_rows(200, seed=7)
        topic = new_topic(mock, expected)
        src = KafkaSource(
            mock.bootstrap,
            topic,
            "g",
            schema=SCHEMA,
            batch_size=50,
            broker_timeout=1.5,
            max_wait=0.2,
        )
        it = iter(src)
        delivered = [next(it) for _ in range(3)]
        mock.stop()
        started = time.monotonic()
        with pytest.raises(SourceUnavailable, match="unreachable for 1.5 s") as info:
            for batch in it:  # rows the client had already fetched still arrive
                delivered.append(batch)
        waited = time.monotonic() - started
        src.close()
    assert 1.5 <= waited < 30  # it retried for broker_timeout, then gave up
    rows = np.concatenate([b.rows for b in delivered])
    for p, got in enumerate(split_by_partition(rows)):
        np.testing.assert_array_equal(got, expected[p][: got.shape[0]])
    assert src.position() == delivered[-1].end
    assert str(delivered[-1].end) in str(info.value)


def test_open_kafka_uri(cluster, tmp_path):
    expected = make_rows(30, seed=8)
    topic = new_topic(cluster, expected, "json")
    schema_file = tmp_path / "rows.schema"
    schema_file.write_text(SCHEMA.to_json())
    uri = (
        f"kafka://{cluster.bootstrap}/{topic}?group=uri-{uuid.uuid4().hex[:6]}&format=json"
        f"&partitions=0,2&batch_size=7&stop_at_end=true&max_wait=0.5&schema={schema_file}"
        f"&statistics.interval.ms=0"
    )
    with open_kafka(uri, config=GROUP_CONFIG) as src:
        assert (src.format, src.partitions, src.batch_size, src.stop_at_end) == (
            "json",
            [0, 2],
            7,
            True,
        )
        assert src.config == {**GROUP_CONFIG, "statistics.interval.ms": "0"}
        assert src.schema == SCHEMA
        rows, _ = read(src)
    np.testing.assert_array_equal(split_by_partition(rows)[2], expected[2])
    assert "KafkaSource(" in repr(src) and "format='json'" in repr(src)
    with pytest.raises(ValueError, match="unknown option"):
        open_kafka(f"kafka://{cluster.bootstrap}/{topic}?colour=red", schema=SCHEMA)
    with pytest.raises(SourceError, match="no.such.setting"):
        open_kafka(f"kafka://{cluster.bootstrap}/{topic}?no.such.setting=1", schema=SCHEMA)
    with open_source(
        f"kafka://{cluster.bootstrap}/{topic}?format=json&stop_at_end=yes",
        schema=SCHEMA,
        batch_size=11,
        config=GROUP_CONFIG,
    ) as src:
        assert isinstance(src, KafkaSource) and src.batch_size == 11
        assert read(src)[0].shape[0] == 3 * 30
    with pytest.raises(SettingsError, match="needs a schema"):  # a usage error: exit 2
        open_source(f"kafka://{cluster.bootstrap}/{topic}")
    with pytest.raises(ValueError, match="needs a schema"):
        open_kafka(f"kafka://{cluster.bootstrap}/{topic}")
