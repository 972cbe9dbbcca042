"""What a ``MODEL`` argument names, loaded: the one place that reads any model spec.

A model spec is a snapshot root (its newest valid snapshot), one snapshot directory,
``<root>/latest``, or a model file: ``.json``, ``.mn``, ``.uai`` (a Markov network), ``.dn`` (a
dependency network) or ``.et`` (an ensemble-of-trees density). Every command that reads a model
(``score``, ``convert``, ``sample``, ``inspect``) goes through :func:`load_model`, or, for
``score``, which also takes the exact likelihood of an ET density, :func:`load_model_and_density`;
the file formats themselves are :mod:`streammn.formats`'.

A snapshot is read through :func:`streammn.stream.snapshot.with_snapshot`, every file it needs read
in one go: a learner writing into the root (its ``--keep`` removing older snapshots) may remove the
snapshot under the reader, and that snapshot is then passed over for the newest, never called
corrupt; what ``score`` needs comes from one snapshot, not from two read one after the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from streammn.dn import DependencyNetwork
from streammn.errors import ModelFileMissing, ModelFormatError
from streammn.features import FeatureSet
from streammn.formats import MODEL_FILES, read_model
from streammn.network.model import MarkovNetwork
from streammn.stream.snapshot import LATEST, Snapshot, with_snapshot

DENSITY_SUFFIX = ".et"  # an ET density file, alone or in a snapshot (streammn.et.learner.ET_FILE)


def is_snapshot_spec(spec) -> bool:
    """Whether ``spec`` names snapshots (a directory or ``<root>/latest``), not a model file."""
    path = Path(spec)
    return path.is_dir() or path.name.lower() == LATEST.lower()


def load_model(spec):
    """The model ``spec`` names, with its snapshot's manifest (None for a model file):
    ``(MarkovNetwork or DependencyNetwork, manifest or None)``."""
    if is_snapshot_spec(spec):
        return with_snapshot(spec, _network)
    schema, body = read_model(spec)
    if isinstance(body, list):
        return DependencyNetwork(schema, body), None
    return MarkovNetwork(schema, body), None


def load_model_and_density(spec):
    """What ``score`` reads of ``spec``: ``(model or None, density or None)``, both from the same
    snapshot when ``spec`` names snapshots. The model is None for a ``.et`` file; the ET density
    is None unless ``spec`` is a ``.et`` file or a snapshot that holds one."""
    path = Path(spec)
    if path.suffix.lower() == DENSITY_SUFFIX:
        if not path.is_file():
            what = "not a model file" if path.exists() else "no such model file"
            raise (ModelFormatError if path.exists() else ModelFileMissing)(what, path=path)
        return None, _density(path.read_bytes(), str(path))
    if is_snapshot_spec(spec):
        return with_snapshot(spec, lambda snap: (_network(snap)[0], _snapshot_density(snap, spec)))
    return load_model(spec)[0], None


def _network(snap: Snapshot):
    schema, features = read_model(snap.file(MODEL_FILES["json"]))
    # (a list of FeatureSets is a .dn file's)
    return MarkovNetwork(schema, cast(FeatureSet, features)), snap.manifest


def _snapshot_density(snap: Snapshot, spec):
    """The ET density a snapshot holds, or None; the ET package (numba kernels) is imported
    only for a snapshot that has one."""
    names = [name for name in snap.files if Path(name).suffix == DENSITY_SUFFIX]
    return _density(snap.file(names[0]).read_bytes(), str(spec)) if names else None


def _density(data: bytes, where: str):
    from streammn.et import ETDensity  # the ET package loads numba kernels: only when asked

    return ETDensity.from_bytes(data, where=where)
