"""On a first run, compile the snapshot's kernels in a second process while this one compiles the
learner's.

numba compiles a kernel in the process that first calls it, one kernel at a time (its compiler
holds a lock), then keeps it in its cache. A first ``streammn learn`` of nltcs therefore spent
about 64 s compiling on one core while the other idled: about 40 s for the learner's kernels,
as the first batches arrive, and about 20 s for the snapshot's (the DN2MN conversion, the
weights' refinement, the model file formats), which were compiled when the first snapshot
needed them. The two sets are independent: the snapshot's kernels depend on the learner's
types, not on what it learned.

:class:`CompileAhead` listens to numba's ``numba:compile`` event, which fires only when a kernel
is not in the cache. At the first one it starts a process of its own (``python -m
streammn.stream.compile_ahead``) that runs the snapshot's work once on an unfitted clone of the
learner (:func:`compile_snapshot_kernels`: the scoring of validation rows, the serial kernels a
forked writer runs, the parallel twins of the weights' full fit), so that numba compiles them
into the shared cache while this process compiles the learner's. When this process reaches
its first snapshot, the kernels load from the cache. The second process runs at a lower
priority in a session of its own (Ctrl-C reaches this process, which stops it), and is stopped
when the run ends. A warm cache never starts it. Measured (``benchmarks/first_run.py``, empty
cache, 2 cores): a first ``streammn learn`` of nltcs 62.5 s without it, 42.8 s with it;
``streammn demo`` 74.0 s and 54.6 s.

The CLI turns it on for a person waiting at a terminal (the condition of its compile notice,
:mod:`streammn.cli.compile_notice`). Tests, pipelines and CI runs do not get a second process
taking a core and about 530 MB (its peak, compiling) beside them.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading

import numpy as np
from numba.core import event
from numba.core.event import Listener

from streammn.kernel_mode import serial_kernels
from streammn.network.loglinear import MASK_VALUES
from streammn.network.reach_lists import pll_evaluator
from streammn.schema import Schema
from streammn.stream.warmup import load_writer_kernels

NICENESS = 10


def compile_snapshot_kernels(learner, formats, refine: bool, validate: bool) -> None:
    """Run once what a snapshot of ``learner`` (fitted or not: the kernels depend on its types)
    runs, about in the order a run first needs it: with ``validate`` the scoring of validation
    rows, a forked writer's conversion, refinement and files (serial kernels), and the
    parallel twins of the pseudo-likelihood a full fit of the weights runs on a large
    sample."""
    with serial_kernels():  # the model a forked writer converts
        model = learner.learned_network()
    rows = np.zeros((2, model.schema.n_vars), dtype=np.uint8)
    if validate:  # scored on the learning thread at the first snapshot
        model.pll(rows)
    load_writer_kernels(learner, formats, refine)  # loaded beside the first batches
    fs = model.features  # the end's
    if refine and fs.n_features and model.schema.cardinalities.max() <= MASK_VALUES:
        pll_evaluator(fs, rows, parallel=True)(fs.weights)


class CompileAhead(Listener):
    """Starts the second process at the first kernel numba compiles in this one (see the
    module docstring); :meth:`stop` ends it. Use as a context manager around a run."""

    def __init__(self, learner, formats, refine: bool, validate: bool):
        # the class, parameters and schema (a fresh learner would pickle its preallocated
        # arrays too); the schema as its dict, which rebuilds it with the read-only arrays
        # the kernels are compiled for (a pickled array comes back writable, another type)
        params = {k: v for k, v in learner.get_params().items() if k != "schema"}
        job = (type(learner), params, learner.schema.to_dict(), tuple(formats), refine, validate)
        try:
            self._job: bytes | None = pickle.dumps(job)
        except (pickle.PicklingError, TypeError, AttributeError):  # a parameter that will not
            self._job = None  # travel: no second process, this one compiles all as before
        self._lock = threading.Lock()
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "CompileAhead":
        event.register("numba:compile", self)
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def on_start(self, ev) -> None:
        """numba compiles a kernel here: start the second process, the first time. Runs inside
        numba's compiler, so it raises nothing: without a second process this one compiles
        everything, as it did before."""
        with self._lock:
            if self.process is not None or self._job is None:
                return
            job, self._job = self._job, None
            try:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", __name__],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # Ctrl-C reaches this process, which stops it
                )
            except OSError:
                return
        # the job is sent by a thread: a large schema may not fit the pipe's buffer, and the
        # second process reads it only once its imports are done
        threading.Thread(target=_send, args=(self.process, job), daemon=True).start()

    def on_end(self, ev) -> None:
        pass

    def stop(self) -> None:
        """Stop listening, and end the second process if it is still compiling (a kernel it
        has not finished is compiled here when needed, as without it)."""
        event.unregister("numba:compile", self)
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _send(process: subprocess.Popen, job: bytes) -> None:
    pipe = process.stdin
    if pipe is None:  # not piped: cannot happen, the process was started with stdin=PIPE
        return
    try:
        pipe.write(job)
        pipe.close()
    except OSError:  # it died or was stopped: this process compiles what it needs
        pass


def _main() -> None:
    os.nice(NICENESS)
    cls, params, schema, formats, refine, validate = pickle.loads(sys.stdin.buffer.read())
    learner = cls(schema=Schema.from_dict(schema), **params)
    compile_snapshot_kernels(learner, formats, refine, validate)


if __name__ == "__main__":
    _main()
