"""Kafka topics as a :class:`~streammn.connectors.base.Source` (extra ``kafka``: confluent-kafka).

Each message value is one row (a CSV line or a JSON object) or many rows (an Arrow IPC stream);
see :mod:`streammn.connectors.messages`. The source position is ``{"<partition>": next offset}``
over the partitions assigned so far, as JSON-friendly string keys.

Delivery contract with the engine:

- auto-commit is off. :meth:`KafkaSource.commit` commits a position to the consumer group and
  must be called only once the snapshot holding that position is durable; a restarted consumer
  in the same group then starts right after everything a durable snapshot covers.
- :meth:`KafkaSource.seek` restarts from a snapshot's position (more precise than the group's
  commits, which may lag by one snapshot). Partitions absent from a position start at the
  group's committed offset, or at ``start`` (earliest/latest) when none is committed. A
  position or commit whose offset retention has already deleted is a
  :class:`~streammn.connectors.base.SourceError`, never a silent jump over unlearned rows.
- a bad message raises :class:`~streammn.schema.SchemaError` naming topic/partition/offset
  before any of its batch is yielded; with ``dead_letter`` it is written there and skipped
  (its offset still advances, and the file is fsynced before any commit past it).
- broker unreachable: the source keeps probing with exponential backoff for
  ``broker_timeout`` seconds, then raises :class:`~streammn.connectors.base.SourceUnavailable`.
  Batches yielded before stay valid: the position only moves when a batch is yielded.

Without ``partitions`` the source subscribes to the topic with group management, so the group's
partitions are (re)balanced over its members on every (re)start; with ``partitions`` it assigns
them directly and uses the group only for committed offsets. A batch ends at a message
boundary: it holds ``batch_size`` rows (more when the last Arrow message overshoots), or fewer
when ``max_wait`` seconds passed since its first row, the replay ended (``stop_at_end``) or
:meth:`~KafkaSource.stop` was called: the batching loop of
:class:`~streammn.connectors.logsource.MessageLogSource`.
"""

from __future__ import annotations

import logging
import math
import time
from itertools import repeat
from operator import is_not
from typing import cast

import numpy as np

from streammn.connectors.base import DEFAULT_BATCH_SIZE, SourceError, SourceUnavailable
from streammn.connectors.logsource import MessageLogSource
from streammn.connectors.loguri import LOG_OPTIONS, parse_log_uri, source_options
from streammn.schema import Schema
from streammn.errors import DataError

try:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
except ImportError as _e:  # pragma: no cover - exercised only without the extra
    raise ImportError("KafkaSource needs the 'kafka' extra: pip install 'streammn[kafka]'") from _e

log = logging.getLogger(__name__)

MAX_MESSAGES_PER_POLL = 10000
#: librdkafka's ``fetch.queue.backoff.ms`` (its default is 1000); see ``_client_config``
FETCH_QUEUE_BACKOFF_MS = 10
#: librdkafka error codes that mean "cannot reach the cluster right now" (retried)
_UNREACHABLE = {
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TRANSPORT,
    KafkaError._RESOLVE,
    KafkaError._TIMED_OUT,
}
_MAX_BACKOFF = 2.0


