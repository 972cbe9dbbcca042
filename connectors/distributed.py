"""Scale-out on Dask: statistics and exact DTSL passes over a Parquet dataset's partitions.

(Moved here from ``streammn.distributed``, which remains as a deprecated alias.)

A Parquet dataset (files, a directory or a glob) is cut into partitions, one per row group or
per file (:func:`parquet_partitions`), and the partitions into as many contiguous task
groups as the cluster has worker threads (by default). Every task reads only its
own row groups and returns something mergeable; results are combined pairwise in a tree
reduction on the workers, so only one result travels back to the driver.

- :func:`count_statistics`: any store of :mod:`streammn.stats` (``update`` / ``merge``) over the
  whole dataset; counts equal those of one process reading the files in order.
- :class:`DaskPasses`: the pass of exact level-wise DTSL
  (:func:`streammn.trees.exact.grow_level_wise`). Once per pass the driver ships the forest,
  the frontier leaves and their trees to every worker (a broadcast: one copy per worker, not per
  task); each task routes its rows through the forest and returns the statistics of every
  frontier leaf; the sums are scored and split by the driver exactly as in a local pass, so the
  trees are identical to the single-process ones. Workers remember their rows' nodes between
  passes (within a memory budget), so deep trees cost no more per level than shallow ones.
- :meth:`DaskPasses.offer_rows`: a mergeable sample of the rows
  (:class:`~streammn.logistic.sample.PositionSample`), each task sampling its partitions at
  their positions in the single-process order, merged in the tree reduction: the sample one
  process reading the files in order keeps, for exact DTSL's logistic conditionals.
- :func:`dask_client`: ``local[N]`` (a LocalCluster of N single-threaded worker processes, BLAS
  and numba pinned to one thread each) or a scheduler address.

Dask (``dask`` and ``distributed``, the ``dask`` extra) is imported only when a client is made.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import pyarrow.parquet as pq

from streammn.connectors.arrow import record_batch_rows
from streammn.connectors.files import read_errors
from streammn.connectors.parquet import ParquetSource
from streammn.schema import Schema, Validated
from streammn.stream.source import SourceError, SourceUnavailable
from streammn.stats import MarginalCounts
from streammn.trees.exact import SamplingPasses
from streammn.trees.forest import Forest
from streammn.trees.leaf_stats import LeafStats
from streammn.errors import DistributedError

__all__ = [
    "DaskPasses",
    "DistributedError",
    "PARTITION_KINDS",
    "PINNED_ENV",
    "Partition",
    "count_statistics",
    "dask_client",
    "group_partitions",
    "n_batches",
    "parquet_partitions",
    "read_partitions",
]

PARTITION_KINDS = ("row_group", "file")
# One thread per worker process for every threading layer a task might touch.
PINNED_ENV = {
    "NUMBA_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


@dataclass(frozen=True)
class Partition:
    """Row groups ``row_groups`` of the Parquet file ``path``: ``n_rows`` rows starting at row
    ``first_row`` of the file (for error messages)."""

    path: str
    row_groups: tuple[int, ...]
    first_row: int
    n_rows: int


def _parquet(data, schema: Schema | None = None) -> ParquetSource:
    if isinstance(data, ParquetSource):
        return data
    if hasattr(data, "schema") and hasattr(data, "describe"):  # another kind of Source
        raise DistributedError(f"{data.describe()}: Dask passes read Parquet datasets only")
    return ParquetSource(data, schema=schema)


def parquet_partitions(data, by: str = "row_group") -> list[Partition]:
    """The partitions of a Parquet dataset (a :class:`ParquetSource`, file, directory or glob),
    in the order a single process reads them: one per row group, or one per file."""
    if by not in PARTITION_KINDS:
        raise DistributedError(f"by must be one of {PARTITION_KINDS}, got {by!r}")
    out = []
    for path in _parquet(data).paths:
        md = pq.ParquetFile(path).metadata
        sizes = [md.row_group(g).num_rows for g in range(md.num_row_groups)]
        starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        if by == "file":
            out.append(Partition(path, tuple(range(len(sizes))), 0, int(starts[-1])))
        else:
            out.extend(Partition(path, (g,), int(starts[g]), sizes[g]) for g in range(len(sizes)))
    return out


def group_partitions(partitions: list[Partition], n_groups: int) -> list[list[Partition]]:
    """Cut the partitions into ``min(n_groups, len(partitions))`` contiguous, non-empty groups
    of similar row counts."""
    n = max(1, min(int(n_groups), len(partitions)))
    cum = np.cumsum([p.n_rows for p in partitions], dtype=np.float64)
    total = float(cum[-1]) if cum.size else 0.0
    cuts = [0]
    for g in range(1, n):  # group g-1 ends with the partition where the g-th n-tile is reached
        end = int(np.searchsorted(cum, total * g / n, side="left")) + 1
        cuts.append(min(max(end, cuts[-1] + 1), len(partitions) - (n - g)))
    cuts.append(len(partitions))
    return [partitions[a:b] for a, b in zip(cuts[:-1], cuts[1:])]


def read_partitions(
    parts: list[Partition], schema: Schema, columns: list[str], batch_size: int
) -> Iterator[np.ndarray]:
    """Validated ``uint8`` row blocks of the given partitions (what a task reads)."""
    for part in parts:
        with read_errors(part.path):
            pf = pq.ParquetFile(part.path)
            row = part.first_row
            for rb in pf.iter_batches(
                batch_size=batch_size,
                row_groups=list(part.row_groups),
                columns=columns,
                use_threads=False,
            ):
                yield from record_batch_rows(rb, schema, row_offset=row, source=part.path)
                row += rb.num_rows


def n_batches(data) -> int:
    """Batches a single-process :class:`ParquetSource` yields (batches never span files)."""
    source = _parquet(data)
    return sum(-(-pq.ParquetFile(p).metadata.num_rows // source.batch_size) for p in source.paths)


# tree reduction -------------------------------------------------------------------------------
def _tree_reduce(client, futures: list, combine: Callable):
    """Combine futures pairwise on the workers until one is left; return its result."""
    if not futures:
        raise DistributedError("nothing to reduce: the dataset has no partitions")
    while len(futures) > 1:
        paired = [
            client.submit(combine, futures[i], futures[i + 1], pure=False)
            for i in range(0, len(futures) - 1, 2)
        ]
        if len(futures) % 2:
            paired.append(futures[-1])
        futures = paired
    return futures[0].result()


def _default_groups(client) -> int:
    # one group per worker thread: every task returns the statistics of the whole frontier,
    # so more tasks mean more bytes to move and add, not more parallelism
    return max(1, sum(client.nthreads().values()))


# statistics -----------------------------------------------------------------------------------
def _count_task(factory, schema, columns, batch_size, parts):
    store = factory(schema)
    for rows in read_partitions(parts, schema, columns, batch_size):
        store.update(Validated(rows, schema))  # read_partitions validated them
    return store


def _merge_stores(a, b):
    return copy.deepcopy(a).merge(b)  # inputs stay untouched: a retried task sees them intact


def count_statistics(
    data,
    store_factory: Callable,
    client,
    by: str = "row_group",
    n_tasks: int | None = None,
    schema: Schema | None = None,
):
    """Count a statistics store over a Parquet dataset with Dask tasks, merged in a tree.

    ``data``: a :class:`ParquetSource`, or a file, directory or glob of Parquet files (read with
    ``schema`` or the schema of its first file). ``store_factory(schema)`` makes an empty store
    (a store class such as :class:`~streammn.stats.MarginalCounts`, or a ``functools.partial``
    fixing its settings). ``by``: partition per ``"row_group"`` or per ``"file"``; ``n_tasks``
    task groups (default: one per worker thread). Returns the merged store, equal
    to one store updated with every row of the dataset.
    """
    source = _parquet(data, schema)
    groups = group_partitions(parquet_partitions(source, by), n_tasks or _default_groups(client))
    futures = [
        client.submit(
            _count_task,
            store_factory,
            source.schema,
            source.columns,
            source.batch_size,
            parts,
            pure=False,
        )
        for parts in groups
    ]
    return _tree_reduce(client, futures, _merge_stores)


# exact DTSL passes ----------------------------------------------------------------------------
# Each worker process remembers, per task group of the latest DaskPasses, every row's current node
# in every tree ({(token, group): row_node}), so a pass moves rows down one level instead of
# routing them from the roots (as SourcePasses does in one process). Nodes are only ever split,
# so a remembered node is an ancestor of the row's leaf, however stale: a task that finds no
# entry (another worker ran it before, or the budget is spent) still counts the same statistics.
_ROW_NODES: dict[tuple[str, int], np.ndarray] = {}
_ROW_NODES_LOCK = threading.Lock()


def _remembered_nodes(
    key: tuple[str, int], n_rows: int, roots: np.ndarray, cache_bytes: int
) -> np.ndarray | None:
    """This worker's row -> node table for task group ``key``, made (at the roots) if the
    worker's tables stay within ``cache_bytes``; None when they would not."""
    with _ROW_NODES_LOCK:
        for old in [k for k in _ROW_NODES if k[0] != key[0]]:  # an earlier learner's tables
            del _ROW_NODES[old]
        table = _ROW_NODES.get(key)
        if table is None:
            used = sum(t.nbytes for t in _ROW_NODES.values())
            if used + n_rows * roots.shape[0] * 4 > cache_bytes:
                return None
            table = _ROW_NODES[key] = np.repeat(roots[:, None], n_rows, axis=1)
        return table


