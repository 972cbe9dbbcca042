"""librdkafka's built-in mock Kafka cluster, run in a helper process (tests, benchmarks, demos).

librdkafka (bundled with the ``confluent-kafka`` wheel) contains a mock cluster that speaks the
Kafka wire protocol on loopback ports: produce, fetch, metadata, consumer groups and offset
commits all work, with a small per-partition retention. This module drives it through ctypes
from a helper process, so that the cluster outlives or dies independently of the clients under
test: :meth:`MockKafkaCluster.stop` is how tests make "the broker" disappear.

The helper speaks a line protocol on stdin/stdout: it prints ``bootstrap <servers>``, then
answers ``create <topic> <partitions>`` with ``ok``; end of input (or SIGTERM) destroys the
cluster. Run ``python -m streammn.connectors.kafka_mock`` to get a cluster on the console.
"""

from __future__ import annotations

import ctypes
import glob
import os
import subprocess
import sys

from streammn.errors import MockClusterError

RD_KAFKA_PRODUCER = 0


def librdkafka_path() -> str:
    """Path of the librdkafka shared library bundled with (or used by) confluent-kafka."""
    import confluent_kafka

    pkg = os.path.dirname(confluent_kafka.__file__)
    site = os.path.dirname(pkg)
    candidates = sorted(
        glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*"))
        + glob.glob(os.path.join(pkg, ".dylibs", "librdkafka*.dylib"))
        + glob.glob(os.path.join(pkg, "librdkafka*.so*"))
    )
    if candidates:
        return candidates[0]
    import ctypes.util

    found = ctypes.util.find_library("rdkafka")
    if found is None:
        raise OSError("librdkafka not found next to confluent_kafka nor on the library path")
    return found


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(librdkafka_path())
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_int,
    ]
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    return lib


def _serve(n_brokers: int) -> None:
    """Helper-process body: create the cluster, answer commands, destroy it at end of input."""
    lib = _load()
    err = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    lib.rd_kafka_conf_set(conf, b"log_level", b"0", err, len(err))  # its own client is idle
    rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, len(err))
    if not rk:
        sys.exit(f"rd_kafka_new failed: {err.value.decode()}")
    cluster = lib.rd_kafka_mock_cluster_new(rk, n_brokers)
    if not cluster:
        sys.exit("rd_kafka_mock_cluster_new failed")
    # a real broker waits 3 s for more members before the first assignment; tests need not
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms(cluster, 0)
    print("bootstrap", lib.rd_kafka_mock_cluster_bootstraps(cluster).decode(), flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if len(words) == 3 and words[0] == "create":
                code = lib.rd_kafka_mock_topic_create(cluster, words[1].encode(), int(words[2]), 1)
                print("ok" if code == 0 else f"error {code}", flush=True)
            elif words:
                print(f"error unknown command {words[0]!r}", flush=True)
    finally:
        lib.rd_kafka_mock_cluster_destroy(cluster)
        lib.rd_kafka_destroy(rk)


class MockKafkaCluster:
    """A mock Kafka cluster in a child process; ``bootstrap`` is its ``host:port,...`` list.

    Use as a context manager or call :meth:`stop`. :meth:`create_topic` creates a topic with
    a given number of partitions (topics are otherwise auto-created on first use).
    """

    def __init__(self, n_brokers: int = 1):
        self.n_brokers = n_brokers
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "streammn.connectors.kafka_mock", str(n_brokers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None  # both piped
        first = self._proc.stdout.readline().split()
        if len(first) != 2 or first[0] != "bootstrap":
            self.stop()
            raise MockClusterError(f"mock Kafka cluster did not start (said {first!r})")
        self.bootstrap = first[1]

    def create_topic(self, topic: str, partitions: int) -> None:
        assert self._proc.stdin is not None and self._proc.stdout is not None  # both piped
        self._proc.stdin.write(f"create {topic} {partitions}\n")
        self._proc.stdin.flush()
        answer = self._proc.stdout.readline().strip()
        if answer != "ok":
            raise MockClusterError(f"mock cluster could not create topic {topic!r}: {answer}")

    @property
    def running(self) -> bool:
        return self._proc.poll() is None

    def stop(self) -> None:
        """Destroy the cluster: its ports close and every client sees the brokers go down."""
        if self._proc.poll() is None:
            assert self._proc.stdin is not None  # piped
            try:
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, OSError):
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout and not self._proc.stdout.closed:
            self._proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def __repr__(self) -> str:
        return f"MockKafkaCluster(n_brokers={self.n_brokers}, bootstrap={self.bootstrap!r})"


if __name__ == "__main__":
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
