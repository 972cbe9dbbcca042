"""Line-level reading of text files, for what pyarrow's CSV reader does not do for us.

pyarrow decodes CSV blocks fast but cannot start at a row: its ``skip_rows`` only skips within
the first block (``Could not skip initial 65536 rows ... header is larger than block size``), so
a resumed source could not seek past the first few MiB of a file. Here a stream is advanced past
``n`` rows by counting newlines in 1 MiB chunks with numpy (independent of any block size,
compressed files included), and the bytes read beyond the last skipped row are handed back so
that the reader can start right after the last skipped row: :func:`open_at` opens the file again
at that byte, as a native pyarrow stream (pyarrow's read-ahead threads then never call back into
Python: a Python file object read from those threads can abort the interpreter at exit).

A row is a non-empty line, as pyarrow counts them (it skips empty lines): ``\\n`` and ``\\r\\n``
endings, a last line without an ending. :func:`next_line` and :func:`data_lines` give the same
rows one by one, for headers and for locating a bad row on the error path only.

A UTF-8 byte order mark at the start of a file (spreadsheet programs write one) is not text:
every reader of a file starts with :func:`skip_bom`, so the first column's name or first cell
never holds it, whether a file is learned from or scored.
"""

from __future__ import annotations

import io
from typing import Iterator

import numpy as np
import pyarrow as pa

CHUNK_BYTES = 1 << 20
NEWLINE, CR = 10, 13
UTF8_BOM = b"\xef\xbb\xbf"


class Rest(io.RawIOBase):
    """A readable file object: ``head`` (bytes already taken from ``stream``), then the rest of
    ``stream``. Closing it closes the stream."""

    def __init__(self, head: bytes, stream):
        super().__init__()
        self._head = memoryview(bytes(head))
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._head.nbytes:
            n = min(len(buffer), self._head.nbytes)
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


class Counted:
    """``stream`` with a count of the bytes read from it (``n_read``)."""

    def __init__(self, stream):
        self._stream = stream
        self.n_read = 0

    def read(self, n: int) -> bytes:
        data = self._stream.read(n)
        self.n_read += len(data)
        return data


def open_at(path: str, offset: int):
    """A native pyarrow input stream of ``path`` (decompressed if compressed) positioned at byte
    ``offset`` of its content: seeking when the file allows, else reading past the bytes."""
    stream = pa.input_stream(path, compression="detect")
    try:
        if stream.seekable():
            stream.seek(offset)
        else:
            left = offset
            while left > 0:
                data = stream.read(min(left, CHUNK_BYTES))
                if not data:  # the file ended before the offset (it changed): at its end
                    break
                left -= len(data)
        return stream
    except BaseException:
        stream.close()
        raise


def skip_bom(stream) -> bytes:
    """Read the start of ``stream`` past a UTF-8 byte order mark, if it has one; returns the
    bytes read that are not one, to hand on as the ``head`` of the functions below."""
    head = b""
    while len(head) < len(UTF8_BOM):
        data = stream.read(len(UTF8_BOM) - len(head))
        if not data:
            break
        head += data
    return b"" if head == UTF8_BOM else head


def _chunks(stream, head: bytes) -> Iterator[bytes]:
    if head:
        yield head
    while chunk := stream.read(CHUNK_BYTES):
        yield chunk


def skip_rows(stream, n: int, head: bytes = b"") -> tuple[int, bytes]:
    """Read ``head`` and then ``stream`` past their first ``n`` rows (non-empty lines).

    Returns ``(skipped, rest)``: the rows skipped (less than ``n`` only when the input ends
    first) and the bytes read beyond the last skipped row's line ending.
    """
    need = int(n)
    if need <= 0:
        return 0, head
    carry = 0  # bytes of the current line seen in earlier chunks
    prev_cr = False  # whether the previous chunk ended with '\r'
    for data in _chunks(stream, head):
        buf = np.frombuffer(data, dtype=np.uint8)
        ends = np.flatnonzero(buf == NEWLINE)
        if ends.size:
            starts = np.empty_like(ends)
            starts[0] = 0
            starts[1:] = ends[:-1] + 1
            lengths = ends - starts
            lengths[0] += carry
            before = ends - 1
            cr = np.zeros(ends.size, dtype=bool)
            inside = before >= 0
            cr[inside] = buf[before[inside]] == CR
            if not inside[0]:
                cr[0] = prev_cr
            rows = np.cumsum(lengths - cr > 0)
            if rows[-1] >= need:
                k = int(np.searchsorted(rows, need))
                return int(n), data[int(ends[k]) + 1 :]
            need -= int(rows[-1])
            carry = buf.size - int(ends[-1]) - 1
        else:
            carry += buf.size
        prev_cr = bool(buf[-1] == CR)
    last = 1 if carry - prev_cr > 0 else 0  # a last line without a line ending
    return int(n) - need + min(last, need), b""


def data_lines(stream, head: bytes = b"") -> Iterator[bytes]:
    """The rows (non-empty lines, endings removed) of ``head`` + ``stream``, one by one."""
    for raw in io.BufferedReader(Rest(head, stream), CHUNK_BYTES):
        line = raw.rstrip(b"\r\n")
        if line:
            yield line


def next_line(stream, head: bytes = b"") -> tuple[bytes | None, bytes]:
    """The first row of ``head`` + ``stream`` (None at the end) and the bytes read after it."""
    pending = head
    while True:
        cut = pending.find(b"\n")
        while cut >= 0:
            line, pending = pending[:cut].rstrip(b"\r"), pending[cut + 1 :]
            if line:
                return line, pending
            cut = pending.find(b"\n")
        chunk = stream.read(CHUNK_BYTES)
        if not chunk:
            line = pending.rstrip(b"\r")
            return (line or None), b""
        pending += chunk
