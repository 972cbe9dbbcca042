"""Whether numba's parallel kernels may run here: a process-wide switch and a per-thread one.

A forked snapshot writer (:mod:`streammn.stream.publishing`) must not start numba's thread pool: the
pool's threads do not survive ``fork()``, and a child that starts one can hang or die. The
kernels with a parallel and a serial variant (the conversion in :mod:`streammn.dn.conversion`, the
pseudo-likelihood of :mod:`streammn.network.reach_lists`) ask :func:`serial_kernels_only` which to
run; the writer child turns the process's switch on for good, and :func:`serial_kernels` turns
the calling thread's on for a block (to load the writer's kernels in the parent before the first
fork). That one is the thread's own: the parent loads them on a thread beside the learner
(:mod:`streammn.stream.warmup`), and the learner's kernels must not turn serial meanwhile.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

_serial_only = False  # the whole process: a forked writer child
_thread = threading.local()  # this thread: code under serial_kernels()


def serial_kernels_only() -> bool:
    """Whether numba's parallel kernels are off limits here (a forked writer child, or code
    under :func:`serial_kernels` on this thread)."""
    return _serial_only or getattr(_thread, "serial", False)


def parallel_pays(work: int, threshold: int) -> bool:
    """Whether to run the parallel twin of a kernel on ``work`` units: not where the pool is off
    limits (:func:`serial_kernels_only`), nor below ``threshold`` units, where the serial twin
    takes about as long on two cores. Both twins give the same bits, so this decides time only,
    and what a process compiles: a first run on a small model compiles one twin, not two
    (compiling a parallel twin costs seconds to tens of seconds)."""
    return not serial_kernels_only() and work >= threshold


def use_serial_kernels() -> None:
    """From now on, run the serial kernels only (a forked writer child, for its lifetime)."""
    global _serial_only
    _serial_only = True


@contextmanager
def serial_kernels():
    """Run the enclosed code with the serial kernels a writer child uses (this thread only)."""
    before, _thread.serial = getattr(_thread, "serial", False), True
    try:
        yield
    finally:
        _thread.serial = before