def _frontier_task(shipment, batch_size, parts, key, cache_bytes):
    """Statistics of the frontier leaves from this task's partitions: (tot, stats) in the
    order of the shipped ``chunk``."""
    schema, columns, prior, state, chunk, trees, dtype = shipment
    forest = Forest.from_state(schema, prior, state)
    forest.slot[:] = -1
    stats = LeafStats(forest, capacity=chunk.shape[0], dtype=dtype, n_threads=1)
    stats.activate(chunk)
    row_node = _remembered_nodes(key, sum(p.n_rows for p in parts), forest.roots, cache_bytes)
    offset = 0
    for rows in read_partitions(parts, schema, columns, batch_size):
        if row_node is None:
            stats.add(rows, count_leaves=False, trees=trees)
        else:
            view = row_node[:, offset : offset + rows.shape[0]]
            if view.shape[1] != rows.shape[0]:
                raise SourceError(f"{parts[-1].path}: more rows than its metadata declares")
            stats.add_cached(rows, trees, view)
        offset += rows.shape[0]
    slots = forest.slot[chunk].astype(np.int64)
    return stats.tot[slots], stats.stats[slots]


def _add_leaf_stats(a, b):
    return a[0] + b[0], a[1] + b[1]


def _sample_task(sample, schema, columns, batch_size, parts, first):
    """This task's partitions offered to a copy of the empty ``sample``, the first row at
    stream position ``first``."""
    sample, end = copy.deepcopy(sample), first + sum(p.n_rows for p in parts)
    for rows in read_partitions(parts, schema, columns, batch_size):
        sample.update(rows, first)
        first += rows.shape[0]
    if first != end:  # the positions come from the metadata: they must hold
        raise SourceError(
            f"{parts[-1].path}: {first - end:+,} rows against what its metadata declares"
        )
    return sample


