"""Where the tests find the benchmark datasets: ``$STREAMMN_DATA``, else ``../shared/data``
beside the repository (as on CI)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("STREAMMN_DATA", ROOT.parent / "shared" / "data"))
