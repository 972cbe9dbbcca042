"""A first run compiles the snapshot's kernels in a second process (streammn.stream.compile_ahead).

What it must do: fill numba's cache with exactly the kernels this process later asks for (the same
types: a kernel compiled for another type, a writable array where the run passes a read-only
one, is compiled again here), start at the first kernel compiled and never on a warm cache, stop
with the run, and be on for a person at a terminal only.
"""

import io
import os
import subprocess
import sys
import textwrap

import numpy as np

from streammn import DTSL, Schema
from streammn.cli.commands import _person_waiting
from streammn.stream.compile_ahead import CompileAhead

# The second process counts the kernels numba compiles (outermost ones) while it runs the
# snapshot's work, as a run's first snapshot does, over a schema built here.
_SNAPSHOT_COMPILES = textwrap.dedent(
    """
    import numpy as np
    from numba.core import event
    from streammn import DTSL, Schema
    from streammn.stream.warmup import load_writer_kernels

    compiled = []

    class Count(event.Listener):
        def on_start(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__qualname__)

        def on_end(self, ev):
            pass

    learner = DTSL(Schema.binary(6), memory_mb=4)
    event.register("numba:compile", Count())
    load_writer_kernels(learner, ("json",), False)
    learner.learned_network().pll(np.zeros((2, 6), dtype=np.uint8))  # validation rows scored
    print(len(compiled), compiled)
    """
)


def _run(args, cache, stdin=None):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, *args], input=stdin, env=env, capture_output=True, check=True
    )


def test_the_second_process_fills_the_cache_with_what_the_first_snapshot_loads(tmp_path):
    cache = tmp_path / "numba-cache"
    learner = DTSL(Schema.binary(6), memory_mb=4)
    ahead = CompileAhead(learner, ("json",), refine=False, validate=True)
    _run(["-m", "streammn.stream.compile_ahead"], cache, stdin=ahead._job)
    assert any(cache.rglob("*.nbc"))  # it compiled into the cache
    done = _run(["-c", _SNAPSHOT_COMPILES], cache)
    assert done.stdout.decode().split()[0] == "0", done.stdout.decode()


def test_it_starts_at_the_first_compile_once_and_stops_with_the_run():
    learner = DTSL(Schema.binary(4), memory_mb=4)
    with CompileAhead(learner, ("json",), refine=False, validate=False) as ahead:
        assert ahead.process is None
        ahead.on_start(None)  # numba's event at a kernel it does not find in its cache
        first = ahead.process
        ahead.on_start(None)
        assert ahead.process is first  # one second process per run
        assert first.poll() is None  # still compiling
    assert first.poll() is not None  # stopped with the run


def test_a_run_whose_kernels_are_loaded_starts_no_second_process():
    rows = (np.random.default_rng(0).random((2000, 4)) < 0.5).astype(np.uint8)
    DTSL(Schema.binary(4), memory_mb=4).partial_fit(rows)  # every kernel loaded here
    learner = DTSL(Schema.binary(4), memory_mb=4)
    with CompileAhead(learner, ("json",), refine=False, validate=False) as ahead:
        learner.partial_fit(rows)
    assert ahead.process is None


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_cli_compiles_ahead_for_a_person_at_a_terminal_only(monkeypatch):
    class Args:
        quiet = False

    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert _person_waiting(Args())
    Args.quiet = True
    assert not _person_waiting(Args())
    Args.quiet = False
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a pipe, a log file, a test
    assert not _person_waiting(Args())


def test_a_second_process_that_cannot_start_changes_nothing(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("no interpreter to start")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    learner = DTSL(Schema.binary(4), memory_mb=4)
    with CompileAhead(learner, ("json",), refine=False, validate=False) as ahead:
        ahead.on_start(None)  # inside numba's compiler: must not raise
    assert ahead.process is None
