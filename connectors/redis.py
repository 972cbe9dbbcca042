"""Redis Streams as a :class:`~streammn.connectors.base.Source` (extra ``redis``: redis-py).

The same delivery contract as :mod:`streammn.connectors.kafka`, mapped onto Redis Streams:

- entries are read with ``XREADGROUP`` as one consumer of a consumer group; each entry holds
  its payload in one field (``field``, default ``data``) as a CSV line, a JSON object or an
  Arrow IPC stream (:mod:`streammn.connectors.messages`);
- the position is ``{stream: id of the last entry delivered in a yielded batch}``;
- :meth:`RedisStreamSource.commit` ``XACK``\\ s every pending entry up to a position, and must be
  called only after the snapshot holding that position is durable. The group's acknowledged
  prefix is thus its committed offset: a restarted consumer starts right after the oldest entry
  still pending (delivered but never acknowledged), or after the group's last delivered entry
  when nothing is pending;
- :meth:`RedisStreamSource.seek` replays from an entry id by moving the group's cursor
  (``XGROUP SETID``); streams absent from a position start at the acknowledged prefix.

The group is the durable cursor of one learner: moving it on (re)start is what makes replay
work, so two learners must not share a group. A bad entry raises
:class:`~streammn.schema.SchemaError` naming stream and entry id, or goes to ``dead_letter``.
An unreachable server is retried with exponential backoff for ``broker_timeout`` seconds, then
:class:`~streammn.connectors.base.SourceUnavailable`; batches yielded before stay valid. Batches are
gathered by the loop of :class:`~streammn.connectors.logsource.MessageLogSource`.
"""

from __future__ import annotations

import time

from streammn.connectors.base import DEFAULT_BATCH_SIZE, SourceError, SourceUnavailable
from streammn.connectors.logsource import MessageLogSource
from streammn.connectors.loguri import LOG_OPTIONS, parse_log_uri, source_options
from streammn.schema import Schema
from streammn.errors import DataError, SettingsError

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as _e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "RedisStreamSource needs the 'redis' extra: pip install 'streammn[redis]'"
    ) from _e

_UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)
_MAX_BACKOFF = 1.0
_PENDING_PAGE = 1000
_MAX_SEQ = 2**64 - 1