class DaskPasses(SamplingPasses):
    """Exact-DTSL passes on a Dask cluster: ``DTSL(..., mode='exact').fit(source,
    count_pass=DaskPasses(client, source))`` grows the same trees as ``fit(source)``.

    Parameters
    ----------
    client : distributed.Client
        The cluster to run on (see :func:`dask_client`).
    data : ParquetSource, path, directory or glob
        The Parquet dataset (the same rows the learner's source reads).
    by : {'row_group', 'file'}, default 'row_group'
        Partition granularity.
    n_tasks : int or None, default None
        Task groups per pass (default: one per worker thread).
    cache_bytes : int, default 256 MiB
        Per worker process: memory for remembering each row's node between passes (4 bytes
        per row and variable), so deep trees cost no more per level than shallow ones. Group
        ``i`` is sent to the same worker every pass so that it finds its table there.
    """

    def __init__(
        self,
        client,
        data,
        by: str = "row_group",
        n_tasks: int | None = None,
        cache_bytes: int = 256 * 2**20,
    ):
        self.client = client
        self.source = _parquet(data)
        self.by = by
        self.n_tasks = n_tasks
        self.cache_bytes = int(cache_bytes)
        self.groups = group_partitions(
            parquet_partitions(self.source, by), n_tasks or _default_groups(client)
        )
        workers = sorted(client.nthreads())  # asks the scheduler, like _default_groups
        # where group i goes every pass ({} when no worker is known yet: anywhere)
        self.homes = [
            {"workers": [workers[i % len(workers)]], "allow_other_workers": True} if workers else {}
            for i in range(len(self.groups))
        ]
        self.token = uuid.uuid4().hex
        self.n_passes = 0

    def __repr__(self) -> str:
        return f"DaskPasses({self.source.describe()}, by={self.by!r}, n_tasks={self.n_tasks!r})"

    def count_rows(self) -> int:
        """The dataset's rows, counted (and validated) by tasks on the cluster."""
        return count_statistics(self.source, MarginalCounts, self.client).n_rows

    @property
    def n_batches(self) -> int:
        """Batches a single process would read (:func:`n_batches`)."""
        return n_batches(self.source)

    def end_position(self, n_rows: int) -> dict:
        """The position a single process reading all ``n_rows`` rows ends at."""
        return {"file_index": len(self.source.paths), "row": 0, "offset": int(n_rows)}

    def offer_rows(self, sample) -> None:
        """Every row of the dataset into the empty mergeable ``sample`` (a
        :class:`~streammn.logistic.sample.PositionSample`): each task group samples its rows at
        their positions in the order a single process reads them (the groups are contiguous,
        in that order), and the groups' samples merge in a tree reduction; ``sample`` ends as
        one process offering every row would leave it. Not a pass: ``n_passes`` stays."""
        src = self.source
        sizes = [sum(p.n_rows for p in parts) for parts in self.groups]
        firsts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)[:-1]])
        futures = [
            self.client.submit(
                _sample_task,
                sample,
                src.schema,
                src.columns,
                src.batch_size,
                parts,
                int(first),
                pure=False,
            )
            for parts, first in zip(self.groups, firsts)
        ]
        sample.merge(_tree_reduce(self.client, futures, _merge_stores))

    def __call__(
        self, forest: Forest, stats: LeafStats, chunk: np.ndarray, trees: np.ndarray
    ) -> None:
        src = self.source
        shipment = (
            src.schema,
            src.columns,
            forest.prior,
            forest.get_state(),
            np.asarray(chunk, dtype=np.int32),
            np.asarray(trees, dtype=np.int64),
            stats.dtype,
        )
        [shipped] = self.client.scatter([shipment], broadcast=True, hash=False)
        futures = [
            self.client.submit(
                _frontier_task,
                shipped,
                src.batch_size,
                parts,
                (self.token, i),
                self.cache_bytes,
                pure=False,
                **self.homes[i],
            )
            for i, parts in enumerate(self.groups)
        ]
        tot, leaf_stats = _tree_reduce(self.client, futures, _add_leaf_stats)
        slots = forest.slot[chunk].astype(np.int64)
        stats.tot[slots] += tot
        stats.stats[slots] += leaf_stats
        self.n_passes += 1


