"""Load the kernels a forked snapshot writer runs, once, in the process that forks it.

A snapshot writer is a forked child (:mod:`streammn.publishing`): it converts the learner, may
refine the weights (:mod:`streammn.published`) and writes the model files. numba loads a
compiled kernel into a process the first time it runs there; a child that loads them itself
loses them when it exits, so every snapshot would pay it again (0.2 s of CPU each). Running the
same work once in the parent, at the start of a run when the model is small, loads them where
every child inherits them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from streammn.formats import SNAPSHOT_UAI_MAX_ENTRIES, model_files
from streammn.published import warm_up
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