def parse_id(entry_id) -> tuple[int, int]:
    """``"1700000000000-3"`` -> ``(1700000000000, 3)``; a :class:`ValueError` otherwise."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def id_before(entry_id: str) -> str:
    """The largest entry id smaller than ``entry_id`` (``0-0`` stays ``0-0``)."""
    ms, seq = parse_id(entry_id)
    if seq:
        return f"{ms}-{seq - 1}"
    return f"{ms - 1}-{_MAX_SEQ}" if ms else "0-0"


class RedisStreamSource(MessageLogSource):
    """Read one or more Redis streams through a consumer group into validated row batches.

    Parameters
    ----------
    address : str
        ``host:port`` of the Redis server.
    streams : str or list of str
        A stream key or a list of them.
    group : str
        Consumer group name, created on the streams when missing.
    schema : Schema
        The rows' variables (required).
    consumer : str, default 'streammn'
        Consumer name inside the group.
    format : {'csv', 'json', 'arrow'}, default 'csv'
        How an entry holds its rows.
    field : str, default 'data'
        Entry field holding the payload.
    db : int, default 0
        Database number.
    batch_size, poll_timeout, max_wait, broker_timeout, stop_at_end, dead_letter
        As for :class:`~streammn.connectors.kafka.KafkaSource` (``stop_at_end``: end when a read
        waited ``poll_timeout`` seconds and found no new entry). A batch ends at an entry boundary
        and may exceed ``batch_size`` by up to one entry per stream (``XREADGROUP``'s
        ``COUNT`` is per stream), or by the rows of an Arrow entry.
    start : {'earliest', 'latest'}, default 'earliest'
        Where a newly created group starts: the whole stream, or only entries added from now
        on.
    """

    def __init__(
        self,
        address: str,
        streams,
        group: str,
        *,
        schema: Schema,
        consumer: str = "streammn",
        format: str = "csv",
        field: str = "data",
        db: int = 0,
        batch_size: int = DEFAULT_BATCH_SIZE,
        poll_timeout: float = 0.2,
        max_wait: float = 1.0,
        broker_timeout: float = 30.0,
        stop_at_end: bool = False,
        dead_letter=None,
        start: str = "earliest",
    ):
        super().__init__(
            batch_size, format, start, poll_timeout, max_wait, broker_timeout, stop_at_end
        )
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise SettingsError(f"address must be host:port, got {address!r}")
        self.address = address
        self.streams = [streams] if isinstance(streams, str) else list(streams)
        if not self.streams or len(set(self.streams)) != len(self.streams):
            raise SettingsError(f"streams must be distinct stream keys, got {streams!r}")
        self.group, self.consumer = group, consumer
        self.field, self.db = field, int(db)
        self._open_decoder(schema, dead_letter)
        self._field = field.encode()
        self._client = redis.Redis(
            host=host,
            port=int(port),
            db=self.db,
            socket_connect_timeout=1.0,
            socket_timeout=self.poll_timeout + 5.0,
            retry=Retry(NoBackoff(), 0),
        )
        self._ids: dict[str, str] = {}  # last entry id per stream in a yielded batch
        self._prepared = False  # group cursors set for the next read
        self._call("connect", self._client.ping)

    # server calls with retry ----------------------------------------------------------------
    def _call(self, what: str, fn, *args, **kwargs):
        """``fn(*args)``, retrying connection failures with backoff up to broker_timeout."""
        deadline = None
        backoff = 0.05
        while True:
            try:
                return fn(*args, **kwargs)
            except _UNREACHABLE as e:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.broker_timeout
                if now >= deadline:
                    raise SourceUnavailable(
                        f"{self.describe()}: Redis server unreachable for "
                        f"{self.broker_timeout:g} s during {what} ({e}); batches up to position "
                        f"{self.position()} were delivered"
                    ) from None
                time.sleep(min(backoff, deadline - now))
                backoff = min(backoff * 2, _MAX_BACKOFF)
            except redis.ResponseError as e:
                if "NOGROUP" in str(e):  # the server lost its state: unavailable, not bad data
                    raise SourceUnavailable(
                        f"{self.describe()}: {what} failed: {e} (a Redis server restarted "
                        f"without persistence? the stream's entries may be gone too)"
                    ) from None
                raise SourceError(f"{self.describe()}: {what} failed: {e}") from None

    def _ensure_group(self, stream: str) -> None:
        try:
            self._call(
                "XGROUP CREATE",
                self._client.xgroup_create,
                stream,
                self.group,
                id="0" if self.start == "earliest" else "$",
                mkstream=True,
            )
        except SourceError as e:
            if "BUSYGROUP" not in str(e):
                raise

    def _acked_prefix(self, stream: str) -> str:
        """The id up to which the group has acknowledged everything it was delivered."""
        summary = self._call("XPENDING", self._client.xpending, stream, self.group)
        if summary["pending"]:
            return id_before(summary["min"].decode())
        groups = self._call("XINFO GROUPS", self._client.xinfo_groups, stream)
        for g in groups:
            if g["name"].decode() == self.group:
                return g["last-delivered-id"].decode()
        raise SourceUnavailable(
            f"{self.describe()}: group {self.group!r} vanished from "
            f"{stream!r} (a Redis server restarted without persistence?)"
        )

    def _prepare(self) -> None:
        """Point the group's cursor of every stream at where this source continues."""
        for s in self.streams:
            self._ensure_group(s)
            target = self._ids.get(s) or self._acked_prefix(s)
            self._call("XGROUP SETID", self._client.xgroup_setid, s, self.group, target)
        self._prepared = True

    # positions ----------------------------------------------------------------------------
    def position(self) -> dict:
        return dict(sorted(self._ids.items()))

    def seek(self, position) -> None:
        """Continue after ``{stream: entry id}`` (a previous :meth:`position`)."""
        try:
            ids = {str(s): str(i) for s, i in dict(position).items()}
            for i in ids.values():
                parse_id(i)
        except (TypeError, ValueError):
            raise DataError(
                f"not a Redis stream position (stream -> entry id): {position!r}"
            ) from None
        unknown = [s for s in ids if s not in self.streams]
        if unknown:
            raise DataError(
                f"position names streams {unknown} this source does not read ({self.streams})"
            )
        self._ids = ids
        self._prepared = False

    def initial_position(self) -> dict:
        return {s: "0-0" for s in self.streams}

    def commit(self, position) -> None:
        """``XACK`` every pending entry of the group up to ``position`` (call only once the
        snapshot holding ``position`` is durable)."""
        if self._dead is not None:
            self._dead.sync()
        for stream, last in dict(position).items():
            while True:
                page = self._call(
                    "XPENDING",
                    self._client.xpending_range,
                    stream,
                    self.group,
                    min="-",
                    max=str(last),
                    count=_PENDING_PAGE,
                )
                if not page:
                    break
                self._call(
                    "XACK", self._client.xack, stream, self.group, *[p["message_id"] for p in page]
                )
                if len(page) < _PENDING_PAGE:
                    break

    def pending(self) -> dict:
        """Entries delivered to the group but not acknowledged, per stream."""
        return {
            s: self._call("XPENDING", self._client.xpending, s, self.group)["pending"]
            for s in self.streams
        }

    # iteration: the per-broker steps of MessageLogSource's loop --------------------------
    def _begin(self) -> None:
        if not self._prepared:
            self._prepare()

    def _read(self, want: int, timeout: float) -> tuple[list, dict]:
        # COUNT is per stream: share what the batch still needs among the streams
        count = max(1, want // len(self.streams))
        reply = self._call(
            "XREADGROUP",
            self._client.xreadgroup,
            self.group,
            self.consumer,
            {s: ">" for s in self.streams},
            count=count,
            block=max(1, int(timeout * 1000)),  # at least 1 ms: 0 would block forever
        )
        entries = [
            (name.decode(), eid, fields) for name, chunk in reply or [] for eid, fields in chunk
        ]
        return entries, {name: eid.decode() for name, eid, _ in entries}

    def _read_to_end(self, messages: list) -> bool:
        return not messages  # a read waited poll_timeout and found no new entry

    def _advance(self, positions: dict) -> None:
        self._ids.update(positions)

    def _abandon(self, unyielded: bool) -> None:
        if unyielded:  # an error or an abandoned iteration: re-deliver from the position
            self._prepared = False

    def _payload(self, message) -> bytes | None:
        _, _, fields = message
        return fields.get(self._field) if fields else None

    def _where(self, message) -> dict:
        name, eid, _ = message
        return {"stream": name, "id": eid.decode()}

    # housekeeping -------------------------------------------------------------------------
    def close(self) -> None:
        self._client.close()
        super().close()

    def describe(self) -> str:
        return f"redis://{self.address}/{','.join(self.streams)}?group={self.group}"

    def _repr_args(self) -> tuple[list[str], list[str]]:
        own = [
            f"consumer={self.consumer!r}",
            f"format={self.format!r}",
            f"field={self.field!r}",
            f"db={self.db}",
        ]
        return [repr(self.address), repr(self.streams)], own


_REDIS_OPTIONS = {
    "group": str,
    "consumer": str,
    "format": str,
    "field": str,
    "db": int,
    **LOG_OPTIONS,
    "schema": "schema",
}


def open_redis(uri: str, schema: Schema | None = None, **options) -> RedisStreamSource:
    """Open ``redis://host:port/stream[,stream...]?group=...&format=csv`` as a
    :class:`RedisStreamSource`.

    Query options: ``group`` (default ``streammn``), ``consumer``, ``format``, ``field``,
    ``db``, ``batch_size``, ``poll_timeout``, ``max_wait``, ``broker_timeout``,
    ``stop_at_end``, ``dead_letter``, ``start``, ``schema`` (a schema file). Keyword
    ``options`` and ``schema`` override the URI's.
    """
    address, names, uri_options = parse_log_uri(uri, "redis", _REDIS_OPTIONS)
    group, kwargs = source_options(uri, uri_options, options, schema, "a Redis stream source")
    return RedisStreamSource(address, names.split(","), group, **kwargs)
