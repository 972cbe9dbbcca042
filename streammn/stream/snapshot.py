"""Atomic, checksummed, numbered snapshot directories, and reading them back safely.

A snapshot is a set of files plus ``manifest.json``; this module does not care what the files
hold. Layout of a snapshot root::

    out/
      snap-000001/  manifest.json  model.json  model.mn  ...
      snap-000002/  ...
      LATEST        "snap-000002\\n": the newest complete snapshot
      .tmp-...      a snapshot (or a deletion) in progress; ignored by readers

:meth:`SnapshotWriter.write` makes a snapshot durable before anyone can see it:

1. files are written into ``.tmp-snap-<n>-<token>/`` in the root, each one fsynced;
2. ``manifest.json`` (sizes and SHA-256 of every file, and a SHA-256 of the manifest's own
   content) is written last and fsynced, then the temporary directory itself;
3. the directory is renamed to ``snap-<n>`` (atomic within one file system) and the root
   fsynced: from here on the snapshot survives a crash;
4. ``LATEST`` is replaced atomically (written as a temporary file, fsynced, renamed over);
   a plain file rather than a symlink because it works on every platform and file system;
5. only then are the oldest snapshots beyond ``keep`` removed, each first renamed to a
   ``.tmp-`` name so that a crash never leaves a half-deleted ``snap-<n>`` behind.

Files a snapshot shares with the one before. A file whose content is the previous snapshot's
(the same bytes; or, for a file made by a callable, the same :class:`Keyed` key, a digest of
what it is made from) is not written again: step 1 hard-links the previous snapshot's file into
the new directory, after checking it against the previous manifest, so a converged model, or a
learner state that did not change, costs a link instead of a rewrite. Each snapshot still
lists, sizes and checksums every file it holds and stays self-contained for every reader (a
hard link is a name of the same file: removing the older snapshot, ``keep=1`` included, leaves
the newer one whole). One file on disk then belongs to several snapshots, so damage to it shows
in each of them, and each refuses it by its checksum. Where hard links are not available (a
file system without them, another device), the file is written as before.
:attr:`SnapshotWriter.last_write` says what the last snapshot wrote and shared, in bytes.

A writer killed at any moment therefore leaves complete snapshots, possibly a ``.tmp-``
directory (removed by the next writer) and a ``LATEST`` naming a complete snapshot (possibly one
older than the newest, or no ``LATEST`` at all if the first snapshot's writer died before it).
So ``LATEST`` is a floor, never the whole answer: readers given a root take the newest
snapshot that validates (manifest and every checksum) among those not older than the one
``LATEST`` names, or among all when ``LATEST`` is missing, garbage or dangling
(:func:`latest_snapshot`); resume takes the newest one that validates
(:func:`latest_valid_snapshot`) and repairs ``LATEST`` (:meth:`SnapshotWriter.point_latest`).
Readers never write: the directory may be read-only to them, and a reader racing a writer could
move ``LATEST`` backwards.

A reader of a root races the writer's retention: with ``keep=1`` the snapshot it has just picked
(by ``LATEST`` or as the newest directory) is removed as soon as the next one is published, maybe
while its checksums are being computed or its model file read. That is not damage, and the one read
path under every reader of a root (:func:`with_snapshot`, :func:`latest_snapshot`,
:func:`latest_valid_snapshot`, and through them :func:`load_snapshot` and the CLI's
:mod:`streammn.model_spec`) tells it apart: a failure to read a snapshot whose directory (or a file
it had checked) is gone since, or, for a file not found, while a newer snapshot has appeared (a
file system whose view of the directory lags its contents, like NFS), starts the read over from the
then-newest snapshot, up to ``READ_ATTEMPTS`` times (then :class:`SnapshotVanished`, exit code 4).
A file present with the wrong size or checksum, or missing while nothing newer exists, is damage,
refused as before. The writer's order keeps this window to one rename: the newer snapshot is
published (and ``LATEST`` moved) before the older is renamed away, whole, and only then emptied.

The manifest checks itself: ``manifest_sha256`` is the SHA-256 of the manifest's canonical JSON
(sorted keys, no spaces) without that key, so a flipped bit that still parses (a row count, an
offset) is refused like a damaged file. Format version 1 manifests (no self-checksum, written by
streammn 0.1) are still read.

One writer per root directory at a time: a writer holds an exclusive ``fcntl`` lock on
``.lock`` in the root while it writes, and a learning run holds it from start to end
(:meth:`SnapshotWriter.acquire`), so a second run into the same directory fails at once with
:class:`SnapshotDirectoryBusy` instead of interleaving its snapshots with the first's. The
kernel drops the lock when its process dies, so a SIGKILLed run never leaves a stale lock.
Readers never take it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import time
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Mapping, TypeVar, Union

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; one writer per directory is then on the user
    fcntl = None  # type: ignore[assignment]


from streammn import __version__

if TYPE_CHECKING:
    from streammn.network.model import MarkovNetwork
from streammn.features import FeatureSet, distinct_sorted
from streammn.formats import MODEL_FILES, model_files, read_json  # noqa: F401 (re-exported)
from streammn.schema import Schema
from streammn.errors import (
    SettingsError,
    SnapshotDirectoryBusy,
    SnapshotError,
    SnapshotMissingFile,
    SnapshotNameError,
    SnapshotVanished,
    SnapshotWriteFailed,
)

FORMAT = "streammn-snapshot"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)  # 1: before the manifest's self-checksum
MANIFEST = "manifest.json"
LATEST = "LATEST"
LOCK = ".lock"
ORPHAN_WAIT_S = 60.0  # longest wait for the writer of a killed run to finish its snapshot
READ_ATTEMPTS = 20  # reads of a root started over when its writer removes the snapshot being read
RETRY_PAUSE_S = 0.1  # the longest pause between two of them (they start at none, then 1 ms, ...)
TMP_PREFIX = ".tmp-"
_NAME = re.compile(r"snap-([0-9]{6,})")
MANIFEST_CHECKSUM = "manifest_sha256"
_RESERVED = (
    "format",
    "format_version",
    "streammn_version",
    "created",
    "sequence",
    "files",
    MANIFEST_CHECKSUM,
)

FileContent = Union[bytes, Callable[[Path], None], "Keyed"]


@dataclass(frozen=True)
class Keyed:
    """A snapshot file made by ``write`` (a callable given the path to create), known before it
    is made by ``key``: a digest of what it is made from. A snapshot whose previous snapshot
    holds a file of the same name and key shares that file instead of making it again."""

    key: str
    write: Callable[[Path], None]


T = TypeVar("T")


RESUME_HINT = "--resume continues from it"  # failure messages end with one of these two
NO_SNAPSHOT = "no snapshot was completed"


def _alive(pid: str) -> bool:
    """Whether the process ``pid`` (as written in a lock file) exists; an unreadable pid (a
    writer that has just taken the lock) counts as alive."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (ValueError, PermissionError):  # no pid written yet; or someone else's process
        return True
    return True


