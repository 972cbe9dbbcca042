"""The batching loop of the message-log sources (Kafka, Redis Streams), written once.

A message log hands out pages of messages (one row each, or many for Arrow); the rows of
consecutive pages are gathered into :class:`~streammn.connectors.base.Batch`\\ es by
:class:`MessageLogSource`. Its subclasses supply only what differs per broker: how to read a
page, how a page moves the position (partition offsets, stream entry ids), when a replay has
read everything, and how to re-read after an interrupted iteration. For every subclass the loop
guarantees:

- exactly-once positions: the position only moves when a batch is yielded (or when every
  message read so far went to the dead-letter file), and then to just after the last message
  of the batch, which is also the batch's ``end``. Messages read but never yielded (an error,
  an iteration abandoned half way) are reported to the subclass, whose client then reads them
  again from the position: a stream resumed at a batch's ``end`` neither skips nor repeats
  a row. Batches yielded before an error stay valid;
- batch ends: a batch ends at a message boundary and holds ``batch_size`` rows (more when the
  last message overshoots), or fewer when ``max_wait`` seconds passed since its first row,
  the replay ended (``stop_at_end``) or :meth:`~MessageLogSource.stop` was called; a partial
  batch waits at most ``max_wait`` seconds, a read at most ``poll_timeout``;
- stop: :meth:`~MessageLogSource.stop` (e.g. from a signal handler) makes a running iteration
  yield its pending rows and end after the read under way; the next iteration continues from
  there;
- end of stream: with ``stop_at_end`` the iteration yields what is pending and ends once the
  subclass says the replay is read to its end; without it, it follows the log until stopped.

Pages are decoded in line, between reads. Decoding a page in a background thread while the
next one is read was measured and does not pay: on the mock cluster with JSON messages of 100
integer fields (2 CPUs), KafkaSource read at 0.91 of the raw consumer's rate decoding in line
and at 0.70 decoding ahead. The decoder (:mod:`streammn.connectors.flatjson`) takes a small share of
a page's time, and the thread's hand-off and its share of the GIL (joining the payloads) cost
the client more than the overlap saves.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import numpy as np

from streammn.connectors.base import Batch, Source
from streammn.connectors.messages import DeadLetterFile, MessageDecoder, check_log_settings
from streammn.schema import Schema


class MessageLogSource(Source):
    """Base class of the message-log sources: their shared settings and the batching loop.

    A subclass's ``__init__`` calls this one first (it checks and keeps the shared settings),
    then checks its own settings, then calls :meth:`_open_decoder`. It implements
    :meth:`position` and :meth:`seek` and these steps of the loop:

    - :meth:`_begin`: make the client read from the position (start of every iteration);
    - :meth:`_read`: one page of messages and the position after each stream they come from;
    - :meth:`_payload` and :meth:`_where`: a message's payload and its location;
    - :meth:`_advance`: move the yielded position over a page's positions;
    - :meth:`_read_to_end`: whether a replay (``stop_at_end``) has read everything;
    - :meth:`_abandon`: the iteration ended; re-read what it read but never yielded;

    and :meth:`close` (releasing its client, then calling this one) and :meth:`_repr_args`.
    Every log source reads through a consumer group, its attribute ``group``.
    """

    def __init__(
        self,
        batch_size: int,
        format: str,
        start: str,
        poll_timeout: float,
        max_wait: float,
        broker_timeout: float,
        stop_at_end: bool,
    ):
        """Check (:func:`~streammn.connectors.messages.check_log_settings`) and keep the
        settings."""
        check_log_settings(batch_size, format, start, poll_timeout, max_wait, broker_timeout)
        self.format = format
        self.batch_size = int(batch_size)
        self.poll_timeout, self.max_wait = float(poll_timeout), float(max_wait)
        self.broker_timeout = float(broker_timeout)
        self.stop_at_end = bool(stop_at_end)
        self.start = start
        self._rows = 0  # rows yielded by this source object
        self._stop = False

    def _open_decoder(self, schema: Schema, dead_letter) -> None:
        """Decode payloads into rows of ``schema``; open the ``dead_letter`` file (a path or
        ``None``: bad messages raise)."""
        self.schema = schema
        self.dead_letter = None if dead_letter is None else str(dead_letter)
        self._decoder = MessageDecoder(self.format, schema)
        self._dead = None if dead_letter is None else DeadLetterFile(dead_letter)

    # per broker ---------------------------------------------------------------------------
    def _begin(self) -> None:  # pragma: no cover - abstract
        """Prepare the client to read from the position (an iteration starts)."""
        raise NotImplementedError

    def _read(self, want: int, timeout: float) -> tuple[list, dict]:  # pragma: no cover
        """A page of messages, sized for the ``want`` rows the batch still needs, waiting at
        most ``timeout`` seconds; and the position after its last message of each partition
        or stream (``{}`` for an empty page)."""
        raise NotImplementedError

    def _payload(self, message) -> bytes | None:  # pragma: no cover - abstract
        """The bytes ``message`` carries (``None`` when it has none)."""
        raise NotImplementedError

    def _payloads(self, messages: list) -> list:
        """The payloads of a page of messages (a subclass may do it faster)."""
        return [self._payload(m) for m in messages]

    def _where(self, message) -> dict:  # pragma: no cover - abstract
        """Where ``message`` is in the log, for errors and dead letters."""
        raise NotImplementedError

    def _advance(self, positions: dict) -> None:  # pragma: no cover - abstract
        """Move the position (what :meth:`position` reports) over ``positions``."""
        raise NotImplementedError

    def _read_to_end(self, messages: list) -> bool:  # pragma: no cover - abstract
        """True when a replay is read to its end (``messages``: the page just read)."""
        raise NotImplementedError

    def _abandon(self, unyielded: bool) -> None:  # pragma: no cover - abstract
        """The iteration ended; ``unyielded``: it read messages past the position (an error,
        an iteration abandoned half way), which the next one must read again."""
        raise NotImplementedError

    # the loop -----------------------------------------------------------------------------
    @property
    def rewindable(self) -> bool:
        return self.stop_at_end

    def stop(self) -> None:
        """Make a running iteration yield its pending rows and end (e.g. from a signal
        handler); the next iteration continues from there."""
        self._stop = True

    def _batches(self) -> Iterator[Batch]:
        self._begin()
        self._stop = False
        pending: list[np.ndarray] = []
        pending_positions: dict[Any, Any] = {}
        pending_n = 0
        first_at = None
        unyielded = False  # messages read and not yet behind the position
        try:
            while True:
                timeout = self.poll_timeout
                if first_at is not None:
                    timeout = max(0.0, min(timeout, first_at + self.max_wait - time.monotonic()))
                messages, positions = self._read(self.batch_size - pending_n, timeout)
                if messages:
                    unyielded = True
                    rows = self._decode(messages, self._rows + pending_n)
                    pending_positions.update(positions)
                    if rows.shape[0]:
                        pending.append(rows)
                        pending_n += rows.shape[0]
                        if first_at is None:
                            first_at = time.monotonic()
                    elif pending_n == 0:  # only dead letters so far: nothing to wait for
                        self._advance(pending_positions)
                        pending_positions = {}
                        unyielded = False
                at_end = self.stop_at_end and self._read_to_end(messages)
                due = (
                    pending_n >= self.batch_size
                    or at_end
                    or self._stop
                    or (first_at is not None and time.monotonic() - first_at >= self.max_wait)
                )
                if due and pending_n:
                    batch = self._emit(pending, pending_n, pending_positions)
                    pending, pending_positions, pending_n, first_at = [], {}, 0, None
                    unyielded = False
                    yield batch
                if at_end or self._stop:
                    return
        finally:
            self._abandon(unyielded)

    def _decode(self, messages: list, row_offset: int) -> np.ndarray:
        """The rows of a page (``row_offset``: the absolute index of its first row)."""

        def where(i):
            return self._where(messages[i])

        return self._decoder.decode(self._payloads(messages), where, row_offset, self._dead)

    def _emit(self, pending: list, n: int, positions: dict) -> Batch:
        rows = pending[0] if len(pending) == 1 else np.ascontiguousarray(np.concatenate(pending))
        start = self._rows
        self._rows += n
        self._advance(positions)
        return Batch(rows, end=self.position(), start=start, schema=self.schema)

    # housekeeping -------------------------------------------------------------------------
    def close(self) -> None:
        """Close the dead-letter file (a subclass releases its client first)."""
        dead = getattr(self, "_dead", None)
        if dead is not None:
            dead.close()

    def _repr_args(self) -> tuple[list[str], list[str]]:  # pragma: no cover - abstract
        """For ``__repr__``: the arguments before ``group`` and the keyword arguments between
        ``schema`` and the shared settings."""
        raise NotImplementedError

    def __repr__(self) -> str:
        where, own = self._repr_args()
        parts = [
            *where,
            repr(self.group),
            f"schema={self.schema!r}",
            *own,
            f"batch_size={self.batch_size}",
            f"poll_timeout={self.poll_timeout:g}",
            f"max_wait={self.max_wait:g}",
            f"broker_timeout={self.broker_timeout:g}",
            f"stop_at_end={self.stop_at_end}",
            f"dead_letter={self.dead_letter!r}",
            f"start={self.start!r}",
        ]
        return f"{type(self).__name__}({', '.join(parts)})"
