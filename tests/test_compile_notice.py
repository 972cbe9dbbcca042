"""The first-run notice: said once when numba compiles, on a terminal only."""

import io

import numba as nb

from streammn.cli.compile_notice import compile_notice


class Terminal(io.StringIO):
    def isatty(self):
        return True


def fresh_kernels():
    """Two new kernels, the outer calling the inner (compiled inside the outer's event)."""

    @nb.njit
    def inner(x):
        return x + 1

    @nb.njit
    def outer(x):
        return inner(x) * 2

    return outer, inner


def test_said_once_at_the_first_compile_and_summed_up_at_the_end():
    outer, _ = fresh_kernels()
    other, _ = fresh_kernels()
    stream = Terminal()
    with compile_notice("learn", stream=stream) as notice:
        assert outer(1) == 4 and other(2.5) == 7.0
        assert outer(3) == 8  # compiled already: no event
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("streammn learn: compiling its kernels on first use")
    assert lines[1].startswith("streammn learn: compiled 2 kernels over")
    assert len(lines) == 2 and notice.kernels == 2


def test_silent_when_nothing_compiles_or_not_a_terminal_or_quiet():
    outer, _ = fresh_kernels()
    outer(1)
    stream = Terminal()
    with compile_notice("score", stream=stream):
        outer(2)
    assert stream.getvalue() == ""
    for stream, quiet in ((io.StringIO(), False), (Terminal(), True)):
        fresh, _ = fresh_kernels()
        with compile_notice("learn", quiet=quiet, stream=stream) as notice:
            fresh(1)
        assert stream.getvalue() == "" and notice is None
