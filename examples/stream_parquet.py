"""Stream a Parquet file through the engine with snapshots, then load the newest snapshot.

python examples/stream_parquet.py ../shared/data/msnbc_stream/msnbc_stream.data /tmp/snaps
"""

import sys
import tempfile
from pathlib import Path

import streammn
from streammn.connectors import CsvSource, open_source, write_parquet
from streammn.dtsl import DTSL
from streammn.stream.engine import StreamLearner


def main(data: str, out: str) -> streammn.stream.snapshot.Snapshot:
    rows = CsvSource(data).read_all()
    parquet = Path(tempfile.mkdtemp()) / "stream.parquet"
    write_parquet(parquet, rows, streammn.Schema.binary(rows.shape[1]))
    with open_source(parquet, batch_size=10_000) as source:
        learner = DTSL(source.schema, kappa=0.1)
        StreamLearner(source, learner, out, every_rows=25_000).run()
    model = streammn.load_snapshot(out)
    snap = streammn.read_snapshot(streammn.stream.snapshot.resolve_snapshot(out))
    print(
        f"{model}; snapshot {snap.path.name} after {snap.manifest['rows_seen']:,} rows, "
        f"prequential PLL {snap.manifest['scores']['prequential_pll']:.3f}"
    )
    return snap


if __name__ == "__main__":
    args = sys.argv[1:] or [
        "../shared/data/msnbc_stream/msnbc_stream.data",
        tempfile.mkdtemp(prefix="snaps-"),
    ]
    main(*args)
