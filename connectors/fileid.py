"""Which files a file source's position covers, told by content, so resume cannot be fooled.

A snapshot of a run over files records, in the source position, an identity for every file the
run has read so far (the current one included). A resumed run checks those files before it
continues: the files already learned must still be there, in the same order, unchanged.

Path strings cannot tell that. The same file reached through a symlinked directory or copied
elsewhere is the same input; a different file with the same relative name (the run resumed from
another working directory) is not. A file is therefore identified by its size and the SHA-256 of
its first and last 64 KiB: two short reads per file whatever its size, and a changed size, head or
tail (a replaced, truncated, appended or re-ordered file, a new file sorting before the ones
learned) is caught. What it misses, an edit confined to the middle of a file over 128 KiB that
keeps its size, a full hash would catch only at the price of reading every file twice.

New files that sort after everything the position covers are not a change: a resumed run learns
them, as an uninterrupted run over the grown input would.
"""

from __future__ import annotations

import hashlib
import os

ENDS_BYTES = 1 << 16


def file_identity(path: str) -> list:
    """``[path, size in bytes, SHA-256 hex of the first and last ENDS_BYTES]`` of a file; the
    path is kept for messages only and never compared."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        h.update(f.read(ENDS_BYTES))
        if size > ENDS_BYTES:
            f.seek(max(ENDS_BYTES, size - ENDS_BYTES))
            h.update(f.read(ENDS_BYTES))
    return [path, size, h.hexdigest()]


def first_changed_file(paths: list[str], recorded: list, identity) -> str | None:
    """A message naming the first of ``recorded`` (identities of files 0..k of a run) that
    ``paths`` no longer holds at the same index, or None when all match. ``identity(k)`` gives
    the current identity of ``paths[k]`` (cached by the caller)."""
    for k, entry in enumerate(recorded):
        old_path, old_size, old_digest = entry
        if k >= len(paths):
            return (
                f"the snapshot's run read {len(recorded)} files, this source has "
                f"{len(paths)}: {old_path} (its file {k}) is gone"
            )
        _, size, digest = identity(k)
        if (size, digest) != (old_size, old_digest):
            what = f"{size} bytes, was {old_size}" if size != old_size else "same size, other bytes"
            return (
                f"file {k} of this source, {paths[k]}, is not the file {old_path} the "
                f"snapshot's run read as file {k} ({what})"
            )
    return None
