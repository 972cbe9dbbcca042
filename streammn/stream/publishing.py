"""Publishing snapshots off the learning thread: a forked child writes from a frozen image.

A snapshot must hold the learner exactly as it was after a given row (a consistent cut), yet
the learner should keep learning while the snapshot is converted (DTSL -> DN -> DN2MN) and
written (model files, checkpoint, fsync). :class:`Publisher` does this the way Redis' BGSAVE
does: at the cut the learning process ``fork()``\\ s, the child runs the publishing work on its
copy-on-write image of the whole process (learner, statistics, counters: nothing is serialised
or copied up front) and exits, while the parent goes on learning. The learning thread pays for
the ``fork()`` only (page tables, milliseconds for hundreds of MB); the pages the parent changes
afterwards are copied by the kernel, one at a time, while the child lives.

Why not the alternatives: a writer *thread* shares the GIL with the learner, and conversion and
file formatting are mostly Python, so the learner would stall for most of the snapshot anyway;
an immutable copy handed to a spawned writer process costs a full serialisation and transfer of
the state on the learning thread, and a process start. The fork needs care:

- only the forking thread exists in the child, so the child must not use what other threads
  (a Kafka client's, numba's OpenMP pool) were running: the publishing work converts and writes
  files only. numba's OpenMP layer aborts a child that starts a ``parallel=True`` kernel, so
  nothing on the publishing path may call one (the DN2MN conversion and the pseudo-likelihood
  kernels of the weights' refinement run serial variants there, see
  :mod:`streammn.kernel_mode`; the model formats are serial); a child that dies anyway is
  reported as a failed snapshot, never silently;
- the child ignores SIGINT (Ctrl-C reaches the whole process group; the parent decides when
  to stop, and waits for the child), keeps SIGTERM's default action (numba's OpenMP guard
  ends a misbehaving child with it, which must fail the snapshot, never let it go on), dies
  with the parent where the platform allows (Linux ``PR_SET_PDEATHSIG``), and leaves through
  ``os._exit`` so that no inherited ``atexit`` handler, buffered stream or client ``close()``
  runs twice;
- the result (snapshot path, timings, or the error) comes back as one small JSON message on a
  pipe; the parent reads it without blocking while it learns, or waits for it;
- the child runs at a lower CPU priority (``nice`` +10): the learner's numba kernels run on a
  thread per core and a parallel loop waits for its slowest thread, so a writer competing on
  equal terms would slow learning by more than the CPU time it takes. Deprioritised, it takes
  the cycles learning leaves idle (while a batch is read and decoded, say). When learning
  has to wait for it, the parent gives it its normal priority back where the system lets a
  process raise a priority again (root, or an ``RLIMIT_NICE``); elsewhere it keeps the lower
  one.

Where ``os.fork`` does not exist (Windows) the work runs in the calling thread, as it does when
background publishing is switched off, and as the engine does for a periodic snapshot whose
predecessor was cheap (``IN_PLACE_UNDER``): the snapshot is then written before learning
continues.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from typing import Callable

from streammn.kernel_mode import use_serial_kernels
from streammn.errors import SnapshotInFlight, SnapshotWriteFailed

CAN_FORK = hasattr(os, "fork")
# seconds: a periodic snapshot whose predecessor's work took less is written in the learning
# thread, a fork costing the stream more (streammn.stream.engine's docstring)
IN_PLACE_UNDER = 0.25
WRITER_NICENESS = 10
_PR_SET_PDEATHSIG = 1

if sys.platform.startswith("linux"):
    import ctypes

    try:
        _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - a libc without dlopen(NULL)
        _LIBC = None
else:  # pragma: no cover - other platforms
    _LIBC = None


class Publisher:
    """Runs one publishing job at a time, in a forked child (``background=True`` where the
    platform can fork) or in the calling thread.

    ``start(work)`` runs ``work()`` (a callable returning a JSON-serialisable dict); ``poll()``
    returns that dict once the job is done (``None`` while it runs, or when there is no job) and
    raises :class:`SnapshotWriteFailed` with the job's error if it failed; ``wait()`` blocks
    until the job is done. While a job is in flight ``start`` refuses another.
    """

    def __init__(self, background: bool = True):
        self.background = bool(background) and CAN_FORK
        self._pid: int | None = None
        self._fd: int | None = None
        self._chunks: list[bytes] = []
        self._done: dict | None = None

    def __repr__(self) -> str:
        return f"Publisher(background={self.background})"

    @property
    def busy(self) -> bool:
        """A job has been started and its result not yet returned by poll/wait."""
        return self._pid is not None or self._done is not None

    def start(self, work: Callable[[], dict]) -> None:
        if self.busy:
            raise SnapshotInFlight("a snapshot is already in flight")
        if not self.background:
            self._done = _run(work)
            return
        read_fd, write_fd = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
            if stream is not None:
                stream.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: publish from the copy-on-write image, then leave
            os.close(read_fd)
            _child(work, write_fd, parent)
        os.close(write_fd)
        self._pid, self._fd, self._chunks = pid, read_fd, []

    def poll(self) -> dict | None:
        """The finished job's result, or ``None`` while it runs (never blocks)."""
        return self._collect(block=False)

    def wait(self) -> dict | None:
        """Block until the job in flight (if any) is done; its result, or ``None``."""
        self.hurry()  # learning waits for the writer: it need not yield to learning any more
        return self._collect(block=True)

    def hurry(self) -> None:
        """Give the job in flight this process's priority back (a writer that falls behind, or
        one that learning waits for), where the system lets a process raise a priority."""
        if self._pid is not None:
            try:
                os.setpriority(os.PRIO_PROCESS, self._pid, os.getpriority(os.PRIO_PROCESS, 0))
            except OSError:  # not allowed to raise a priority here, or the child is gone
                pass

    def _collect(self, block: bool) -> dict | None:
        if self._done is None and self._pid is not None:
            assert self._fd is not None  # open while a child runs
            while True:
                ready, _, _ = select.select([self._fd], [], [], None if block else 0)
                if not ready:
                    return None
                chunk = os.read(self._fd, 1 << 16)
                if not chunk:  # the child closed its end: it has finished or died
                    break
                self._chunks.append(chunk)
            os.close(self._fd)
            _, status = os.waitpid(self._pid, 0)
            self._done = _decode(b"".join(self._chunks), status, self._pid)
            self._pid = self._fd = None
        done, self._done = self._done, None
        if done is not None and not done["ok"]:
            raise SnapshotWriteFailed(done["error"], done.get("killed_by"))
        return done

    def abandon(self) -> None:
        """Stop a job in flight without waiting for its result (the process is ending on
        another error): the child is killed, its temporary directory is left for the next
        writer to remove."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            assert self._fd is not None  # open while a child runs
            os.close(self._fd)
        self._pid = self._fd = self._done = None


def _run(work: Callable[[], dict]) -> dict:
    try:
        return {"ok": True, **work()}
    except Exception as error:  # reported to the learning thread, which stops the run
        return {"ok": False, "error": f"{type(error).__name__}: {error}"}


def _child(work: Callable[[], dict], write_fd: int, parent: int) -> None:
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the line above took effect
            os._exit(1)
        os.nice(WRITER_NICENESS)
        use_serial_kernels()  # numba's thread pool does not survive the fork
        result = _run(work)
        data = json.dumps(result).encode()
        while data:
            data = data[os.write(write_fd, data) :]
        code = 0 if result["ok"] else 1
    finally:
        os._exit(code)


def _decode(data: bytes, status: int, pid: int) -> dict:
    try:
        result = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError):
        result = None
    if isinstance(result, dict) and "ok" in result:
        return result
    killed_by = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    how = (
        f"was killed by signal {killed_by}"
        if killed_by is not None
        else f"exited with code {os.WEXITSTATUS(status)}"
    )
    return {
        "ok": False,
        "killed_by": killed_by,
        "error": f"the snapshot writer process {pid} {how} before it reported a result",
    }
