"""Dask scale-out: statistics and exact DTSL on a LocalCluster equal the single-process results.

The reference is the single-process path (stores updated by a ParquetSource read in order,
``DTSL.fit(source)``), itself checked against brute force in test_stats / test_dtsl_exact.
"""

import functools
import json
import os

import numpy as np
import pytest

pytest.importorskip("distributed", reason="Dask is not installed (extra 'dask': dask, distributed)")

from distributed import Client, LocalCluster  # noqa: E402

from streammn.connectors.base import SourceUnavailable  # noqa: E402
from streammn.connectors.parquet import ParquetSource, write_parquet  # noqa: E402
from streammn.cli import main  # noqa: E402
from streammn.errors import EXIT_OK, EXIT_USAGE  # noqa: E402
from streammn.connectors.distributed import (
    PINNED_ENV,
    DaskPasses,
    count_statistics,  # noqa: E402
    dask_client,
    group_partitions,
    n_batches,
    parquet_partitions,
)
from streammn.dtsl import DTSL, DTSLError  # noqa: E402
from streammn.logistic.sample import PositionSample  # noqa: E402
from streammn.schema import Schema, SchemaError  # noqa: E402
from streammn.stats import MarginalCounts, PairCounts, RowReservoir  # noqa: E402

from helpers.helpers_mn import noisy_chain_rows  # noqa: E402

FILE_ROWS = (2500, 1700, 1800)
ROW_GROUP = 600


