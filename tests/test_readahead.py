"""Reading ahead on a thread (streammn.connectors.readahead): the reader's order, its end and its
errors, a prompt close, and a CSV read the same with it."""

import threading
import time

import pyarrow as pa
import pytest

from streammn.connectors.csv import CsvSource
from streammn.connectors.readahead import ReadAhead


class Reader:
    """Batches 0..n-1, then an error or the end; records whether it was closed."""

    def __init__(self, n: int, error: Exception | None = None, delay: float = 0.0):
        self.n, self.error, self.delay = n, error, delay
        self.i, self.closed = 0, False

    def read_next_batch(self):
        time.sleep(self.delay)
        if self.i == self.n:
            if self.error is not None:
                raise self.error
            raise StopIteration
        self.i += 1
        return pa.record_batch({"x": [self.i - 1]})

    def close(self):
        self.closed = True


def _drain(reader) -> list:
    out = []
    while True:
        try:
            out.append(reader.read_next_batch().column(0)[0].as_py())
        except StopIteration:
            return out


def test_batches_arrive_in_order_then_the_end_every_time_asked():
    ahead = ReadAhead(Reader(7), depth=2)
    assert _drain(ahead) == list(range(7))
    with pytest.raises(StopIteration):
        ahead.read_next_batch()
    ahead.close()


def test_an_error_comes_after_the_batches_before_it():
    ahead = ReadAhead(Reader(3, error=pa.ArrowInvalid("bad row")))
    got = [ahead.read_next_batch().column(0)[0].as_py() for _ in range(3)]
    assert got == [0, 1, 2]
    with pytest.raises(pa.ArrowInvalid, match="bad row"):
        ahead.read_next_batch()
    ahead.close()


def test_close_stops_a_thread_waiting_on_a_full_queue_and_closes_the_reader():
    reader = Reader(10**6)
    ahead = ReadAhead(reader, depth=1)
    ahead.read_next_batch()
    time.sleep(0.1)  # the thread is blocked, the queue full
    t0 = time.perf_counter()
    ahead.close()
    assert time.perf_counter() - t0 < 2
    assert reader.closed and not any(t.name == "streammn-read-ahead" for t in threading.enumerate())


def test_a_csv_stopped_early_leaves_no_thread(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("a,b\n" + "".join(f"{i % 2},{i % 3 % 2}\n" for i in range(50_000)))
    with CsvSource(path, batch_size=1000, block_bytes=4096) as source:
        batches = iter(source)
        assert len(next(batches)) == 1000
        batches.close()
    assert not any(t.name == "streammn-read-ahead" for t in threading.enumerate())
