"""Flat JSON objects of small integers, straight from bytes to ``uint8`` state rows (numba).

The JSON payload of a log message is nearly always the same shape: one flat object mapping
each variable's name to a small integer (``{"x0": 1, "x1": 0, ...}``), with ``null`` or an
absent key for a missing value. General JSON readers pay for generality the shape does not
need. Measured with 100 integer fields (~1 kB a message, 10,000 messages a poll, each ending
at the same validated ``uint8`` matrix; figures in ``benchmarks/results/sources.md``, made on
a shared 2-CPU machine):

- pyarrow's JSON reader over the newline-joined poll against an explicit ``int64`` schema
  (the decoder before this module): 50-100k rows/s, and no faster with ``use_threads=True``
  at any block size;
- orjson, one array per poll: ~40k rows/s (~200k to build the dicts alone);
- msgspec, one array of Structs of 100 optional ints: ~80-120k rows/s (~340k to build
  the structs alone).

Each builds a Python or Arrow object per cell before the state matrix exists; none reaches
the 500k rows/s a learner at 1M+ rows/s needs, so none is used and no dependency is added.
This module makes one numba pass over the joined bytes of a whole poll and writes each
message's states into its final row. The pass runs on one thread (``nogil``): split over
numba's threads it decoded faster alone, but made KafkaSource slower, because the OpenMP
workers spin after each parallel region on the CPU the Kafka client needs (source/raw 0.57
against 1.0 with ``OMP_WAIT_POLICY=passive``, on 2 CPUs). Two paths:

- *layout*: a message parsed with every variable present as one digit (any state below 10)
  becomes the layout for the following ones: a message of the same length whose bytes are
  equal except at the layout's digits, which must be digits in range, has the same parse.
  That check is a branch-free byte comparison that vectorises, then 100 byte loads: ~2M rows/s
  on one core, the common case of one producer writing the same fields in the same order;
- *parse*: any other message is parsed with a strict grammar (~350-500k rows/s on one core
  for values of one or two digits).

The grammar is a deliberately small subset of JSON, and everything outside it is *declined*,
never guessed at: the message is flagged and the caller decodes the flagged messages with
the general reader (pyarrow's, :mod:`streammn.connectors.messages`), which accepts what JSON allows
and raises the located errors for the rest. The kernel accepts, per message:

- optional JSON whitespace, ``{``, members separated by ``,``, ``}``, optional whitespace;
- keys: ``"..."`` without escapes or control characters, equal byte for byte to a variable
  name (UTF-8); each at most once (a repeated key is declined);
- values: ``null``, or digits without a sign, fraction, exponent or leading zero, at most
  18 of them, below the variable's value limit (the cardinality, or the maximum cardinality
  of a growing schema);
- keys absent or ``null`` only in the schema's missing mode (they become
  :data:`~streammn.schema.MISSING`, as the general reader's nulls do).

So a message the kernel accepts is one pyarrow reads to the same row, and every message it
declines (unknown key, string or float value, ``-0``, out of range, escaped key, empty
payload, two objects in one message...) gets exactly the general reader's outcome
(``tests/test_messages_json.py`` checks both on random and mutated messages). Keys are looked
up by first trying the variable after the previous key (producers write fields in a fixed
order, so this almost always hits), then the hash table of the names
(:func:`streammn.schema.text_lookup.find_text`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.schema import MISSING, Schema
from streammn.schema.text_lookup import find_text, text_table

#: at most this many digits, so a value always fits an int64 before its range check
_MAX_DIGITS = 18
#: messages after which the search for a layout starts afresh
_BLOCK = 512
#: after this many messages in a row that fit no layout (keys in varying order, values of
#: varying width), no more layouts are made until the next block of messages
_MAX_MISSES = 8
#: outcomes of parsing a message: outside the grammar; parsed; parsed, and every variable
#: was one digit (its bytes then make a layout for the next messages)
_DECLINED, _PARSED, _LAYOUT = 0, 1, 2


@nb.njit(cache=True, inline="always")
def _is_space(c):
    return c == 32 or c == 10 or c == 13 or c == 9


@nb.njit(cache=True, inline="always")
def _skip_space(buf, p, end):
    while p < end and _is_space(buf[p]):
        p += 1
    return p


@nb.njit(cache=True, inline="always")
def _guessed_key(buf, p, end, names, name_starts, guess):
    """Length of the key at ``buf[p:]`` (after its opening quote) when it is variable
    ``guess`` followed by the closing quote, else -1."""
    if guess >= name_starts.shape[0] - 1:
        return -1
    a = name_starts[guess]
    n = name_starts[guess + 1] - a
    if p + n >= end or buf[p + n] != 34:
        return -1
    for q in range(n):
        if buf[p + q] != names[a + q]:
            return -1
    return n


@nb.njit(cache=True, inline="always")
def _message_row(buf, lo, end, names, name_starts, table, limits, missing, out, i, seen, where):
    """Parse message ``i``, ``buf[lo:end]``, into ``out[i]`` (prefilled with MISSING):
    :data:`_DECLINED` when it lies outside the kernel's grammar (``out[i]`` is then partly
    written), :data:`_LAYOUT` when it holds every variable as one digit (``where[j]``: the
    offset of variable ``j``'s digit in the message), else :data:`_PARSED`.
    ``seen[j] == i + 1`` marks the keys met so far."""
    stamp = i + 1
    one_digit = True
    p = _skip_space(buf, lo, end)
    if p >= end or buf[p] != 123:  # {
        return False
    p += 1
    found = 0
    guess = 0  # the variable expected next: the one after the previous key
    while True:
        p = _skip_space(buf, p, end)
        if p >= end:
            return False
        if buf[p] == 125 and found == 0:  # }: the empty object
            p += 1
            break
        if buf[p] != 34:  # "
            return False
        p += 1
        n = _guessed_key(buf, p, end, names, name_starts, guess)
        if n >= 0:
            j = guess
            p += n + 1
        else:
            k0 = p
            while p < end and buf[p] != 34:
                if buf[p] == 92 or buf[p] < 32:  # an escape or a control character
                    return False
                p += 1
            if p >= end:
                return False
            j = find_text(buf, k0, p, names, name_starts, table)
            p += 1
            if j < 0:
                return False
        if seen[j] == stamp:  # a repeated key
            return False
        seen[j] = stamp
        found += 1
        guess = j + 1
        p = _skip_space(buf, p, end)
        if p >= end or buf[p] != 58:  # :
            return False
        p = _skip_space(buf, p + 1, end)
        if p >= end:
            return False
        v = np.int64(buf[p]) - 48
        if 0 <= v <= 9:
            where[j] = p - lo
            p += 1
            if v == 0:
                if p < end and 48 <= buf[p] <= 57:  # a leading zero
                    return False
            elif p < end and 48 <= buf[p] <= 57:
                one_digit = False
                n_digits = 1
                while p < end and 48 <= buf[p] <= 57:
                    v = v * 10 + (np.int64(buf[p]) - 48)
                    p += 1
                    n_digits += 1
                    if n_digits > _MAX_DIGITS:
                        return False
            if v >= limits[j]:
                return False
            out[i, j] = v
        elif buf[p] == 110:  # n: null, a missing value in missing mode only
            if not missing or p + 4 > end:
                return False
            if buf[p + 1] != 117 or buf[p + 2] != 108 or buf[p + 3] != 108:
                return False
            out[i, j] = MISSING
            one_digit = False
            p += 4
        else:
            return False
        p = _skip_space(buf, p, end)
        if p >= end:
            return False
        c = buf[p]
        p += 1
        if c == 125:  # }
            break
        if c != 44:  # ,
            return False
    if _skip_space(buf, p, end) != end:
        return _DECLINED
    if found == out.shape[1]:
        return _LAYOUT if one_digit else _PARSED
    return _PARSED if missing else _DECLINED


@nb.njit(cache=True, inline="always")
def _layout_row(message, layout, mask, n_layout, where, limits, out, i):
    """Read ``message`` (row ``i``) by the layout of a parsed one (its first ``n_layout``
    bytes): True when its bytes equal the layout's but for one digit per variable (at
    ``where``), each in range. ``message`` is a slice, so its indices are known to be
    non-negative: no wraparound test per byte, and the comparison vectorises."""
    n = message.shape[0]
    if n != n_layout:
        return False
    diff = 0
    for k in range(n):  # branch free
        diff |= (message[k] & mask[k]) ^ layout[k]
    if diff != 0:
        return False
    bad = False
    for j in range(where.shape[0]):
        v = np.int64(message[where[j]]) - 48
        bad |= (v < 0) | (v > 9) | (v >= limits[j])
        out[i, j] = v
    return not bad


@nb.njit(cache=True, nogil=True, boundscheck=False)
def decode_rows(buf, starts, names, name_starts, table, limits, missing, out, declined):
    """Rows of the messages ``buf[starts[i]:starts[i+1]]`` into ``out`` (``n x d``, prefilled
    with MISSING); ``declined[i]`` is set for each message outside the grammar."""
    n, d = out.shape
    longest = 0
    for i in range(n):
        longest = max(longest, starts[i + 1] - starts[i])
    n_blocks = (n + _BLOCK - 1) // _BLOCK
    for b in range(n_blocks):
        seen = np.zeros(d, dtype=np.int64)
        where = np.zeros(d, dtype=np.int64)
        # the layout: the bytes of the last message parsed with one digit per variable, its
        # digits zeroed in ``layout`` and in ``mask`` (0xFF elsewhere), and where they are
        layout = np.zeros(longest, dtype=np.uint8)
        mask = np.zeros(longest, dtype=np.uint8)
        layout_where = np.zeros(d, dtype=np.int64)
        n_layout = -1
        misses = 0  # messages in a row that did not fit the layout
        for i in range(b * _BLOCK, min(n, (b + 1) * _BLOCK)):
            lo, end = starts[i], starts[i + 1]
            if _layout_row(buf[lo:end], layout, mask, n_layout, layout_where, limits, out, i):
                misses = 0
                continue
            misses += 1
            code = _message_row(
                buf, lo, end, names, name_starts, table, limits, missing, out, i, seen, where
            )
            declined[i] = code == _DECLINED
            if code == _LAYOUT and misses <= _MAX_MISSES:  # likely the next ones' layout
                n_layout = end - lo
                for k in range(n_layout):
                    layout[k] = buf[lo + k]
                    mask[k] = 0xFF
                for j in range(d):
                    layout[where[j]] = 0
                    mask[where[j]] = 0
                    layout_where[j] = where[j]


class FlatJsonRows:
    """Decode flat JSON objects into validated rows of ``schema``, declining what the kernel's
    grammar leaves out (see the module docstring).

    Examples
    --------
    >>> from streammn.schema import Schema
    >>> rows, declined = FlatJsonRows(Schema.from_cardinalities([2, 3])).decode(
    ...     [b'{"x0": 1, "x1": 2}', b'{"x1":0,"x0":0}', b'{"x0": 1, "x1": 3}', None])
    >>> rows[:2].tolist(), declined.tolist()
    ([[1, 2], [0, 0]], [False, False, True, True])
    """

    def __init__(self, schema: Schema):
        self.schema = schema
        encoded = [n.encode("utf-8") for n in schema.names]  # distinct: a schema's names
        table = text_table(encoded)
        assert table is not None  # None only for repeated texts
        self._names, self._name_starts, self._table = table

    def decode(self, values) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, declined)``: a ``uint8`` row per payload in ``values`` (bytes or ``None``)
        and a mask of the payloads it declined, whose rows are meaningless."""
        n, d = len(values), self.schema.n_vars
        if None in values:
            values = [b"" if v is None else v for v in values]
        starts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=n), out=starts[1:])
        buf = np.frombuffer(b"".join(values) or b"\0", dtype=np.uint8)
        out = np.full((n, d), MISSING, dtype=np.uint8)
        declined = np.zeros(n, dtype=np.bool_)
        if n:
            decode_rows(
                buf,
                starts,
                self._names,
                self._name_starts,
                self._table,
                np.asarray(self.schema.value_limits, dtype=np.int64),
                self.schema.missing,
                out,
                declined,
            )
        return out, declined