@pytest.fixture(scope="module")
def client():
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Three Parquet files of unequal sizes, several row groups each; one 3-valued variable."""
    cards = [2, 2, 3, 2, 2, 2, 2, 2, 2, 2]
    schema = Schema.from_cardinalities(cards)
    rows = noisy_chain_rows(
        np.random.default_rng(3), cards, sum(FILE_ROWS), p_copy=0.75, dtype=np.uint8
    )
    d = tmp_path_factory.mktemp("parquet")
    start = 0
    for k, n in enumerate(FILE_ROWS):
        write_parquet(
            d / f"part-{k}.parquet", rows[start : start + n], schema, row_group_size=ROW_GROUP
        )
        start += n
    return str(d), schema, rows


def test_partitions_cover_the_dataset_in_order(dataset):
    path, _, rows = dataset
    parts = parquet_partitions(path)
    assert len(parts) == sum(-(-n // ROW_GROUP) for n in FILE_ROWS)
    assert sum(p.n_rows for p in parts) == rows.shape[0]
    files = parquet_partitions(path, by="file")
    assert [p.n_rows for p in files] == list(FILE_ROWS)
    for n_groups in (1, 2, 4, 100):
        groups = group_partitions(parts, n_groups)
        assert len(groups) == min(n_groups, len(parts))
        assert [p for g in groups for p in g] == parts  # contiguous, nothing lost or repeated
    assert n_batches(ParquetSource(path, batch_size=1000)) == len(
        list(ParquetSource(path, batch_size=1000))
    )


@pytest.mark.parametrize(
    "by,n_tasks", [("row_group", None), ("row_group", 5), ("file", 1), ("file", None)]
)
def test_statistics_equal_single_process(client, dataset, by, n_tasks):
    path, schema, rows = dataset
    for factory in (MarginalCounts, PairCounts):
        single = factory(schema)
        for batch in ParquetSource(path, batch_size=700):
            single.update(batch)
        merged = count_statistics(path, factory, client, by=by, n_tasks=n_tasks)
        assert merged.to_bytes() == single.to_bytes()
        assert merged.to_bytes() == factory(schema).update(rows).to_bytes()


def test_store_settings_travel_with_the_factory(client, dataset):
    path, schema, rows = dataset
    sample = count_statistics(path, functools.partial(RowReservoir, capacity=50, seed=1), client)
    assert sample.n_seen == rows.shape[0] and sample.size == 50
    assert {tuple(r) for r in sample.rows} <= {tuple(r) for r in rows}


def test_bad_value_in_a_partition_is_a_schema_error(client, tmp_path):
    schema = Schema.from_cardinalities([2, 2])
    write_parquet(tmp_path / "a.parquet", np.zeros((10, 2), np.uint8), schema)
    narrow = Schema.from_cardinalities([2, 2])
    wide = Schema.from_cardinalities([2, 3])
    bad = np.zeros((10, 2), np.uint8)
    bad[7, 1] = 2
    write_parquet(tmp_path / "b.parquet", bad, wide)
    with pytest.raises(SchemaError, match="b.parquet"):
        count_statistics(ParquetSource(tmp_path, schema=narrow), MarginalCounts, client)


@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [
        dict(kappa=0.3, min_count=5, weights="closed-form", cpd="tree"),
        dict(kappa=0.5, min_count=3, max_leaves=7, weights="closed-form", cpd="tree"),
        dict(kappa=0.1, min_count=10, max_depth=3, weights="closed-form", cpd="tree"),
    ],
)
def test_exact_dtsl_on_dask_equals_single_process(client, dataset, params):
    path, schema, _ = dataset
    source = ParquetSource(path, batch_size=512)
    local = DTSL(schema, mode="exact", **params).fit(source)
    passes = DaskPasses(client, source, n_tasks=3)
    remote = DTSL(schema, mode="exact", **params).fit(source, count_pass=passes)
    assert local.forest.n_nodes > 3 * schema.n_vars  # real trees, not stumps
    assert remote.forest.equals(local.forest)
    assert remote.to_bytes() == local.to_bytes()
    assert passes.n_passes == remote.n_passes == local.n_passes
    if "max_leaves" in params:  # frontiers bigger than the budget took several passes a level
        assert local.n_passes > int(local.forest.depths().max()) + 1


@pytest.mark.parametrize("room", ["none", "one group", "all"])
def test_remembered_nodes_do_not_change_the_trees(client, dataset, room):
    """Workers' row -> node tables (none, room for one task group only, all) are a speed-up
    only: the trees equal the single-process ones whichever tasks find a table."""
    from streammn.connectors import distributed

    path, schema, _ = dataset
    source = ParquetSource(path, batch_size=512)
    table_bytes = [
        sum(p.n_rows for p in g) * schema.n_vars * 4
        for g in group_partitions(parquet_partitions(path), 3)
    ]
    cache_bytes = {"none": 0, "one group": max(table_bytes), "all": 2**30}[room]
    params = dict(kappa=0.2, min_count=5, weights="closed-form", cpd="tree")
    local = DTSL(schema, mode="exact", **params).fit(source)
    passes = DaskPasses(client, source, n_tasks=3, cache_bytes=cache_bytes)
    remote = DTSL(schema, mode="exact", **params).fit(source, count_pass=passes)
    assert remote.to_bytes() == local.to_bytes()
    # the cluster runs its workers as threads of this process, sharing one table store
    tables = {k: t for k, t in distributed._ROW_NODES.items() if k[0] == passes.token}
    assert len(tables) == {"none": 0, "one group": 1, "all": 3}[room]
    for (_, i), table in tables.items():  # rows moved down their trees, each in its own
        assert table.shape == (schema.n_vars, table_bytes[i] // (4 * schema.n_vars))
        assert (local.forest.tree[table] == np.arange(schema.n_vars)[:, None]).all()
        assert (local.forest.depth[table] > 1).mean() > 0.5


def test_count_pass_is_for_exact_mode(client, dataset, tmp_path):
    path, schema, _ = dataset
    source = ParquetSource(path)
    with pytest.raises(DTSLError, match="exact"):
        DTSL(schema).fit(source, count_pass=DaskPasses(client, source))
    with pytest.raises(DTSLError, match="weights='closed-form'"):  # no weight sample on Dask
        DTSL(schema, mode="exact").fit(source, count_pass=DaskPasses(client, source))
    # beyond the batch fit's reach 'lr' is FTRL, sequential in the rows' order: refused there
    wide = Schema.binary(301)
    rows = np.random.default_rng(0).integers(0, 2, (50, 301)).astype(np.uint8)
    write_parquet(tmp_path / "wide.parquet", rows, wide)
    wide_source = ParquetSource(tmp_path / "wide.parquet", schema=wide)
    with pytest.raises(DTSLError, match="batch fit's reach"):
        DTSL(wide, mode="exact", weights="closed-form", cpd="lr").fit(
            wide_source, count_pass=DaskPasses(client, wide_source)
        )


@pytest.mark.parametrize("by", ["row_group", "file"])
def test_partition_samples_merge_to_the_single_process_sample(client, dataset, by):
    path, schema, rows = dataset
    local = PositionSample(schema, 700, seed=3)
    local.update(rows, 0)
    remote = PositionSample(schema, 700, seed=3)
    passes = DaskPasses(client, ParquetSource(path, batch_size=333), by=by, n_tasks=3)
    passes.offer_rows(remote)
    assert remote.to_bytes() == local.to_bytes()
    assert passes.n_passes == 0


@pytest.mark.parametrize("cpd", ["lr", "auto"])
@pytest.mark.parametrize("memory_mb", [1024.0, 2.0], ids=["whole file", "sample of it"])
def test_exact_regressions_on_dask_equal_single_process(client, dataset, cpd, memory_mb):
    """The regressions' sample taken on the workers merges into the one-process sample (the
    whole 6,000-row file, or about 1,800 rows of it at memory_mb=2), so the batch fit in the
    client, the choice per variable and the whole state are the one-process ones."""
    path, schema, _ = dataset
    source = ParquetSource(path, batch_size=512)
    params = dict(mode="exact", kappa=0.3, weights="closed-form", cpd=cpd, memory_mb=memory_mb)
    local = DTSL(schema, **params).fit(source)
    remote = DTSL(schema, **params).fit(source, count_pass=DaskPasses(client, source, n_tasks=3))
    assert remote.to_bytes() == local.to_bytes()
    sample = remote._logistic.sample
    assert sample.n_seen == len(dataset[2]) and (sample.size < 3000) == (memory_mb == 2.0)
    assert remote._logistic.batch_current
    chosen = remote.logistic_variables()
    assert chosen.all() if cpd == "lr" else 0 < chosen.sum() < schema.n_vars
    np.testing.assert_array_equal(remote.pll_terms(dataset[2]), local.pll_terms(dataset[2]))


def test_unreachable_scheduler_is_source_unavailable():
    with pytest.raises(SourceUnavailable, match="unreachable"):
        with dask_client("tcp://127.0.0.1:1", timeout=1):
            pass


def _learn(args) -> int:
    return main(["learn", *args, "--quiet", "--kappa", "0.3", "--batch-size", "500"])


@pytest.mark.slow
def test_cli_dask_local_cluster_gives_the_same_snapshot(dataset, tmp_path):
    path, _, _ = dataset
    # Dask runs publish the closed form (the weight sample is not taken on the workers): so
    # does this one; the conditionals are the default's (auto: trees and regressions)
    one = ["--mode", "exact", "--weights", "closed-form"]
    assert _learn([path, "--out", str(tmp_path / "one"), *one]) == EXIT_OK
    assert (
        _learn([path, "--out", str(tmp_path / "dask"), "--mode", "exact", "--dask", "local[2]"])
        == EXIT_OK
    )
    one, dask = (tmp_path / name / "snap-000001" for name in ("one", "dask"))
    for name in ("model.json", "learner.bin"):
        assert (one / name).read_bytes() == (dask / name).read_bytes(), name
    m1, m2 = (json.loads((d / "manifest.json").read_text()) for d in (one, dask))
    for key in ("rows_seen", "source", "model"):
        assert m1[key] == m2[key], key
    assert m2["conditionals"]["lr"]  # some variables chose their regression


def test_cli_dask_usage_errors(dataset, tmp_path, capsys):
    path, schema, rows = dataset
    out = str(tmp_path / "s")
    assert _learn([path, "--out", out, "--dask", "local[1]"]) == EXIT_USAGE  # hoeffding
    assert "--mode exact" in capsys.readouterr().err
    csv = tmp_path / "rows.data"
    np.savetxt(csv, rows[:100], fmt="%d", delimiter=",")
    assert _learn([str(csv), "--out", out, "--mode", "exact", "--dask", "local[1]"]) == EXIT_USAGE
    assert "Parquet" in capsys.readouterr().err
    assert _learn([path, "--out", out, "--mode", "exact", "--dask", "local[x]"]) == EXIT_USAGE
    assert (
        _learn(
            [path, "--out", out, "--mode", "exact", "--dask", "local[1]", "--weights", "refined"]
        )
        == EXIT_USAGE
    )
    assert "--weights refined" in capsys.readouterr().err
    assert not os.path.exists(out) or not os.listdir(out)


def test_local_cluster_workers_are_single_threaded():
    with dask_client("local[1]") as c:
        assert list(c.nthreads().values()) == [1]
        env = c.run(lambda: {k: os.environ.get(k) for k in PINNED_ENV})
        assert list(env.values()) == [PINNED_ENV]


def test_the_old_module_path_is_a_deprecated_alias():
    import importlib
    import sys

    sys.modules.pop("streammn.distributed", None)
    with pytest.warns(DeprecationWarning, match="streammn.connectors.distributed"):
        old = importlib.import_module("streammn.distributed")
    assert old.DaskPasses is DaskPasses and old.dask_client is dask_client
