"""What a ``MODEL`` argument names, loaded: the one place that reads any model spec.

A model spec is a snapshot root (its newest valid snapshot), one snapshot directory,
``<root>/latest``, or a model file: ``.json``, ``.mn``, ``.uai`` (a Markov network), ``.dn`` (a
dependency network) or ``.et`` (an ensemble-of-trees density). Every command that reads a model
(``score``, ``convert``, ``sample``, ``inspect``) goes through :func:`load_model` and, for the
exact likelihood of ET, :func:`load_density`; the file formats themselves are
:mod:`streammn.formats`'.
"""

from __future__ import annotations

from pathlib import Path

from streammn.dn import DependencyNetwork
from streammn.formats import MODEL_FILES, read_model
from streammn.model import MarkovNetwork
from streammn.snapshot import LATEST, open_snapshot


def is_snapshot_spec(spec) -> bool:
    """Whether ``spec`` names snapshots (a directory or ``<root>/latest``), not a model file."""
    path = Path(spec)
    return path.is_dir() or path.name.lower() == LATEST.lower()


def load_model(spec):
    """The model ``spec`` names, with its snapshot's manifest (None for a model file):
    ``(MarkovNetwork or DependencyNetwork, manifest or None)``."""
    if is_snapshot_spec(spec):
        snap = open_snapshot(spec)
        schema, features = read_model(snap.file(MODEL_FILES["json"]))
        return MarkovNetwork(schema, features), snap.manifest
    schema, body = read_model(spec)
    if isinstance(body, list):
        return DependencyNetwork(schema, body), None
    return MarkovNetwork(schema, body), None


def load_density(spec):
    """The ET density of a ``.et`` file or of a snapshot that holds one (else None)."""
    from streammn.et import ETDensity  # the ET package loads numba kernels: only when asked
    from streammn.et.learner import ET_FILE

    path = Path(spec)
    if path.suffix.lower() == ".et":
        return ETDensity.from_bytes(path.read_bytes(), where=str(path))
    if is_snapshot_spec(spec):
        snap = open_snapshot(path)
        if ET_FILE in snap.files:
            return ETDensity.from_bytes(snap.file(ET_FILE).read_bytes(), where=str(path))
    return None
