"""The serial-kernels switch: a block's is its thread's own (the writer's kernels load on a thread
beside the learner, whose kernels must stay parallel), a forked child's holds process-wide."""

import threading

from streammn import kernel_mode
from streammn.kernel_mode import parallel_pays, serial_kernels, serial_kernels_only


def test_a_block_on_another_thread_leaves_this_threads_kernels_parallel():
    inside, leave = threading.Event(), threading.Event()
    seen = []

    def load():
        with serial_kernels():
            seen.append(serial_kernels_only())
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=load)
    thread.start()
    assert inside.wait(10)
    assert seen == [True]
    assert not serial_kernels_only() and parallel_pays(10, 1)
    leave.set()
    thread.join()


def test_blocks_nest_and_restore():
    with serial_kernels():
        with serial_kernels():
            assert serial_kernels_only() and not parallel_pays(10, 1)
        assert serial_kernels_only()
    assert not serial_kernels_only()


def test_a_forked_childs_switch_holds_on_every_thread(monkeypatch):
    monkeypatch.setattr(kernel_mode, "_serial_only", False)
    kernel_mode.use_serial_kernels()
    seen = []
    thread = threading.Thread(target=lambda: seen.append(serial_kernels_only()))
    thread.start()
    thread.join()
    assert seen == [True] and serial_kernels_only()
