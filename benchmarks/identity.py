"""Hash the model files of ten ``streammn learn`` setups, to show a refactoring changed no model.

Each setup runs the command on a dataset of ``../shared/data`` into a scratch directory and
hashes every model file of every snapshot it wrote (``model.json``, ``model.mn``, ``model.uai``,
``model.et``). Run it before and after a change (e.g. from two ``git worktree`` checkouts) and
compare the JSON it writes::

    python benchmarks/identity.py --out before.json     # on the old commit
    python benchmarks/identity.py --out after.json      # on the new one
    cmp before.json after.json

The setups cover every learner, both DTSL modes, drift and forgetting, a fixed ``kappa``, both
kinds of published weights and the three model formats.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
NLTCS = DATA / "nltcs" / "nltcs.train.data"
MUSHROOMS = DATA / "mushrooms" / "mushrooms.train.data"

SETUPS = {
    "dtsl-hoeffding": [NLTCS, "--every-rows", "5000"],
    "dtsl-exact": [NLTCS, "--mode", "exact"],
    "dtsl-mushrooms": [MUSHROOMS, "--every-rows", "4000"],
    "dtsl-kappa-closed-form": [NLTCS, "--kappa", "0.01", "--weights", "closed-form"],
    "dtsl-drift-half-life": [NLTCS, "--drift", "page-hinkley", "--half-life", "4000"],
    "dtsl-caps": [
        NLTCS,
        "--max-tree-leaves",
        "8",
        "--split-alpha",
        "0.01",
        "--grace-period",
        "100",
    ],
    "dtsl-exact-mushrooms": [MUSHROOMS, "--mode", "exact", "--weights", "closed-form"],
    "grafting": [NLTCS, "--algo", "grafting", "--update-every", "4000"],
    "csgs": [NLTCS, "--algo", "csgs", "--max-contexts", "500"],
    "et": [NLTCS, "--algo", "et", "--update-every", "4000", "--seed", "3"],
}


def hashes(out: Path) -> dict[str, str]:
    """sha256 of every model file under ``out``, by path relative to it."""
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.glob("snap-*/model.*"))
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file of the hashes")
    args = parser.parse_args()
    result = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, options in SETUPS.items():
            out = Path(scratch) / name
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "streammn.cli",
                    "learn",
                    str(options[0]),
                    "--out",
                    str(out),
                    "--quiet",
                    *map(str, options[1:]),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            result[name] = hashes(out)
            print(f"{name}: {len(result[name])} model files", file=sys.stderr)
    Path(args.out).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