class KafkaSource(MessageLogSource):
    """Read a Kafka topic into validated row batches.

    Parameters
    ----------
    bootstrap : str
        ``host:port[,host:port...]`` of the cluster.
    topic : str
        The topic to read.
    group : str
        Consumer group id; the durable cursor of this learner (one learner per group).
    schema : Schema
        The rows' variables (required: a log has no header).
    partitions : list of int or None, default None
        Partition numbers to read; ``None``: all, with group rebalancing.
    format : {'csv', 'json', 'arrow'}, default 'csv'
        How a message holds its rows; see :mod:`streammn.connectors.messages`.
    batch_size : int, default 65536
        Rows per batch.
    poll_timeout : float, default 0.2
        Seconds one poll of the client blocks: the reaction time to :meth:`stop` and to broker
        trouble.
    max_wait : float, default 1.0
        Seconds a partial batch may wait for more rows before it is yielded.
    broker_timeout : float, default 30.0
        Seconds to keep retrying an unreachable cluster before
        :class:`~streammn.connectors.base.SourceUnavailable`.
    stop_at_end : bool, default False
        End the iteration once every assigned partition is read up to the end it had when the
        iteration started (its high watermark then): a finite replay, instead of following the
        topic forever.
    dead_letter : path or None, default None
        A JSON-lines file for bad messages; ``None``: raise.
    start : {'earliest', 'latest'}, default 'earliest'
        Where partitions without a committed offset start.
    config : dict or None, default None
        Extra librdkafka settings (security, timeouts, ``group.instance.id``...).
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        *,
        schema: Schema,
        partitions=None,
        format: str = "csv",
        batch_size: int = DEFAULT_BATCH_SIZE,
        poll_timeout: float = 0.2,
        max_wait: float = 1.0,
        broker_timeout: float = 30.0,
        stop_at_end: bool = False,
        dead_letter=None,
        start: str = "earliest",
        config: dict | None = None,
    ):
        super().__init__(
            batch_size, format, start, poll_timeout, max_wait, broker_timeout, stop_at_end
        )
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.partitions = None if partitions is None else sorted({int(p) for p in partitions})
        self.config = dict(config or {})
        self._open_decoder(schema, dead_letter)

        self._offsets: dict[int, int] = {}  # next offset per partition after the last batch
        self._fetched: dict[int, int] = {}  # next offset per partition the client returns
        self._assigned: set[int] = set()
        self._ends: dict[int, int] = {}  # end of each partition when a replay started
        self._replayed = False  # an iteration ran since the ends were taken
        # rows per message, to size polls: one row for CSV/JSON; Arrow starts with one message
        self._rows_per_message = float(self.batch_size if format == "arrow" else 1)
        self._needs_rewind = False
        self._down_since: float | None = None
        self._down_error: str | None = None
        self._fatal: str | None = None
        self._consumer = None
        try:
            self._consumer = Consumer(self._client_config())
        except KafkaException as e:
            self.close()
            raise SourceError(
                f"{self.describe()}: cannot create a consumer ({e.args[0].str()})"
            ) from None
        self.topic_partitions = self._wait_for_topic()
        missing = [p for p in (self.partitions or []) if p not in self.topic_partitions]
        if missing:
            self.close()
            raise SourceError(
                f"{self.describe()}: topic has partitions {self.topic_partitions}, not {missing}"
            )
        if self.partitions is None:
            self._consumer.subscribe(
                [topic],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_revoke,
            )
        else:
            self._assign(self.partitions)

    # client plumbing ----------------------------------------------------------------------
    def _client_config(self) -> dict:
        conf = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": "streammn",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # every start offset is explicit (see _start_offsets); one the broker no longer
            # has must not be replaced silently: see _on_offset_reset
            "auto.offset.reset": "error",
            "reconnect.backoff.max.ms": 1000,
            # librdkafka stops fetching for this long whenever its queue of prefetched
            # messages is full (64 MB by default): at its default of 1 s, a replay of a
            # backlog idles most of the time once the learner reads faster than that
            "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
            "error_cb": self._on_error,
            "logger": log,
        }
        conf.update(self.config)
        return conf

    def _on_error(self, err) -> None:
        if err.fatal():
            self._fatal = err.str()
        elif err.code() in _UNREACHABLE:
            if self._down_since is None:
                self._down_since = time.monotonic()
            self._down_error = err.str()
        else:
            log.warning("%s: %s", self.describe(), err.str())

    def _wait_for_topic(self) -> list[int]:
        """Partition numbers of the topic, retrying an unreachable cluster."""
        deadline = time.monotonic() + self.broker_timeout
        backoff = 0.1
        assert self._consumer is not None  # open
        while True:
            try:
                md = self._consumer.list_topics(
                    self.topic,
                    timeout=min(max(backoff, 1.0), max(deadline - time.monotonic(), 0.01)),
                )
            except KafkaException as e:
                err = e.args[0]
                if err.code() not in _UNREACHABLE or time.monotonic() >= deadline:
                    self.close()
                    raise SourceUnavailable(
                        f"{self.describe()}: cannot reach the Kafka "
                        f"cluster within {self.broker_timeout:g} s "
                        f"({err.str()})"
                    ) from None
                time.sleep(min(backoff, max(deadline - time.monotonic(), 0)))
                backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
            t = md.topics.get(self.topic)
            if t is None or t.error is not None:
                self.close()
                why = t.error.str() if t is not None and t.error is not None else "not listed"
                raise SourceUnavailable(
                    f"{self.describe()}: topic {self.topic!r} is not available ({why})"
                )
            return sorted(t.partitions)

    def _start_offsets(self, partitions) -> list:
        """Explicit start offsets for ``partitions``: where the client already is, else the
        yielded position, else the group's committed offset, else the first (``start`` =
        earliest) or next (latest) offset of the partition. Resolving them here, rather than
        leaving logical offsets to the client, gives every partition a known position from
        the start, so replays know where they end and commits never skip unread rows."""
        todo = [p for p in partitions if p not in self._fetched and p not in self._offsets]
        if todo:
            assert self._consumer is not None  # open
            try:
                committed = self._consumer.committed(
                    [TopicPartition(self.topic, p) for p in todo], timeout=self.broker_timeout
                )
            except KafkaException as e:
                raise SourceUnavailable(
                    f"{self.describe()}: cannot read the group's "
                    f"committed offsets ({e.args[0].str()})"
                ) from None
            for tp in committed:
                if tp.offset >= 0:
                    self._offsets[tp.partition] = tp.offset
                else:
                    low, high = self._watermarks(tp.partition)
                    self._offsets[tp.partition] = low if self.start == "earliest" else high
                    self._ends.setdefault(tp.partition, high)
        out = []
        for p in partitions:
            self._fetched.setdefault(p, self._offsets[p])
            if self.stop_at_end and p not in self._ends:
                self._ends[p] = self._watermarks(p)[1]
            out.append(TopicPartition(self.topic, p, self._fetched[p]))
        return out

    def _watermarks(self, p: int) -> tuple[int, int]:
        assert self._consumer is not None  # open
        try:
            return self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, p), timeout=self.broker_timeout
            )
        except KafkaException as e:
            raise SourceUnavailable(
                f"{self.describe()}: cannot read the offsets of partition {p} ({e.args[0].str()})"
            ) from None

    def _on_offset_reset(self, p: int, offset, err) -> None:
        """The broker has no data at the offset partition ``p`` was to start from.

        Rows there were deleted by retention before they were learned, or the position lies
        beyond the log (not from this topic): an error, because carrying on elsewhere would
        skip rows without anyone noticing. A late event about an offset the client has
        already left behind (after a seek) is ignored.
        """
        if offset is not None and offset >= 0 and offset != self._fetched.get(p):
            return
        low, high = self._watermarks(p)
        raise SourceError(
            f"{self.describe()}: partition {p} has offsets {low}..{high} but reading was to "
            f"continue at {offset} ({err.str()}); either retention deleted rows before they "
            f"were learned or the position is not from this topic. Seek to a retained "
            f"position, or use a new group to accept the gap"
        )

    def _assign(self, partitions) -> None:
        assert self._consumer is not None  # open
        self._consumer.assign(self._start_offsets(partitions))
        self._assigned = set(partitions)

    def _on_assign(self, consumer, parts) -> None:
        consumer.assign(self._start_offsets([tp.partition for tp in parts]))
        self._assigned = {tp.partition for tp in parts}

    def _on_revoke(self, consumer, parts) -> None:
        consumer.unassign()
        self._assigned -= {tp.partition for tp in parts}

    # positions ----------------------------------------------------------------------------
    def position(self) -> dict:
        return {str(p): o for p, o in sorted(self._offsets.items())}

    def seek(self, position) -> None:
        """Continue from ``{partition: next offset}`` (a previous :meth:`position`)."""
        try:
            offsets = {int(p): int(o) for p, o in dict(position).items()}
        except (TypeError, ValueError):
            raise DataError(f"not a Kafka position (partition -> offset): {position!r}") from None
        bad = [p for p, o in offsets.items() if p not in self.topic_partitions or o < 0]
        if bad:
            raise DataError(
                f"position {position!r} names partitions or offsets not in topic "
                f"{self.topic!r} (partitions {self.topic_partitions})"
            )
        self._offsets = offsets
        self._rewind_client()

    def _rewind_client(self) -> None:
        """Make the client fetch from the yielded position again (after seek or an error)."""
        self._fetched = {}
        if self._assigned:
            self._assign(sorted(self._assigned))

    def initial_position(self) -> dict:
        """The earliest retained offset of every partition this source reads."""
        parts = self.partitions if self.partitions is not None else self.topic_partitions
        return {str(p): self._watermarks(p)[0] for p in parts}

    def commit(self, position) -> None:
        """Commit ``position`` to the consumer group. Call it only after the snapshot that
        covers ``position`` is durable. In subscribe mode only the partitions this member
        currently owns are committed (the others belong to another member now)."""
        if self._consumer is None:
            raise SourceError(f"{self.describe()}: cannot commit, the source is closed")
        offsets = {int(p): int(o) for p, o in dict(position).items()}
        if self.partitions is None:
            offsets = {p: o for p, o in offsets.items() if p in self._assigned}
        if not offsets:
            return
        if self._dead is not None:
            self._dead.sync()
        tps = [TopicPartition(self.topic, p, o) for p, o in sorted(offsets.items())]
        deadline = time.monotonic() + self.broker_timeout
        backoff = 0.1
        while True:
            try:
                result = self._consumer.commit(offsets=tps, asynchronous=False)
            except KafkaException as e:
                err = e.args[0]
                if (
                    not (err.retriable() or err.code() in _UNREACHABLE)
                    or time.monotonic() >= deadline
                ):
                    cls = SourceUnavailable if err.code() in _UNREACHABLE else SourceError
                    raise cls(
                        f"{self.describe()}: cannot commit offsets {self.position()} ({err.str()})"
                    ) from None
                time.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
            failed = [tp for tp in result or [] if tp.error is not None]
            if failed:
                error = failed[0].error
                assert error is not None  # what failed holds
                raise SourceError(
                    f"{self.describe()}: commit failed for partition "
                    f"{failed[0].partition} ({error.str()})"
                )
            return

    def committed(self) -> dict:
        """The group's committed offsets ``{partition: offset}`` (partitions with one)."""
        if self._consumer is None:
            raise SourceError(
                f"{self.describe()}: cannot read the committed offsets, the source is closed"
            )
        parts = self.partitions if self.partitions is not None else self.topic_partitions
        tps = self._consumer.committed(
            [TopicPartition(self.topic, p) for p in parts], timeout=self.broker_timeout
        )
        return {str(tp.partition): tp.offset for tp in tps if tp.offset >= 0}

    # iteration: the per-broker steps of MessageLogSource's loop --------------------------
    def _begin(self) -> None:
        if self._needs_rewind:  # a previous iteration ended holding rows it never yielded
            self._rewind_client()
            self._needs_rewind = False
        if self.stop_at_end and self._replayed:  # a new replay reads what partitions hold now
            self._ends = {p: self._watermarks(p)[1] for p in self._assigned}
        self._replayed = True

    def _read(self, want: int, timeout: float) -> tuple[list, dict]:
        n = max(1, min(MAX_MESSAGES_PER_POLL, math.ceil(max(want, 1) / self._rows_per_message)))
        if self.stop_at_end and self._assigned:  # don't wait for more than is left
            n = max(
                1,
                min(n, sum(max(0, self._ends[p] - self._fetched[p]) for p in self._assigned)),
            )
        return self._poll(n, timeout)

    def _read_to_end(self, messages: list) -> bool:
        return bool(self._assigned) and all(
            self._fetched[p] >= self._ends[p] for p in self._assigned
        )

    def _advance(self, positions: dict) -> None:
        self._offsets.update(positions)

    def _abandon(self, unyielded: bool) -> None:
        # the client read past what was yielded (an error, an abandoned iteration); its own
        # offsets know, even of a poll that failed half way
        if any(self._offsets.get(p) != o for p, o in self._fetched.items()):
            self._needs_rewind = True

    def _poll(self, n: int, timeout: float) -> tuple[list, dict]:
        """Up to ``n`` data messages and the next offset of each partition they come from;
        tracks cluster reachability."""
        assert self._consumer is not None  # open
        try:
            msgs = self._consumer.consume(n, timeout)
        except KafkaException as e:
            raise SourceError(f"{self.describe()}: {e.args[0].str()}") from None
        # per message work in C (map over the methods): a poll holds up to 10000 messages
        failed = any(map(is_not, map(Message.error, msgs), repeat(None)))
        data = [m for m in msgs if m.error() is None] if failed else msgs
        # the last message of each partition wins: the next offsets after this poll
        # a data message has its partition and offset (None only in some errors)
        nexts = cast(
            "dict[int, int]", dict(zip(map(Message.partition, data), map(Message.offset, data)))
        )
        nexts = {p: o + 1 for p, o in nexts.items()}
        self._fetched.update(nexts)
        resets = []
        for m in msgs if failed else ():
            err = m.error()
            if err is None:
                continue
            if err.code() == KafkaError._AUTO_OFFSET_RESET:
                resets.append((cast(int, m.partition()), m.offset(), err))
            elif err.code() in _UNREACHABLE:
                self._on_error(err)
            else:
                raise SourceError(f"{self.describe()}: partition {m.partition()}: {err.str()}")
        for p, offset, err in resets:  # after the messages above are in _fetched
            self._on_offset_reset(p, offset, err)
        if self._fatal is not None:
            raise SourceError(f"{self.describe()}: fatal client error: {self._fatal}")
        if data or (msgs and self._down_since is not None):
            self._down_since = None
        elif self._down_since is not None:
            self._probe()
        return data, nexts

    def _probe(self) -> None:
        """While the cluster seems down: check it with backoff; give up after broker_timeout."""
        backoff = 0.1
        while self._down_since is not None:
            if time.monotonic() - self._down_since >= self.broker_timeout:
                raise SourceUnavailable(
                    f"{self.describe()}: Kafka cluster unreachable for "
                    f"{self.broker_timeout:g} s ({self._down_error}); batches up to position "
                    f"{self.position()} were delivered"
                )
            assert self._consumer is not None  # open
            try:
                self._consumer.list_topics(self.topic, timeout=backoff)
            except KafkaException:
                backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
            self._down_since = None

    def _payload(self, message) -> bytes | None:
        return message.value()

    def _payloads(self, messages: list) -> list:
        return list(map(Message.value, messages))

    def _where(self, message) -> dict:
        return {"topic": self.topic, "partition": message.partition(), "offset": message.offset()}

    def _decode(self, data: list, row_offset: int) -> np.ndarray:
        rows = super()._decode(data, row_offset)
        self._rows_per_message = max(1.0, rows.shape[0] / len(data))
        return rows

    # housekeeping -------------------------------------------------------------------------
    def close(self) -> None:
        """Leave the group (so a restarted consumer gets the partitions at once) and close the
        dead-letter file. Offsets are not committed here: that is the engine's call."""
        if self._consumer is not None:
            try:
                self._consumer.close()
            except (KafkaException, RuntimeError):
                pass  # already closed or the cluster is gone: nothing left to release
            self._consumer = None
        super().close()

    def describe(self) -> str:
        return f"kafka://{self.bootstrap}/{self.topic}?group={self.group}"

    def _repr_args(self) -> tuple[list[str], list[str]]:
        own = [f"partitions={self.partitions!r}", f"format={self.format!r}"]
        return [repr(self.bootstrap), repr(self.topic)], own


_KAFKA_OPTIONS = {
    "group": str,
    "format": str,
    **LOG_OPTIONS,
    "partitions": "ints",
    "schema": "schema",
}


def open_kafka(uri: str, schema: Schema | None = None, **options) -> KafkaSource:
    """Open ``kafka://host:port[,host:port]/topic?group=...&format=csv&partitions=0,1`` as a
    :class:`KafkaSource`.

    Query options: ``group`` (default ``streammn``), ``format``, ``partitions``,
    ``batch_size``, ``poll_timeout``, ``max_wait``, ``broker_timeout``, ``stop_at_end``,
    ``dead_letter``, ``start``, ``schema`` (a schema file); dotted keys are librdkafka
    settings (``session.timeout.ms=10000``, ``group.instance.id=learner-1``). Keyword
    ``options`` and ``schema`` override the URI's.
    """
    bootstrap, topic, uri_options = parse_log_uri(
        uri, "kafka", _KAFKA_OPTIONS, client_settings=True
    )
    if "config" in options and "config" in uri_options:
        options = dict(options, config={**uri_options["config"], **options["config"]})
    group, kwargs = source_options(uri, uri_options, options, schema, "a Kafka source")
    return KafkaSource(bootstrap, topic, group, **kwargs)
