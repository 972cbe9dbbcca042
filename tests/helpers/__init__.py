"""Helpers shared by the tests (and by ``benchmarks/faults.py``); not tests themselves.

- ``datasets``: where the benchmark datasets are (``$STREAMMN_DATA``, else ``../shared/data``)
  and the repository root.
- ``formats_strategies``: Hypothesis strategies for random models and brute-force scores, for
  the model-file format tests (native, Libra, UAI).
- ``helpers_mn``: random feature sets and models, brute-force joints, scores and conditional
  marginals, noisy-chain rows and a per-thread-count runner, for the MN / DN2MN / inference
  tests.
- ``killresume``: kill a ``streammn learn`` process with SIGKILL, resume it and compare with an
  uninterrupted run (the fault tests and ``benchmarks/faults.py``).
- ``logrows``: rows that carry their partition and sequence number, for the Kafka and Redis
  Streams source tests.
- ``redisserver``: a throw-away redis-server on a free loopback port.

``tests/`` is on ``sys.path`` (``pythonpath`` in pyproject.toml's pytest options), so tests
import these as ``from helpers.datasets import ROOT``.
"""
