"""RedisStreamSource against a real ``redis-server`` started on a free loopback port.

Three streams play the role of Kafka's partitions: stream ``s<p>`` holds the rows whose
``part`` column is ``p`` (tests/helpers/logrows.py), so order and replay points are checked per
stream.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import numpy as np
import pytest

pytest.importorskip("redis", reason="the 'redis' extra (redis-py) is not installed")

from streammn.connectors.base import SourceUnavailable  # noqa: E402
from streammn.connectors.redis import RedisStreamSource, id_before, open_redis, parse_id  # noqa: E402
from streammn.connectors.resolve import open_source  # noqa: E402
from helpers.logrows import (
    N_PARTS,
    SCHEMA,
    encode,
    make_rows,
    read,  # noqa: E402
    split_by_partition,
)
from helpers.redisserver import REDIS_SERVER, RedisServer, free_port  # noqa: E402
from streammn.schema import SchemaError  # noqa: E402

pytestmark = pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server is not installed (Debian package redis-server)"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = RedisServer(tmp_path_factory.mktemp("redis"))
    yield srv
    srv.stop()


def new_streams(server, rows_by_part, format="csv", rows_per_message=1, extra=None):
    """Streams ``<prefix>-s<p>`` filled with each partition's rows; ``extra`` maps
    (partition, index) to a raw payload inserted at that index."""
    prefix = uuid.uuid4().hex[:8]
    names = [f"{prefix}-s{p}" for p in range(N_PARTS)]
    pipe = server.client.pipeline()
    for p, rows in enumerate(rows_by_part):
        payloads = encode(rows, format, rows_per_message)
        for (q, i), raw in sorted((extra or {}).items()):
            if q == p:
                payloads.insert(i, raw)
        for v in payloads:
            pipe.xadd(names[p], {"data": v})
    pipe.execute()
    return names


def source(server, streams, group=None, **kw):
    kw.setdefault("stop_at_end", True)
    kw.setdefault("poll_timeout", 0.1)
    return RedisStreamSource(
        server.address, streams, group or f"g-{uuid.uuid4().hex[:8]}", schema=SCHEMA, **kw
    )


def stream_ids(server, name) -> list[str]:
    return [eid.decode() for eid, _ in server.client.xrange(name)]


def test_entry_ids():
    assert parse_id("1700000000000-3") == (1700000000000, 3)
    assert id_before("5-3") == "5-2" and id_before("5-0") == f"4-{2**64 - 1}"
    assert id_before("0-0") == "0-0"


@pytest.mark.parametrize("format,rows_per_message", [("csv", 1), ("json", 1), ("arrow", 40)])
def test_exact_rows_in_order_per_stream(server, format, rows_per_message):
    expected = make_rows(300, seed=11)
    names = new_streams(server, expected, format, rows_per_message)
    with source(server, names, format=format, batch_size=128) as src:
        rows, batches = read(src)
        assert src.position() == {n: stream_ids(server, n)[-1] for n in names}
    for p, got in enumerate(split_by_partition(rows)):
        np.testing.assert_array_equal(got, expected[p])
    assert [b.start for b in batches] == list(np.cumsum([0] + [len(b) for b in batches[:-1]]))
    if format != "arrow":  # at most one entry per stream beyond batch_size
        assert max(len(b) for b in batches) <= 128 + N_PARTS - 1


def test_seek_replays_after_an_entry_id(server):
    expected = make_rows(200, seed=12)
    names = new_streams(server, expected)
    with source(server, names, batch_size=90) as src:
        batches = list(src)
    middle = batches[len(batches) // 2].end
    with source(server, names, batch_size=90) as replay:
        replay.seek(middle)
        rows, _ = read(replay)
        replay.rewind()  # back to the start of every stream
        again, _ = read(replay)
    for p, got in enumerate(split_by_partition(rows)):
        ids = stream_ids(server, names[p])
        done = ids.index(middle[names[p]]) + 1 if names[p] in middle else 0
        np.testing.assert_array_equal(got, expected[p][done:])
    for p, got in enumerate(split_by_partition(again)):
        np.testing.assert_array_equal(got, expected[p])


def test_commit_acks_and_a_restarted_consumer_starts_after_the_acked_prefix(server):
    expected = make_rows(150, seed=13)
    names = new_streams(server, expected)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with source(server, names, group, batch_size=100) as first:
        batches = list(first)
        committed = batches[1].end
        first.commit(committed)
        # everything delivered beyond the committed position stays pending (unacknowledged)
        pending = first.pending()
    for p, name in enumerate(names):
        ids = stream_ids(server, name)
        done = ids.index(committed[name]) + 1 if name in committed else 0
        assert pending[name] == len(ids) - done
    # the restart re-delivers exactly the unacknowledged entries, in order
    with source(server, names, group, batch_size=100, consumer="other") as second:
        rows, _ = read(second)
        second.commit(second.position())
        assert second.pending() == {n: 0 for n in names}
    for p, got in enumerate(split_by_partition(rows)):
        ids = stream_ids(server, names[p])
        done = ids.index(committed[names[p]]) + 1 if names[p] in committed else 0
        np.testing.assert_array_equal(got, expected[p][done:])
    with source(server, names, group) as third:  # all acknowledged: nothing left
        assert read(third)[0].shape[0] == 0


@pytest.mark.parametrize("format", ["csv", "json", "arrow"])
def test_bad_entry_names_stream_and_id(server, format):
    rows = make_rows(40, seed=14)
    bad_row = rows[2][0].copy()
    bad_row[1] = 9  # out of range for a binary variable
    names = new_streams(
        server, rows, format, 10, extra={(2, 2): encode(bad_row[None, :], format, 10)[0]}
    )
    bad_id = stream_ids(server, names[2])[2]
    with source(server, names, format=format, batch_size=1000) as src:
        with pytest.raises(SchemaError) as info:
            list(src)
        assert src.position() == {}
        with pytest.raises(SchemaError) as again:  # never skipped: the next try fails alike
            list(src)
        # same message, same reason (its row index depends on how partitions interleave)
        assert (again.value.source, again.value.reason) == (info.value.source, info.value.reason)
    assert f"stream '{names[2]}' id '{bad_id}'" in str(info.value)
    assert info.value.column == 1


def test_dead_letter_file_and_missing_field(server, tmp_path):
    rows = make_rows(60, seed=15)
    names = new_streams(server, rows, extra={(0, 7): b"1,2", (1, 0): b"not,a,row"})
    server.client.xadd(names[2], {"other": b"0"})  # no 'data' field at all
    path = tmp_path / "dead.jsonl"
    with source(server, names, batch_size=50, dead_letter=path) as src:
        got, _ = read(src)
        assert src.position() == {n: stream_ids(server, n)[-1] for n in names}
    for p, part in enumerate(split_by_partition(got)):
        np.testing.assert_array_equal(part, rows[p])
    letters = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted((d["stream"], d["id"]) for d in letters) == sorted(
        [
            (names[0], stream_ids(server, names[0])[7]),
            (names[1], stream_ids(server, names[1])[0]),
            (names[2], stream_ids(server, names[2])[-1]),
        ]
    )
    missing = next(d for d in letters if d["stream"] == names[2])
    assert missing["value"] is None and missing["error"] == "empty message"


def test_partial_batch_after_max_wait_and_stop(server):
    expected = make_rows(30, seed=16)
    names = new_streams(server, expected)
    with source(server, names, batch_size=10_000, stop_at_end=False, max_wait=0.3) as src:
        it = iter(src)
        rows = next(it).rows
        while rows.shape[0] < 90:
            rows = np.concatenate([rows, next(it).rows])
        timer = threading.Timer(0.3, src.stop)
        timer.start()
        assert list(it) == []
        timer.join()
    for p, got in enumerate(split_by_partition(rows)):
        np.testing.assert_array_equal(got, expected[p])


@pytest.mark.slow
def test_server_gone_retries_then_source_unavailable(tmp_path):
    srv = RedisServer(tmp_path)
    try:
        expected = make_rows(100, seed=17)
        names = new_streams(srv, expected)
        src = source(srv, names, batch_size=40, stop_at_end=False, broker_timeout=1.0)
        it = iter(src)
        delivered = [next(it) for _ in range(3)]
    finally:
        srv.stop()
    started = time.monotonic()
    with pytest.raises(SourceUnavailable, match="unreachable for 1 s") as info:
        for batch in it:
            delivered.append(batch)
    assert 1.0 <= time.monotonic() - started < 30
    rows = np.concatenate([b.rows for b in delivered])
    for p, got in enumerate(split_by_partition(rows)):
        np.testing.assert_array_equal(got, expected[p][: got.shape[0]])
    assert src.position() == delivered[-1].end and str(src.position()) in str(info.value)
    src.close()
    with pytest.raises(SourceUnavailable, match="unreachable"):
        RedisStreamSource(f"127.0.0.1:{free_port()}", "s", "g", schema=SCHEMA, broker_timeout=0.5)


@pytest.mark.slow
def test_server_restart_within_broker_timeout_loses_and_repeats_nothing(tmp_path):
    """A persistent server goes away and comes back on the same port: the source retries,
    then continues with the group's state as the server kept it."""
    srv = RedisServer(tmp_path, persistent=True)
    expected = make_rows(120, seed=19)
    names = new_streams(srv, expected)
    src = source(srv, names, batch_size=40, stop_at_end=False, max_wait=0.2, broker_timeout=30)
    it = iter(src)
    rows = [next(it).rows for _ in range(2)]
    srv.stop()
    restarted = []
    timer = threading.Timer(
        1.0, lambda: restarted.append(RedisServer(tmp_path, port=srv.port, persistent=True))
    )
    timer.start()
    try:
        while sum(r.shape[0] for r in rows) < 3 * 120:
            rows.append(next(it).rows)
        timer.join()
        assert restarted  # the rows after the outage came from the restarted server
        src.stop()
        assert list(it) == []
    finally:
        timer.join()
        src.close()
        for r in restarted:
            r.stop()
    for p, got in enumerate(split_by_partition(np.concatenate(rows))):
        np.testing.assert_array_equal(got, expected[p])


