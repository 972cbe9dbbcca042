"""DTSL's ``memory_mb`` as a budget of the whole run (streammn.trees.budget): the shares sum
within it, what the learner allocates stays within its shares, the degradation is a function of
the settings and schema, and the engine reads batches the budget can hold."""

import io

import numpy as np
import pytest

from streammn.connectors import ArraySource
from streammn import Schema
from streammn.dtsl import DTSL
from streammn.stream.engine import StreamLearner
from streammn.trees.budget import MAX_BATCH_ROWS, MemoryPlan
from streammn.trees.leaf_stats import LeafStats

MB = 2**20


def chain_rows(n, n_vars, seed=0):
    rng = np.random.default_rng(seed)
    x = np.empty((n, n_vars), dtype=np.uint8)
    for j in range(n_vars):
        if j % 10 == 0:
            x[:, j] = rng.random(n) < 0.4
        else:
            x[:, j] = x[:, j - 1] ^ (rng.random(n) < 0.15)
    return x


@pytest.mark.parametrize("n_vars", [100, 300])
@pytest.mark.parametrize("memory_mb", [64, 256])
def test_the_shares_sum_within_the_budget_and_bound_what_is_allocated(n_vars, memory_mb):
    learner = DTSL(Schema.binary(n_vars), memory_mb=memory_mb)
    plan = learner.memory_plan
    parts = plan.components()
    assert set(parts) == {
        "batch",
        "weight_step",
        "logistic",
        "snapshot",
        "allocator",
        "replay",
        "trees",
    }
    assert all(v > 0 for v in parts.values())
    assert sum(parts.values()) <= memory_mb * MB
    # what the learner allocates for each part stays within its share
    assert learner.weight_sample.nbytes <= parts["weight_step"]
    logistic = learner._logistic
    online = logistic.online
    ftrl = online.z.nbytes + online.n.nbytes + online.w.nbytes + online._free.nbytes
    assert logistic.sample.nbytes + ftrl <= parts["logistic"]
    g = learner._grower
    assert g._buf.nbytes + g._buf_bits.nbytes + g._buf_packed.nbytes == parts["replay"]
    assert learner.batch_rows * n_vars <= parts["batch"]
    # the trees' share: the forest, the buffer and every statistics slot the grower may take
    slot = LeafStats.slot_bytes(learner.forest, np.int32)
    rows = chain_rows(3000, n_vars)
    learner.partial_fit(rows)
    trees = learner.forest.nbytes + parts["replay"] + learner._grower.leaf_budget * slot
    assert trees <= parts["replay"] + parts["trees"]


def test_a_smaller_budget_degrades_every_share_deterministically():
    schema = Schema.binary(300)
    plans = [MemoryPlan.of(schema, mb) for mb in (32, 64, 256, 1024)]
    for small, large in zip(plans, plans[1:]):
        assert small.batch_rows <= large.batch_rows
        assert small.weight_mb <= large.weight_mb
        assert small.replay_rows <= large.replay_rows
        assert small.trees_mb < large.trees_mb
    assert plans[1] == MemoryPlan.of(schema, 64)  # a function of the settings and schema
    assert plans[1].binding() == [
        "weight sample 2,723 rows",
        "regression sample 2,723 rows",
        "replay 11,184 rows",
    ]
    assert plans[-1].binding() == []
    assert MemoryPlan.of(Schema.binary(8), 256).batch_rows == MAX_BATCH_ROWS
    # a closed-form learner with trees only keeps no samples
    bare = MemoryPlan.of(schema, 64, weights=False, regressions=False)
    assert bare.weight_mb == bare.logistic_mb == 0 and bare.trees_mb > plans[1].trees_mb


def test_a_long_batch_is_learned_in_pieces_with_the_same_result():
    """batch_rows cuts a long batch; the model does not depend on the cuts."""
    rows = chain_rows(6000, 40, seed=1)
    whole, cut = DTSL(Schema.binary(40), memory_mb=2), DTSL(Schema.binary(40), memory_mb=2)
    assert whole.batch_rows == 1024
    whole.partial_fit(rows)
    for start in range(0, 6000, 700):
        cut.partial_fit(rows[start : start + 700])
    assert whole.equals(cut)


def test_the_engine_reads_batches_the_budget_holds_and_says_when_it_binds(tmp_path):
    rows = chain_rows(6000, 40, seed=2)
    source = ArraySource(rows, schema=Schema.binary(40), batch_size=5000)
    learner = DTSL(source.schema, memory_mb=2)
    lines = io.StringIO()
    engine = StreamLearner(source, learner, tmp_path / "out", progress=lines)
    engine.run()
    assert source.batch_size == learner.batch_rows == 1024
    assert engine.state.batches_seen == 6  # 6,000 rows in batches of 1,024
    last = lines.getvalue().strip().splitlines()[-1]
    assert "memory budget binds: weight sample" in last
    # the default budget binds nothing on a small schema: no note, the batches as they were
    source = ArraySource(rows, schema=Schema.binary(40), batch_size=5000)
    lines = io.StringIO()
    StreamLearner(source, DTSL(source.schema), tmp_path / "out2", progress=lines).run()
    assert source.batch_size == 5000
    assert "memory budget" not in lines.getvalue()


# runs `streammn learn` in a process that reports its own peak RSS at exit (VmHWM: Linux
# carries ru_maxrss across exec, so it would report the test process's peak)
PEAK_SCRIPT = (
    "import sys\n"
    "from streammn.cli.parser import main\n"
    "code = main(sys.argv[1:])\n"
    "hwm = open('/proc/self/status').read().split('VmHWM:')[1].split()[0]\n"
    "print('PEAK', hwm, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def peak_rss_mb(data, out, memory_mb, every):
    import os
    import subprocess
    import sys

    from helpers.datasets import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", PEAK_SCRIPT, "learn", str(data), "--out", str(out)]
    cmd += ["--memory-mb", str(memory_mb), "--every-rows", str(every), "--quiet"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stderr.splitlines() if x.startswith("PEAK "))
    return int(line.split()[1]) / 1024  # kB


@pytest.mark.slow
@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc")
def test_a_learn_run_stays_within_budget_plus_floor(tmp_path):
    """The peak RSS of `streammn learn` at two budgets, against the floor: the same command at
    --memory-mb 1, where every share is at its least (interpreter, libraries, kernels, the
    Parquet reader's buffers). A few MB of slack for the allocators' timing, which moves a peak
    by that much from run to run."""
    from streammn.connectors import write_parquet

    schema = Schema.binary(150)
    data = tmp_path / "data.parquet"
    write_parquet(data, chain_rows(200_000, 150, seed=2), schema)
    floor = peak_rss_mb(data, tmp_path / "floor", 1, 50_000)
    peaks = {mb: peak_rss_mb(data, tmp_path / f"out{mb}", mb, 50_000) for mb in (32, 128)}
    for memory_mb, peak in peaks.items():
        assert peak <= memory_mb + floor + 8, (memory_mb, peak, floor)
