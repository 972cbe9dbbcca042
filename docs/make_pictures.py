"""Draw the pictures the documentation shows into ``docs/images/``: the network of a learned
model at 5, 16, 69, 180 and 1,000 variables, and the report of a demo run.

The models: ``examples/events.csv`` (named values), nltcs and plants (``../shared/data``,
learned at the defaults), a planted 180-variable logistic network learned from 30,000 of its
rows, and a planted 1,000-variable network with communities drawn as it is. Run from the
repository root: ``python docs/make_pictures.py`` (a few minutes; needs the ``viz`` extra).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
DATA = ROOT.parent / "shared" / "data"


def learned(data: Path, out: Path, *options: str):
    """The Markov network ``streammn learn`` publishes for ``data`` at its defaults."""
    from streammn.cli import main
    from streammn.model_spec import load_model

    if main(["learn", str(data), "--out", str(out), "--quiet", *options]) != 0:
        raise SystemExit(f"learning {data} failed")
    return load_model(str(out))[0]


def planted_learned(n_vars: int, n_rows: int):
    """DTSL's network learned from ``n_rows`` rows of a planted logistic network."""
    from streammn import DTSL, Schema
    from streammn.planted import LogisticBN

    rows = LogisticBN(n_vars, seed=1).sample(n_rows, np.random.default_rng(1))
    return DTSL(Schema.binary(n_vars)).fit(rows).to_markov_network()


def main() -> None:
    from streammn.cli.pictures import draw_network, draw_report
    from streammn.demo import run_demo
    from streammn.planted import planted_communities

    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        models = {
            "network-events.png": learned(
                ROOT / "examples" / "events.csv", tmp / "ev", "--missing"
            ),
            "network-16.png": learned(DATA / "nltcs" / "nltcs.train.data", tmp / "nltcs"),
            "network-69.png": learned(DATA / "plants" / "plants.train.data", tmp / "plants"),
            "network-180.png": planted_learned(180, 30_000),
            "network-1000.png": planted_communities(1000),
        }
        for name, model in models.items():
            drawn = draw_network(model, IMAGES / name)
            print(f"{name}: {drawn}", file=sys.stderr)
        run_demo(str(tmp / "demo"), n_rows=200_000)
        draw_report(tmp / "demo", IMAGES / "report.png")


if __name__ == "__main__":
    main()
