"""Model file formats: streammn JSON, Libra ``.mn`` / ``.dn`` and UAI ``MARKOV``.

Every reader and writer works on a :class:`~streammn.schema.Schema` plus a
:class:`~streammn.features.FeatureSet` (a Markov network) or a list of per-variable feature
sets (a dependency network), so the formats do not depend on the model classes built on top of them.
:func:`write_model` and :func:`read_model` choose the format by file suffix:

========  ================================  =====================================
suffix    format                            round trip
========  ================================  =====================================
.json     streammn JSON (versioned)          identical (names, order, weights)
.mn       Libra Markov network              identical weights and features in
                                            canonical form; names not stored
.uai      UAI MARKOV factor tables          same distribution (table entries)
.dn       Libra dependency network (read)   one CPD feature set per variable
========  ================================  =====================================

:func:`model_files` is the one place that decides which of these files a snapshot holds: the
formats asked for, less UAI when its tables would be too large to be of use (a conjunction over
k variables needs a full table over them), with the reason recorded.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from streammn.errors import ModelFileMissing, SettingsError
from streammn.features import FeatureSet
from streammn.formats.errors import ModelFormatError, ModelWriteError
from streammn.formats.libra import read_libra_dn, read_libra_mn, write_libra_dn, write_libra_mn
from streammn.formats.native import read_json, write_json
from streammn.formats.uai import UAI_MAX_ENTRIES, UaiFactors, read_uai, write_uai
from streammn.schema import Schema

# What each kind of model is written as: the one list that ``write_model``'s refusals and
# ``streammn convert --help`` give (``SUFFIX_HELP``, tested against the help).
MN_SUFFIXES = (".json", ".mn", ".uai")
DN_SUFFIXES = (".dn",)
SUFFIX_HELP = (
    f"{', '.join(MN_SUFFIXES[:-1])} or {MN_SUFFIXES[-1]} "
    f"(a dependency network: {', '.join(DN_SUFFIXES)})"
)
_WRITERS: dict[str, Callable[..., None]] = {
    ".json": write_json,
    ".mn": write_libra_mn,
    ".uai": write_uai,
    ".dn": write_libra_dn,
}
MODEL_FILES = {"json": "model.json", "mn": "model.mn", "uai": "model.uai"}
SNAPSHOT_UAI_MAX_ENTRIES = UAI_MAX_ENTRIES  # one limit: snapshots refuse what convert refuses
_READERS: dict[str, Callable[..., Any]] = {
    ".json": read_json,
    ".mn": read_libra_mn,
    ".uai": read_uai,
    ".dn": read_libra_dn,
}


def _suffix(path, table: dict, action: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in table:
        raise ModelFormatError(
            f"cannot {action} a model with suffix {suffix or '(none)'!r}; "
            f"use one of {', '.join(table)}",
            path=path,
        )
    return suffix


def write_model(
    path: str | os.PathLike, schema: Schema, features: FeatureSet | Sequence[FeatureSet], **options
) -> None:
    """Write a model in the format named by ``path``'s suffix (.json, .mn, .uai, .dn).

    ``features`` is a FeatureSet, or for ``.dn`` a list of per-variable CPD feature sets.
    ``options`` go to the format's writer (e.g. ``merge=False`` for .uai). The file is written
    under a temporary name in the same directory and renamed into place, so an existing file
    is never left half-overwritten; it gets the mode any new file gets (``0666`` less the
    umask, as snapshot files), not the ``0600`` of a temporary file.
    """
    dependency = not isinstance(features, FeatureSet)
    suffix = Path(path).suffix.lower()
    if suffix not in (DN_SUFFIXES if dependency else MN_SUFFIXES):
        kind = "dependency network" if dependency else "Markov network"
        raise ModelFormatError(
            f"cannot write a {kind} with suffix {suffix or '(none)'!r}; use {SUFFIX_HELP}",
            path=path,
        )
    writer = _WRITERS[suffix]
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=Path(path).suffix, dir=directory)
    except OSError as e:
        raise ModelWriteError(f"{path}: cannot write here ({e.strerror}: {directory})") from None
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        writer(tmp, schema, features, **options)
        os.replace(tmp, path)
    except ModelFormatError as e:
        os.unlink(tmp)
        raise ModelFormatError(e.reason, path=path, line=e.line) from None
    except OSError as e:  # disk full, a directory at ``path``
        os.unlink(tmp)
        raise ModelWriteError(f"{path}: cannot write ({e.strerror or e})") from None
    except BaseException:
        os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o22)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


def read_model(
    path: str | os.PathLike, schema: Schema | None = None
) -> tuple[Schema, FeatureSet | list[FeatureSet]]:
    """Read a model file; the format is chosen by suffix.

    Returns ``(schema, FeatureSet)`` for .json, .mn and .uai, and ``(schema, [FeatureSet per
    variable])`` for a .dn dependency network. ``schema`` (not for .json, which stores its own)
    supplies variable names; its cardinalities must match the file (for .json it must equal
    the stored schema). A path that is not there raises :class:`ModelFileMissing` (exit code
    4, as a missing data file), an unknown suffix or a malformed file :class:`ModelFormatError`.
    """
    if not os.path.exists(path) and not Path(path).suffix:  # a snapshot directory, maybe
        raise ModelFileMissing("no such model file or snapshot directory", path=path)
    suffix = _suffix(path, _READERS, "read")
    if not os.path.exists(path):
        raise ModelFileMissing("no such model file", path=path)
    if not os.path.isfile(path):
        raise ModelFormatError("not a model file", path=path)
    if suffix != ".json":
        return _READERS[suffix](path, schema=schema)
    stored, features = read_json(path)
    if schema is not None and schema != stored:
        raise ModelFormatError(
            f"the file's schema {stored!r} differs from the given {schema!r}", path=path
        )
    return stored, features


__all__ = [
    "DN_SUFFIXES",
    "MN_SUFFIXES",
    "SUFFIX_HELP",
    "UAI_MAX_ENTRIES",
    "ModelFormatError",
    "ModelWriteError",
    "read_model",
    "write_model",
    "read_json",
    "write_json",
    "read_libra_mn",
    "write_libra_mn",
    "read_libra_dn",
    "write_libra_dn",
    "read_uai",
    "write_uai",
]


class ModelFiles(dict):
    """Snapshot file entries, ``{file name: function writing it at a path}``, for the model
    formats kept; ``skipped`` gives the reason for each format left out, and ``key`` is a
    digest of the schema and features the files are written from: two models with the same
    key are written as the same files (a snapshot shares them with the previous one)."""

    skipped: dict[str, str]
    key: str


def model_key(schema: Schema, features: FeatureSet) -> str:
    """SHA-256 of a model's schema and feature arrays (conditions and weights, bit for bit)."""
    digest = hashlib.sha256(json.dumps(schema.to_dict(), sort_keys=True).encode())
    for array in (features.weights, features.ptr, features.var, features.val, features.eq):
        digest.update(str(array.dtype).encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def model_files(
    schema: Schema,
    features: FeatureSet,
    formats: Sequence[str] = ("json", "mn", "uai"),
    uai_max_entries: int | None = None,
) -> ModelFiles:
    """The files that hold a Markov network in each of ``formats`` (``json``, the one
    :func:`~streammn.stream.snapshot.load_snapshot` reads, ``mn`` for Libra, ``uai`` for UAI
    MARKOV), to merge with other entries (a learner checkpoint) and pass to
    :meth:`~streammn.stream.snapshot.SnapshotWriter.write`. With ``uai_max_entries``, UAI is left
    out (``skipped`` says why) when its tables would hold more potentials; its factors are grouped
    once, for the check and the file."""
    unknown = [f for f in formats if f not in MODEL_FILES]
    if unknown:
        raise SettingsError(f"unknown model formats {unknown}; choose from {list(MODEL_FILES)}")
    writers = {"json": write_json, "mn": write_libra_mn, "uai": write_uai}
    files, skipped = ModelFiles(), {}
    for f in formats:
        writer = writers[f]
        if f == "uai" and uai_max_entries is not None:
            factors = UaiFactors(schema, features, merge=True)
            if factors.total > uai_max_entries:
                skipped["uai"] = (
                    f"the UAI tables would hold {int(factors.total):,} entries "
                    f"(limit {uai_max_entries:,}); use the .mn or JSON model"
                )
                continue
            writer = functools.partial(write_uai, factors=factors)
        files[MODEL_FILES[f]] = functools.partial(_write_to, writer, schema, features)
    files.skipped = skipped
    files.key = model_key(schema, features)
    return files


def _write_to(writer, schema, features, path) -> None:
    writer(path, schema, features)