# clusters -------------------------------------------------------------------------------------
_LOCAL = re.compile(r"local(?:\[(\d+)\])?")


@contextmanager
def dask_client(spec: str = "local", timeout: float = 10.0):
    """A Dask client for ``spec``, closed (with its cluster) on exit.

    ``local[N]`` starts a LocalCluster of ``N`` worker processes with one thread each and
    numba/BLAS pinned to one thread (``local``: one per CPU); anything else is the address of a
    running scheduler (``tcp://host:8786``). An unreachable scheduler raises
    :class:`~streammn.stream.source.SourceUnavailable` after ``timeout`` seconds.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise DistributedError(
            "Dask is not installed: pip install 'streammn[dask]' (dask and distributed)"
        ) from None
    m = _LOCAL.fullmatch(spec.strip())
    if m:
        n = int(m.group(1)) if m.group(1) else (os.cpu_count() or 1)
        if n < 1:
            raise DistributedError(f"{spec}: a local cluster needs at least one worker")
        with (
            LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.ERROR,
                env=PINNED_ENV,
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
        return
    if spec.startswith("local"):
        raise DistributedError(f"{spec!r}: write local or local[N] with N workers")
    try:
        client = Client(spec, timeout=timeout)
    except (OSError, TimeoutError) as e:
        raise SourceUnavailable(f"Dask scheduler {spec} unreachable ({e})") from e
    with client:
        yield client
