"""What a state looks like in text: the one definition every text source reads by.

A cell of a CSV or ``.data`` file, or of a CSV message from a log, holds a state as an *integer
token*: one or more ASCII digits ``0``-``9``, with any number of spaces or tabs around them
(pyarrow trims those, and streammn has always accepted them). Leading zeros are fine (``007`` is
7). Nothing else is a token, though some parser along the way would take it:

- no sign: ``+1``, ``-0`` (a state is never negative; pyarrow read ``-0`` as 0);
- no base prefix: ``0x1``, ``0X10`` (pyarrow's integer parser reads them as hexadecimal, so a
  ``0x10`` used to be learned as the state 16);
- no digit separator: ``0_1`` (Python's ``int`` reads 1);
- no other Unicode digit: Arabic-Indic ``١``, full-width ``１`` (Python's ``int`` reads 1);
- no decimal point or exponent: ``1.0``, ``1e0``.

The null tokens of a source (``*``, an empty cell, ``NA``, ...) are not tokens: the reader makes
them nulls before a column gets here, and the schema decides what a null is.

Text columns are therefore read as strings, never by an integer parser, and converted here, a
whole column at a time. A column whose cells are all one to three ASCII digits (checked on its
bytes with numpy) is its bytes minus ``'0'`` when they are single digits (binary data, any
cardinality up to 10), else pyarrow's cast of the checked text; any other column (blanks, more
digits, a refused cell) goes through pyarrow's string kernels (trim, an ASCII-decimal test, a
cast). Reading a file's text and converting it so took a third less CPU time than pyarrow's
integer conversion for single digits, a tenth less for values up to 199, and 15% more for cells
with blanks around them (1M x 16 and 500k x 16 cells, pyarrow 26). Only a refused column
pays for a look at its first bad cell, which the error then shows verbatim; its file (or
message), row, column and variable name come from the caller, as in every
:class:`~streammn.schema.SchemaError`. A token too large for any state is an out-of-range value,
shown as written (digits, never a float such as ``1e+23``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streammn.schema import SchemaError

BLANKS = " \t"
RULE = "a state is written in ASCII digits 0-9"
SHOWN_CHARS = 80  # a longer token is shown by its start and its length
_TOO_LARGE = 1000  # stands in for every value of more than three significant digits
_ZERO = ord("0")


def is_text(arrow_type: pa.DataType) -> bool:
    """Whether an Arrow column of this type holds tokens to convert here."""
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)


def shown(text: str) -> str:
    """``text`` as an error message shows a token: quoted as Python does, cut after
    :data:`SHOWN_CHARS` characters with its length said."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"{text[:SHOWN_CHARS]!r}... ({len(text):,} characters)"


def shown_value(text: str) -> str:
    """A valid token as an out-of-range value: its digits as written, without blanks around
    them, cut like :func:`shown` when very long."""
    digits = text.strip(BLANKS)
    if len(digits) <= SHOWN_CHARS:
        return digits
    return f"{digits[:SHOWN_CHARS]}... ({len(digits):,} digits)"


def refused(text: str, name: str, row: int, column: int, source: str | None = None) -> SchemaError:
    """The error for ``text``, not an integer token, in variable ``name``'s column."""
    return SchemaError(
        f"non-integer value {shown(text)} for variable {name!r} ({RULE})",
        row=row,
        column=column,
        source=source,
    )


def text_states(
    col: pa.Array, name: str, column: int, row_offset: int, source: str | None = None
) -> np.ndarray:
    """The values of a string column of integer tokens, without nulls, a whole column at once.

    Returns ``uint8`` digits for a column of single digits, else integer values in which every
    value above 999 is 1000 (beyond every schema's states: the caller's range check refuses it,
    showing the cell itself, see :func:`shown_value`). A cell that is not an integer token raises
    the :class:`SchemaError` of :func:`refused` for the first one, at row ``row_offset + i``.
    """
    n = len(col)
    if n == 0:
        return np.empty(0, dtype=np.uint8)
    offsets, data = _string_buffers(col)
    lengths = np.diff(offsets)
    digits = data - np.uint8(_ZERO)  # bytes below '0' wrap around above 9
    if lengths.min() >= 1 and lengths.max() <= 3 and (digits < 10).all():
        if data.size == n:  # single digits: binary data, or any cardinality up to 10
            return digits
        return pc.cast(col, pa.int16()).to_numpy(zero_copy_only=False)  # 0 .. 999, checked
    trimmed = pc.ascii_trim(col, characters=BLANKS)
    ok = pc.ascii_is_decimal(trimmed).to_numpy(zero_copy_only=False)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise refused(col[i].as_py(), name, row_offset + i, column, source)
    if np.diff(_string_buffers(trimmed)[0]).max() > 3:  # maybe above 999: no state, and the
        significant = pc.utf8_length(pc.ascii_ltrim(trimmed, characters="0"))  # cast overflows
        trimmed = pc.if_else(pc.greater(significant, 3), str(_TOO_LARGE), trimmed)
    return pc.cast(trimmed, pa.int64()).to_numpy(zero_copy_only=False)


def _string_buffers(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The offsets (``len(col) + 1``) and the bytes of a string array, as numpy views."""
    _, offset_buffer, data_buffer = col.buffers()
    width = np.int64 if pa.types.is_large_string(col.type) else np.int32
    offsets = np.frombuffer(offset_buffer, dtype=width)[col.offset : col.offset + len(col) + 1]
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.empty(0, dtype=np.uint8)
    )
    return offsets, data[offsets[0] : offsets[-1]]
