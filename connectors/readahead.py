"""Parse the next blocks of a file on a thread while the caller encodes the last one.

pyarrow's streaming CSV reader parses a block only when asked for it, on the asking thread, so
reading and encoding took turns on one core: on a CSV of named columns each cost about as much
as the other. :class:`ReadAhead` asks for the next ``depth`` record batches on a thread of its
own (pyarrow releases the GIL while it parses, and the encoding kernels release it too), so on
two cores the two overlap. Batches, the end and errors reach the caller in the reader's order.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

POLL_SECONDS = 0.05  # how often a thread blocked on a full queue checks for close()


class ReadAhead:
    """``reader`` (anything with ``read_next_batch``/``close``, such as pyarrow's
    ``CSVStreamingReader``) read ``depth`` batches ahead on a thread; the same two methods."""

    def __init__(self, reader, depth: int = 2, name: str = "streammn-read-ahead"):
        self._reader = reader
        self._queue: queue.Queue = queue.Queue(depth)
        self._closing = threading.Event()
        self._last = None  # the end or the error, once the caller has met it
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closing.is_set():
            try:
                item: tuple[Any, BaseException | None] = (self._reader.read_next_batch(), None)
            except BaseException as e:  # StopIteration too: handed to the caller in order
                item = (None, e)
            while not self._closing.is_set():
                try:
                    self._queue.put(item, timeout=POLL_SECONDS)
                    break
                except queue.Full:
                    continue
            if item[1] is not None:
                return

    def read_next_batch(self):
        """The next record batch; ``StopIteration`` at the end, or the reader's error."""
        if self._last is None:
            batch, error = self._queue.get()
            if error is None:
                return batch
            self._last = error
        raise self._last

    def close(self) -> None:
        """Stop reading ahead (waits for a block being parsed), then close the reader."""
        self._closing.set()
        self._thread.join()
        self._reader.close()