@dataclass(frozen=True)
class Snapshot:
    """A validated snapshot: its directory and manifest (every listed file checked)."""

    path: Path
    manifest: dict

    @property
    def sequence(self) -> int:
        return int(self.manifest["sequence"])

    @property
    def files(self) -> dict[str, Path]:
        """Every file the manifest lists, by name."""
        return {name: self.path / name for name in self.manifest["files"]}

    def file(self, name: str) -> Path:
        if name not in self.manifest["files"]:
            raise SnapshotError(
                f"the snapshot has no file {name!r} "
                f"(it has {', '.join(sorted(self.manifest['files']))})",
                self.path,
            )
        return self.path / name


# durable writing ----------------------------------------------------------------------------
def _fsync_dir(path: Path) -> None:
    if os.name == "nt":  # directories cannot be opened for fsync on Windows; NTFS journals renames
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def _write_durably(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _digest(path: Path) -> tuple[int, str]:
    """Size in bytes and SHA-256 hex digest."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _check_name(name: str) -> None:
    if (
        not isinstance(name, str)
        or not name
        or name in (".", "..", MANIFEST)
        or name.startswith(TMP_PREFIX)
        or "/" in name
        or "\\" in name
        or os.sep in name
    ):
        raise SnapshotNameError(
            f"invalid snapshot file name {name!r}: use a plain file name other than {MANIFEST!r}"
        )


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


class SnapshotWriter:
    """Writes numbered snapshots into ``directory`` atomically, keeping the newest ``keep``.

    Parameters
    ----------
    directory
        The snapshot root; created if missing.
    keep
        How many snapshots to retain (default 5, at least 1). Older ones are removed only
        after a newer one is durable.
    """

    def __init__(self, directory: str | os.PathLike, keep: int = 5):
        if not isinstance(keep, int) or keep < 1:
            raise SettingsError(f"keep must be an integer >= 1, got {keep!r}")
        self.directory = Path(directory)
        self.keep = keep
        self._last = 0
        self._lock: IO[str] | None = None  # the open lock file while this writer holds it
        self.last_write = {"bytes_written": 0, "bytes_shared": 0}  # of the last snapshot

    def acquire(self) -> None:
        """Hold the directory's writer lock until :meth:`release` (or this process ends);
        :class:`SnapshotDirectoryBusy` at once if another writer holds it.

        A run killed while a forked writer (:mod:`streammn.stream.publishing`) was writing leaves
        that writer holding the lock until its snapshot is complete; when the pid in the lock
        file is no longer alive, the lock is waited for (up to ``ORPHAN_WAIT_S``) instead."""
        if self._lock is not None or fcntl is None:  # held already; or no fcntl (Windows)
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        lock = open(self.directory / LOCK, "a+")
        deadline = time.monotonic() + ORPHAN_WAIT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                lock.seek(0)
                holder = lock.read().strip() or "unknown"
                if _alive(holder) or time.monotonic() > deadline:
                    lock.close()
                    raise SnapshotDirectoryBusy(
                        f"{self.directory}: another process (pid {holder}) is writing "
                        f"snapshots here; one writer per snapshot directory"
                    ) from None
                time.sleep(0.05)  # an orphaned writer finishing its snapshot
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        self._lock = lock

    def release(self) -> None:
        """Let another writer have the directory."""
        if self._lock is not None:
            self._lock.close()  # closing the file drops the flock
            self._lock = None

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Hold the lock for a block (kept if it was already held)."""
        held = self._lock is not None
        self.acquire()
        try:
            yield
        finally:
            if not held:
                self.release()

    def __repr__(self) -> str:
        return f"SnapshotWriter(directory={str(self.directory)!r}, keep={self.keep})"

    def write(self, files: Mapping[str, FileContent], manifest: Mapping | None = None) -> Path:
        """Write one snapshot and return its directory.

        ``files`` maps a plain file name to its bytes or to a callable that writes the file
        at the path it is given. ``manifest`` holds the caller's JSON-serialisable metadata
        (rows seen, source position, settings, scores, ...); the keys ``format``,
        ``format_version``, ``streammn_version``, ``created``, ``sequence`` and ``files`` are
        added by the writer and may not be passed.
        """
        manifest = dict(manifest or {})
        clash = [k for k in _RESERVED if k in manifest]
        if clash:
            raise SettingsError(f"manifest keys {clash} are set by the snapshot writer")
        try:
            json.dumps(manifest, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise SettingsError(
                f"the manifest must be JSON-serialisable without NaN/inf: {e}"
            ) from None
        for name in files:
            _check_name(name)
        with self.holding():
            try:
                return self._write(files, manifest)
            except OSError as e:  # disk full, permissions: nothing of the new snapshot is visible
                done = list_snapshots(self.directory)
                intact = (
                    f"the previous snapshot {done[-1].name} is intact and {RESUME_HINT}"
                    if done
                    else NO_SNAPSHOT
                )
                raise SnapshotWriteFailed(
                    f"{self.directory}: cannot write a snapshot ({e.strerror or e}); {intact}"
                ) from e

    def _write(self, files: Mapping[str, FileContent], manifest: dict) -> Path:
        self._prepare_root()

        sequence = max([self._last] + [_sequence(p) for p in list_snapshots(self.directory)]) + 1
        final = self.directory / f"snap-{sequence:06d}"
        tmp = self.directory / f"{TMP_PREFIX}{final.name}-{secrets.token_hex(4)}"
        tmp.mkdir()
        try:
            self._fill(tmp, files, sequence, manifest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)  # best effort; the next writer retries
            raise
        os.rename(tmp, final)
        _fsync_dir(self.directory)
        self._last = sequence
        self.point_latest(final)
        self._retain()
        return final

    def point_latest(self, snapshot: Path) -> None:
        """Make ``LATEST`` name ``snapshot`` (a directory of this root), atomically and durably;
        a ``LATEST`` that already names it is left alone."""
        pointer = self.directory / LATEST
        text = f"{Path(snapshot).name}\n"
        if pointer.is_file() and pointer.read_bytes() == text.encode():
            return
        latest_tmp = self.directory / f"{TMP_PREFIX}{LATEST}-{secrets.token_hex(4)}"
        _write_durably(latest_tmp, text.encode())
        os.replace(latest_tmp, pointer)
        _fsync_dir(self.directory)

    def _fill(
        self, tmp: Path, files: Mapping[str, FileContent], sequence: int, manifest: dict
    ) -> None:
        """Write every file, or share it with the previous snapshot (module doc), then the
        manifest, into ``tmp``, all fsynced."""
        listing = {}
        previous = _previous_files(self.directory)
        written = shared = 0
        for name, content in files.items():
            path = tmp / name
            key = None
            if isinstance(content, Keyed):
                key, content = content.key, content.write
            entry: dict[str, Any]
            if isinstance(content, (bytes, bytearray, memoryview)):
                content = bytes(content)
                entry = {"size": len(content), "sha256": hashlib.sha256(content).hexdigest()}
                if not _share(previous, name, entry, path):
                    _write_durably(path, content)
            else:
                entry = {"key": key} if key is not None else {}
                if key is None or not _share(previous, name, entry, path):
                    content(path)
                    if not path.is_file():
                        raise SnapshotError(
                            f"the writer for {name!r} did not create the file", path
                        )
                    _fsync_file(path)
                    size, sha = _digest(path)
                    entry.update(size=size, sha256=sha)
            if entry.pop("shared", False):
                shared += entry["size"]
            else:
                written += entry["size"]
            listing[name] = entry
        self.last_write = {"bytes_written": written, "bytes_shared": shared}
        doc = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "streammn_version": __version__,
            "created": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
            "sequence": sequence,
            **manifest,
            "files": listing,
        }
        doc[MANIFEST_CHECKSUM] = _manifest_checksum(doc)
        _write_durably(tmp / MANIFEST, (json.dumps(doc, indent=2, allow_nan=False) + "\n").encode())
        _fsync_dir(tmp)

    def _prepare_root(self) -> None:
        """Create the root, and remove what a killed writer left behind (``.tmp-*``)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for entry in self.directory.iterdir():
            if entry.name.startswith(TMP_PREFIX):
                _remove(entry)

    def _retain(self) -> None:
        for old in list_snapshots(self.directory)[: -self.keep]:
            doomed = self.directory / f"{TMP_PREFIX}del-{old.name}-{secrets.token_hex(4)}"
            os.rename(old, doomed)
            _fsync_dir(self.directory)
            shutil.rmtree(doomed)


def _previous_files(root: Path) -> tuple[Path, dict] | None:
    """The newest snapshot of ``root`` and its manifest's file listing, the files a new snapshot
    may share; None when there is none, or its manifest does not load."""
    done = list_snapshots(root)
    if not done:
        return None
    try:
        return done[-1], _load_manifest(done[-1])["files"]
    except (SnapshotError, OSError):
        return None


def _share(previous: tuple[Path, dict] | None, name: str, entry: dict, path: Path) -> bool:
    """Hard-link the previous snapshot's file ``name`` to ``path`` when it holds what ``entry``
    describes (the same size and SHA-256, or the same ``key``) and still checks against its
    manifest; fills in ``entry`` (size, sha256, shared) and says whether it did."""
    if previous is None or name not in previous[1]:
        return False
    old = previous[1][name]
    same = (
        old.get("key") == entry["key"]
        if "key" in entry
        else (old["size"], old["sha256"]) == (entry["size"], entry["sha256"])
    )
    source = previous[0] / name
    try:
        if not same or _digest(source) != (old["size"], old["sha256"]):
            return False  # changed; or the old file is damaged: write a good copy
        os.link(source, path)
    except OSError:  # removed meanwhile, no hard links here, another device: write it
        return False
    entry.update(size=old["size"], sha256=old["sha256"], shared=True)
    return True


# reading ------------------------------------------------------------------------------------
def _sequence(path: Path) -> int:
    return int(_NAME.fullmatch(path.name).group(1))  # type: ignore[union-attr]  # (listed snapshots match)


def list_snapshots(directory: str | os.PathLike) -> list[Path]:
    """The completed snapshot directories ``snap-<n>`` in ``directory``, oldest first.

    Temporary directories are never listed. The snapshots are not validated here (see
    :func:`read_snapshot`). A directory that does not exist has no snapshots.
    """
    root = Path(directory)
    if not root.is_dir():
        return []
    snaps = [p for p in root.iterdir() if _NAME.fullmatch(p.name) and p.is_dir()]
    return sorted(snaps, key=_sequence)


def _manifest_checksum(doc: dict) -> str:
    """SHA-256 of the manifest's canonical JSON, leaving out the checksum itself."""
    body = {k: v for k, v in doc.items() if k != MANIFEST_CHECKSUM}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _load_manifest(path: Path) -> dict:
    mpath = path / MANIFEST
    if not mpath.is_file():
        raise SnapshotMissingFile(
            "missing manifest: the snapshot is partial or not a streammn snapshot", mpath
        )
    try:
        doc = json.loads(_read_bytes(mpath).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SnapshotError(f"unreadable manifest: {e}", mpath) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SnapshotError(
            f'not a streammn snapshot manifest (expected "format": "{FORMAT}")', mpath
        )
    version = doc.get("format_version")
    if version not in READABLE_VERSIONS:
        raise SnapshotError(
            f"unsupported snapshot format version {version!r} (this streammn "
            f"{__version__} reads versions {READABLE_VERSIONS})",
            mpath,
        )
    if version >= 2 and doc.get(MANIFEST_CHECKSUM) != _manifest_checksum(doc):
        raise SnapshotError(
            f"the manifest fails its own checksum ({MANIFEST_CHECKSUM}): it is corrupt or altered",
            mpath,
        )
    files = doc.get("files")
    if (
        not isinstance(files, dict)
        or not isinstance(doc.get("sequence"), int)
        or not all(
            isinstance(v, dict)
            and isinstance(v.get("size"), int)
            and isinstance(v.get("sha256"), str)
            for v in files.values()
        )
    ):
        raise SnapshotError(
            'malformed manifest: needs an integer "sequence" and "files" '
            'mapping names to {"size", "sha256"}',
            mpath,
        )
    for name in files:
        try:
            _check_name(name)
        except ValueError as e:
            raise SnapshotError(str(e), mpath) from None
    return doc


def _gone(error: OSError) -> bool:
    """Whether ``error`` says the file is not there (any more): not found, or a stale NFS handle
    (the file was removed on another machine while this one read it)."""
    return isinstance(error, FileNotFoundError) or error.errno == errno.ESTALE


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        if _gone(e):
            raise SnapshotMissingFile(f"removed while being read ({e.strerror})", path) from None
        raise


def read_snapshot(path: str | os.PathLike) -> Snapshot:
    """Validate the snapshot directory ``path`` (manifest, every file's size and checksum).

    Raises :class:`SnapshotError` naming the offending file for a temporary (unfinished)
    directory, a malformed manifest, or a file that is truncated or fails its checksum;
    :class:`SnapshotMissingFile` (a :class:`SnapshotError`) for a directory, manifest or listed
    file that is not there. This checks one directory once; a reader of a root that a writer
    may be pruning goes through :func:`with_snapshot`.
    """
    path = Path(path)
    if not path.is_dir():
        raise SnapshotMissingFile("no such snapshot directory", path)
    if path.name.startswith(TMP_PREFIX):
        raise SnapshotError(
            "an unfinished snapshot (temporary directory of a writer that did not complete)", path
        )
    doc = _load_manifest(path)
    for name, meta in doc["files"].items():
        fpath = path / name
        if not fpath.is_file():
            raise SnapshotMissingFile("file listed in the manifest is missing", fpath)
        try:
            size, sha = _digest(fpath)
        except OSError as e:
            if _gone(e):
                raise SnapshotMissingFile(
                    f"removed while being read ({e.strerror})", fpath
                ) from None
            raise
        if size != meta["size"]:
            raise SnapshotError(
                f"size {size} bytes, the manifest says {meta['size']}: truncated or altered", fpath
            )
        if sha != meta["sha256"]:
            raise SnapshotError("checksum mismatch: the file is corrupt or altered", fpath)
    return Snapshot(path, doc)


def _latest_target(root: Path) -> Path | None:
    """The snapshot directory ``LATEST`` names, or None when it is missing or garbage."""
    try:
        name = (root / LATEST).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return root / name if _NAME.fullmatch(name) else None


def _newest(root: Path) -> int:
    """The sequence number of the newest snapshot directory in ``root`` (0 for none)."""
    snaps = list_snapshots(root)
    return _sequence(snaps[-1]) if snaps else 0


def _removed(path: Path, names, newest: int | None, not_found: bool) -> bool:
    """Whether a failure to read the snapshot ``path`` came from its writer removing it rather
    than from damage: its directory, or one of the files ``names`` (all present when it was
    validated), is gone now; or, for a failure to find something (``not_found``), the root has
    a snapshot newer than ``newest`` (its newest when ``path`` was picked), as when a file
    system's view of the directory lags its contents (NFS). ``newest`` None: no such test."""
    if not path.is_dir() or not all((path / name).is_file() for name in names):
        return True
    return not_found and newest is not None and _newest(path.parent) > newest


def _pause(attempt: int) -> float:
    """Seconds to wait before attempt ``attempt`` (0-based) of a read: none for the first two
    (the newer snapshot is already published when the older is removed), then doubling from
    1 ms up to ``RETRY_PAUSE_S``, for a file system whose view of the root lags."""
    return 0.0 if attempt < 2 else min(0.001 * 2 ** (attempt - 2), RETRY_PAUSE_S)


def _read_root(root: Path, read: Callable[[Snapshot], T], floor: bool) -> tuple[Snapshot, T] | None:
    """The newest snapshot of ``root`` that validates (not older than the one ``LATEST`` names
    when ``floor``) and ``read`` of it, newer invalid ones skipped with a warning; None when
    ``root`` has no snapshot. A snapshot removed under the reader starts it over, up to
    ``READ_ATTEMPTS`` times, and so does a listing of no snapshot beside a ``LATEST`` (one
    taken while the writer renamed the newest in and the oldest out); an error of ``read`` on
    a snapshot still there is raised as it is, not passed over for an older snapshot."""
    removed = []
    for attempt in range(READ_ATTEMPTS):
        time.sleep(_pause(attempt))
        snaps = list_snapshots(root)
        if not snaps:
            if (root / LATEST).exists():  # a listing taken while the writer swapped snapshots
                continue  # (POSIX readdir need not show entries renamed meanwhile): look again
            return None
        newest = _sequence(snaps[-1])
        target = _latest_target(root) if floor else None
        if target in snaps:
            snaps = snaps[snaps.index(target) :]
        errors = []
        for path in reversed(snaps):
            try:
                snap = read_snapshot(path)
            except SnapshotError as e:
                if _removed(path, (), newest, isinstance(e, SnapshotMissingFile)):
                    removed.append(path.name)
                    break
                errors.append(str(e))
                continue
            try:
                result = read(snap)
            except Exception as e:
                if _removed(path, snap.manifest["files"], newest, isinstance(e, OSError)):
                    removed.append(path.name)
                    break
                raise
            for message in errors:
                warnings.warn(f"skipping invalid snapshot: {message}", stacklevel=3)
            return snap, result
        else:
            raise SnapshotError("no valid snapshot: " + "; ".join(errors), root)
    if not removed:  # only empty listings: a LATEST left behind by snapshots deleted since
        return None
    raise SnapshotVanished(
        f"the snapshot being read was removed by its writer (its --keep) {READ_ATTEMPTS} times "
        f"in a row ({removed[0]} to {removed[-1]}): snapshots are replaced faster than they "
        f"are read; keep more of them or snapshot less often",
        root,
    )


_REMOVED = (
    "the snapshot was removed while being read (its writer keeps only its newest --keep); "
    "name the snapshot root to read its newest"
)


def _read_directory(path: Path, read: Callable[[Snapshot], T]) -> T:
    """``read`` of the snapshot directory ``path`` named on its own: it is not replaced by
    another when it is removed while being read, that is :class:`SnapshotVanished`."""
    there = path.is_dir()
    try:
        snap = read_snapshot(path)
    except SnapshotError:
        if there and _removed(path, (), None, True):
            raise SnapshotVanished(_REMOVED, path) from None
        raise
    try:
        return read(snap)
    except Exception as e:
        if _removed(path, snap.manifest["files"], None, isinstance(e, OSError)):
            raise SnapshotVanished(_REMOVED, path) from None
        raise


def _latest(root: Path, read: Callable[[Snapshot], T]) -> tuple[Snapshot, T]:
    """The snapshot a reader of ``root`` takes and ``read`` of it (:func:`_read_root`, with
    ``LATEST`` as a floor); :class:`SnapshotError` when there is none."""
    found = _read_root(root, read, floor=True)
    if found is None:
        raise SnapshotError(
            f"no snapshot was completed here (no snap-<n> directory; "
            f"{'a stale' if (root / LATEST).exists() else 'no'} {LATEST} file)",
            root,
        )
    return found


def _itself(snap: Snapshot) -> Snapshot:
    return snap


def with_snapshot(path: str | os.PathLike, read: Callable[[Snapshot], T]) -> T:
    """``read(snapshot)`` of the validated snapshot that ``path`` designates, while it is there.

    ``path`` is a snapshot directory, or a root (or its ``LATEST`` file, also spelled
    ``latest``), read as :func:`latest_snapshot` says. ``read`` reads the files it needs from
    the :class:`Snapshot` and returns what it makes of them; it should not keep a path for
    later, when a writer may have removed the snapshot.

    A snapshot of a root removed by its writer's retention (``keep``) while it is validated or
    ``read`` is not damage: the read starts over from the then-newest snapshot, up to
    ``READ_ATTEMPTS`` times, then :class:`SnapshotVanished`. A snapshot directory named on its
    own is not replaced by another: its removal is :class:`SnapshotVanished` at once. Damage is
    :class:`SnapshotError` as :func:`read_snapshot` says, and an error of ``read`` on a snapshot
    still there is raised as it is.
    """
    root = _root_of(Path(path))
    if root is None:
        return _read_directory(Path(path), read)
    return _latest(root, read)[1]


def latest_snapshot(directory: str | os.PathLike) -> Snapshot:
    """The snapshot a reader of the root ``directory`` takes: the newest that validates among
    those not older than the one ``LATEST`` names (all of them when ``LATEST`` is missing,
    garbage or dangling). ``LATEST`` is a floor, not the answer: it lags the newest snapshot
    when a writer died between the two renames, and it still marks the last good snapshot
    when a newer one is damaged (skipped with a warning). A snapshot removed by its writer
    while it is validated is passed over for the then-newest (:func:`with_snapshot`); to read
    its files too, use :func:`with_snapshot`."""
    return _latest(Path(directory), _itself)[0]


def latest_valid_snapshot(directory: str | os.PathLike) -> Snapshot | None:
    """The newest snapshot that validates, for resuming; ``None`` if there are none at all.

    Invalid newer snapshots are skipped with a warning naming the problem; if snapshots exist
    but none is valid, :class:`SnapshotError` lists them rather than silently starting over.
    A snapshot removed by a writer while it is validated is passed over as by
    :func:`with_snapshot`.
    """
    found = _read_root(Path(directory), _itself, floor=False)
    return None if found is None else found[0]


def _root_of(path: Path) -> Path | None:
    """The snapshot root that ``path`` designates (itself, or the parent of its ``LATEST`` /
    ``latest``), or None when ``path`` is not a root."""
    if path.name.lower() == LATEST.lower() and not path.is_dir():
        return path.parent
    if (
        path.is_dir()
        and not (path / MANIFEST).exists()
        and not path.name.startswith(TMP_PREFIX)
        and ((path / LATEST).exists() or list_snapshots(path))
    ):
        return path
    return None


def open_snapshot(path: str | os.PathLike) -> Snapshot:
    """The validated snapshot that ``path`` designates: a snapshot directory, or a root (or its
    ``LATEST`` file, also spelled ``latest``), read by :func:`latest_snapshot`. Its files may
    be removed by a writer after this returns; to read them, use :func:`with_snapshot`."""
    return with_snapshot(path, _itself)


def resolve_snapshot(path: str | os.PathLike) -> Path:
    """The snapshot directory that ``path`` designates (see :func:`open_snapshot`); for a root
    this validates its candidates, for a snapshot directory nothing is checked."""
    root = _root_of(Path(path))
    return Path(path) if root is None else latest_snapshot(root).path


# model files --------------------------------------------------------------------------------
def model_summary(schema: Schema, features: FeatureSet) -> dict:
    """Counts for a manifest: variables, features, and edges (variable pairs that appear
    together in at least one feature)."""
    i, j, _ = features.variable_pairs()
    return {
        "n_vars": schema.n_vars,
        "n_features": int(features.n_features),
        "n_edges": int(distinct_sorted(i * schema.n_vars + j).size),
    }


def load_snapshot(path: str | os.PathLike) -> MarkovNetwork:
    """Validate a snapshot and return its :class:`~streammn.network.model.MarkovNetwork`.

    ``path`` is a snapshot directory, a snapshot root (its ``LATEST`` is followed), a
    ``LATEST`` file or ``<root>/latest``. The model is read from ``model.json``. A snapshot of
    a root that its writer removes meanwhile is not an error: the newest is read instead
    (:func:`with_snapshot`).
    """
    return with_snapshot(path, _network)


def _network(snap: Snapshot) -> MarkovNetwork:
    from streammn.network.model import MarkovNetwork

    return MarkovNetwork(*read_json(snap.file(MODEL_FILES["json"])))
