"""Load the kernels a forked snapshot writer runs, once, in the process that forks it.

A snapshot writer is a forked child (:mod:`streammn.stream.publishing`): it converts the learner,
may refine the weights (:mod:`streammn.network.published`) and writes the model files. numba loads a
compiled kernel into a process the first time it runs there; a child that loads them itself
loses them when it exits, so every snapshot would pay it again (0.2 s of CPU each). Running the
same work once in the parent, at the start of a run, loads them where every child inherits them.

It runs on a thread of its own (:class:`WriterKernels`), beside the first batches: loading a
cached kernel is mostly the linker's work outside the GIL, and the learner's kernels release
the GIL, so the two overlap instead of the run waiting for the load (a 1M-row, 100-variable run
with refined weights waited 0.16 s for it, 7% of its time). The thread works on a fresh clone
of the learner (the kernels depend on the types, not on what was learned), never on the one
learning, and the engine waits for it before the first snapshot: a fork must not happen while
another thread is inside numba's compiler.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

from streammn.formats import SNAPSHOT_UAI_MAX_ENTRIES, model_files
from streammn.network.published import warm_up
from streammn.kernel_mode import serial_kernels


def load_writer_kernels(learner, formats, refine: bool) -> None:
    """Convert ``learner``'s current model and write it in ``formats`` into a scratch
    directory, with the serial kernels a writer runs; with ``refine``, warm the weights'
    refinement up on a row or two (not a fit)."""
    with serial_kernels():
        model = learner.learned_network()
        if refine:
            warm_up(model)
    files = model_files(
        model.schema, model.features, formats, uai_max_entries=SNAPSHOT_UAI_MAX_ENTRIES
    )
    with tempfile.TemporaryDirectory(prefix="streammn-") as scratch:
        for name, write in files.items():
            write(Path(scratch) / name)


class WriterKernels:
    """:func:`load_writer_kernels` on a thread, for a fresh clone of ``learner``; :meth:`wait`
    before anything forks or converts (an error of the load is raised there)."""

    def __init__(self, learner, formats, refine: bool):
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._load,
            args=(learner.clone(), formats, refine),
            name="streammn-writer-kernels",
            daemon=True,
        )
        self._thread.start()

    def _load(self, learner, formats, refine) -> None:
        try:
            load_writer_kernels(learner, formats, refine)
        except BaseException as error:  # handed to the thread that waits
            self._error = error

    def wait(self, raise_error: bool = True) -> None:
        self._thread.join()
        if self._error is not None and raise_error:
            error, self._error = self._error, None
            raise error