def test_open_redis_uri(server, tmp_path):
    expected = make_rows(20, seed=18)
    names = new_streams(server, expected, "json")
    schema_file = tmp_path / "rows.schema"
    schema_file.write_text(SCHEMA.to_json())
    uri = (
        f"redis://{server.address}/{names[0]},{names[1]}?group=u&format=json"
        f"&consumer=c1&batch_size=7&stop_at_end=1&schema={schema_file}"
    )
    with open_redis(uri) as src:
        assert (src.streams, src.group, src.consumer, src.batch_size) == (names[:2], "u", "c1", 7)
        rows, _ = read(src)
    parts = split_by_partition(rows)
    np.testing.assert_array_equal(parts[0], expected[0])
    np.testing.assert_array_equal(parts[1], expected[1])
    assert parts[2].shape[0] == 0
    assert "RedisStreamSource(" in repr(src)
    with pytest.raises(ValueError, match="unknown option"):
        open_redis(f"redis://{server.address}/x?partitions=1", schema=SCHEMA)
    with open_source(
        f"redis://{server.address}/{names[2]}?format=json&stop_at_end=1"
        f"&batch_size=5&poll_timeout=0.1",
        schema=SCHEMA,
        batch_size=100,
    ) as src:
        assert isinstance(src, RedisStreamSource) and src.batch_size == 5  # URI wins
        np.testing.assert_array_equal(read(src)[0], expected[2])
