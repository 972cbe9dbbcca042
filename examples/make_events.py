"""Write ``events.csv``: web-session events as a service would log them, for the quick start.

Each row is one session: the visitor's ``country`` and ``device`` (words), whether they are
``returning`` and whether they ``clicked`` (booleans), and the page's ``latency_ms`` (a number).
Some device and latency cells are blank (not logged). Clicks depend on the device and on
returning visitors, latency on the device and the country, so a learner has edges to find.
The seed is fixed: running it again writes the same file.

    python examples/make_events.py            # writes examples/events.csv
    streammn learn examples/events.csv --out snaps --missing
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

COUNTRIES = ["US", "DE", "FR", "IN", "BR"]
DEVICES = ["mobile", "desktop", "tablet"]


def events(n_rows: int = 400, seed: int = 0) -> list[dict]:
    """``n_rows`` sessions drawn with ``seed``."""
    rng = np.random.default_rng(seed)
    country = rng.choice(COUNTRIES, n_rows, p=[0.4, 0.2, 0.15, 0.15, 0.1])
    device = rng.choice(DEVICES, n_rows, p=[0.55, 0.35, 0.1])
    returning = rng.random(n_rows) < 0.4
    p_click = 0.15 + 0.35 * returning + 0.2 * (device == "desktop")
    clicked = rng.random(n_rows) < p_click
    base = np.where(device == "mobile", 180.0, 60.0) * np.where(country == "IN", 2.0, 1.0)
    latency = np.round(rng.gamma(2.0, base / 2.0), 1)
    device_blank = rng.random(n_rows) < 0.05
    latency_blank = rng.random(n_rows) < 0.05
    return [
        {
            "country": country[i],
            "device": "" if device_blank[i] else device[i],
            "returning": "true" if returning[i] else "false",
            "clicked": "true" if clicked[i] else "false",
            "latency_ms": "" if latency_blank[i] else f"{latency[i]:g}",
        }
        for i in range(n_rows)
    ]


def main(path: str | Path = Path(__file__).with_name("events.csv"), n_rows: int = 400) -> Path:
    rows = events(n_rows)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return Path(path)


if __name__ == "__main__":
    print(f"wrote {main(*sys.argv[1:2])}")
