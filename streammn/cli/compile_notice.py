"""Tell a person at a terminal why a first run is slow: numba is compiling the kernels.

A fresh install compiles each numba kernel the first time a command needs it (about a minute
for ``streammn demo``), then loads it from numba's cache. Without a word, the first progress
line reads ``99 rows/s`` and looks like a slow tool. :class:`CompileNotice` listens to numba's
``numba:compile`` event, which fires only on a cache miss, and says so once when the first
kernel starts compiling, and at the end how long compiling took. Only on a terminal: the
lines are for a person waiting, not for logs or the tests that read a command's output.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

from numba.core import event
from numba.core.event import Listener


@contextmanager
def compile_notice(command: str, quiet: bool = False, stream=None):
    """Within the block, say on ``stream`` (stderr) when numba compiles (see the module
    docstring); nothing when ``quiet`` or ``stream`` is no terminal."""
    stream = sys.stderr if stream is None else stream
    if quiet or not stream.isatty():
        yield None
        return
    listener = CompileNotice(command, stream)
    event.register("numba:compile", listener)
    try:
        yield listener
    finally:
        event.unregister("numba:compile", listener)
        listener.summarise()


class CompileNotice(Listener):
    """Counts the kernels numba compiles (outermost compiles only: a kernel compiles the
    functions it calls inside its own event) and the time from the first start to the last
    end; prints the first start and, via :meth:`summarise`, the total."""

    def __init__(self, command: str, stream):
        self.command, self.stream = command, stream
        self.kernels = 0
        self.first_start: float | None = None
        self.last_end: float | None = None
        self._lock = threading.Lock()
        self._depth = threading.local()

    def on_start(self, event) -> None:
        depth = getattr(self._depth, "n", 0)
        self._depth.n = depth + 1
        if depth:
            return
        with self._lock:
            self.kernels += 1
            if self.first_start is None:
                self.first_start = time.monotonic()
                self._say(
                    "compiling its kernels on first use: this run is slower, later runs "
                    "load them from numba's cache"
                )

    def on_end(self, event) -> None:
        self._depth.n -= 1
        if self._depth.n == 0:
            with self._lock:
                self.last_end = time.monotonic()

    def summarise(self) -> None:
        """Say how many kernels compiled and over how long (nothing if none did)."""
        if self.kernels and self.last_end is not None:
            assert self.first_start is not None  # set as the first kernel started
            seconds = self.last_end - self.first_start
            self._say(f"compiled {self.kernels} kernels over {seconds:.0f} s (once)")

    def _say(self, text: str) -> None:
        print(f"streammn {self.command}: {text}", file=self.stream, flush=True)
