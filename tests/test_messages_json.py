"""JSON messages: the numba kernel (streammn.connectors.flatjson) against the general pyarrow
reader.

The kernel decodes the flat objects it accepts and declines the rest to the general reader,
so a decoder with the kernel must give exactly what the general reader alone gives: the same
rows, the same located errors (message, row, column, reason), the same dead letters. Random
chunks mix good messages written in every accepted way with every kind of bad one."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest

from streammn.connectors.flatjson import FlatJsonRows
from streammn.connectors.messages import DeadLetterFile, MessageDecoder
from streammn.schema import Schema, SchemaError


class GeneralDecoder(MessageDecoder):
    """The reference: every JSON message through pyarrow's reader."""

    _use_kernel = False


def where(i):
    return {"topic": "t", "partition": 0, "offset": 100 + i}


SPACES = ["", " ", "\n", "\t", "\r\n", "  "]

#: value tokens the general reader refuses, or reads differently than a plain integer
BAD_VALUES = [
    "1.0",
    "1e0",
    "2.5",
    '"1"',
    "true",
    "false",
    "{}",
    "[1]",
    "01",
    "-1",
    "-0",
    "99999999999999999999",
    "1234567890123456789",
    "123456789012345678",
    "nul",
    "nulll",
    "1x",
    "",
]

#: whole payloads outside the grammar (or not JSON at all)
BAD_PAYLOADS = [
    None,
    b"",
    b"   ",
    b"\xff",
    b"[0, 1, 2]",
    b"{",
    b"}",
    b"{}{}",
    b"null",
    b"0",
    b"\xef\xbb\xbf{}",
]


def token(rng, card: int) -> str:
    v = int(rng.integers(0, card))
    return str(v)


def message(rng, schema: Schema, p_bad: float) -> bytes | None:
    """A JSON object for ``schema``, spelled at random; bad (in one of many ways) with
    probability ``p_bad``."""
    names, cards = schema.names, schema.cardinalities
    members = [(json.dumps(n), token(rng, int(c))) for n, c in zip(names, cards)]
    if rng.random() < 0.3:  # a few nulls and absent keys: errors unless in missing mode
        for j in rng.choice(len(members), size=int(rng.integers(1, 3)), replace=False):
            members[j] = (members[j][0], "null") if rng.random() < 0.5 else None
        members = [m for m in members if m is not None]
    if rng.random() < 0.3:
        rng.shuffle(members)
    tail = ""
    if rng.random() < p_bad:
        kind = int(rng.integers(0, 9))
        j = int(rng.integers(0, len(members))) if members else 0
        if kind == 0 and members:  # a value outside the grammar
            members[j] = (members[j][0], BAD_VALUES[rng.integers(0, len(BAD_VALUES))])
        elif kind == 1 and members:  # out of range
            members[j] = (members[j][0], str(int(rng.integers(2, 300))))
        elif kind == 2:  # an unknown key
            members.insert(j, ('"y"', str(int(rng.integers(0, 2)))))
        elif kind == 3 and members:  # a repeated key
            members.insert(j, (members[j][0], "0"))
        elif kind == 4 and members:  # an escaped key (valid JSON, declined by the kernel)
            name = json.loads(members[j][0])
            escaped = "".join(f"\\u{ord(ch):04x}" for ch in name)
            members[j] = (f'"{escaped}"', members[j][1])
        elif kind == 5:  # trailing garbage or a second object
            tail = ["x", "{}", ",", '{"x0":0}'][rng.integers(0, 4)]
        elif kind == 6:
            return BAD_PAYLOADS[rng.integers(0, len(BAD_PAYLOADS))]
        elif kind == 7 and members:  # a comma or colon missing or doubled
            k, v = members[j]
            members[j] = [(k + ",", v), (k, ":" + v), (k + ":", v)][rng.integers(0, 3)]
        else:  # a trailing comma
            tail = None
    parts = []
    for k, v in members:
        s = lambda: SPACES[rng.integers(0, len(SPACES))]  # noqa: E731
        parts.append(f"{s()}{k}{s()}:{s()}{v}{s()}")
    body = ",".join(parts)
    if tail is None:
        body += ","
        tail = ""
    s = SPACES[rng.integers(0, len(SPACES))]
    return f"{s}{{{body}}}{s}{tail}".encode()


def outcome(decoder, values, dead_path=None):
    """Rows and dead letters, or the error's (text, row, column, source)."""
    dead = None if dead_path is None else DeadLetterFile(dead_path)
    try:
        rows = decoder.decode(values, where, 1000, dead)
    except SchemaError as e:
        return ("error", str(e), e.row, e.column, e.source)
    finally:
        if dead is not None:
            dead.close()
    letters = [] if dead_path is None else dead_path.read_text().splitlines()
    if dead_path is not None:
        dead_path.unlink()
    return ("rows", rows.tolist(), letters)


SCHEMAS = {
    "plain": Schema.from_cardinalities([2, 3, 10, 11, 255, 2]),
    "missing": Schema.from_cardinalities([2, 3, 10, 11, 255, 2]).with_missing(),
    "growth": Schema.from_cardinalities([2, 3, 4]).with_growth([5, 3, 200]),
    "names": Schema.from_cardinalities([2, 4, 3], ["país", 'quo"te', "a b"]),
}


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
@pytest.mark.parametrize("p_bad", [0.02, 0.3])
def test_kernel_decodes_like_the_general_reader(kind, p_bad, tmp_path):
    schema = SCHEMAS[kind]
    fast, general = MessageDecoder("json", schema), GeneralDecoder("json", schema)
    rng = np.random.default_rng(zlib.crc32(f"{kind} {p_bad}".encode()))
    for _ in range(15):
        values = [message(rng, schema, p_bad) for _ in range(int(rng.integers(1, 30)))]
        assert outcome(fast, values) == outcome(general, values)
        dead = tmp_path / "dead.jsonl"
        assert outcome(fast, values, dead) == outcome(general, values, dead)


@pytest.mark.parametrize("missing", [False, True])
def test_messages_of_one_layout_with_single_byte_changes(missing, tmp_path):
    """Messages of one producer share a layout, which the kernel matches byte for byte with
    its digits free; any byte changed (a digit out of range, a letter, a key's character, a
    space) must fall back to parsing, and so to the general reader's outcome."""
    schema = Schema.from_cardinalities([2, 3, 10, 5, 2, 7])
    if missing:
        schema = schema.with_missing()
    fast, general = MessageDecoder("json", schema), GeneralDecoder("json", schema)
    rng = np.random.default_rng(7 + missing)
    alphabet = b'0123456789 ,:{}"\\nulx-.ae\t\n\xff'
    for _ in range(20):
        values = []
        for _ in range(int(rng.integers(5, 60))):
            row = [int(rng.integers(0, c)) for c in schema.cardinalities]
            v = bytearray(json.dumps(dict(zip(schema.names, row))).encode())
            if rng.random() < 0.15:
                v[int(rng.integers(0, len(v)))] = alphabet[int(rng.integers(0, len(alphabet)))]
            values.append(bytes(v))
        assert outcome(fast, values) == outcome(general, values)
        dead = tmp_path / "dead.jsonl"
        assert outcome(fast, values, dead) == outcome(general, values, dead)


def test_kernel_accepts_the_common_shapes_and_declines_the_rest():
    """The fast path is taken for what producers write; everything else is declined (its
    row then comes from the general reader)."""
    schema = Schema.from_cardinalities([2, 3, 12])
    kernel = FlatJsonRows(schema)
    accepted = [
        b'{"x0":1,"x1":2,"x2":11}',
        b'{"x0": 1, "x1": 2, "x2": 11}',  # json.dumps' separators
        b'{"x2":0,"x0":0,"x1":0}',  # any order
        b' {\n  "x0" : 1,\r\n\t"x1": 0,\n  "x2": 10\n}\n',  # pretty-printed
    ]
    rows, declined = kernel.decode(accepted)
    assert not declined.any()
    assert rows.tolist() == [[1, 2, 11], [1, 2, 11], [0, 0, 0], [1, 0, 10]]
    declined_payloads = [
        b'{"x0":1,"x1":2}',  # absent key, not in missing mode
        b'{"x0":1,"x1":null,"x2":0}',  # null, idem
        b'{"x0":-0,"x1":0,"x2":0}',
        b'{"x0":1,"x1":3,"x2":0}',  # out of range: the general reader names it
        b'{"x\\u0030":1,"x1":0,"x2":0}',
        b'{"x0":1,"x1":0,"x2":0,"x3":0}',
    ]
    assert kernel.decode(declined_payloads)[1].all()
    rows, declined = FlatJsonRows(schema.with_missing()).decode(declined_payloads[:2] + [b"{}"])
    assert not declined.any() and rows.tolist() == [[1, 2, 255], [1, 255, 0], [255] * 3]


def test_a_declined_message_keeps_its_place_among_kernel_rows():
    schema = Schema.from_cardinalities([2, 3])
    values = [b'{"x0":1,"x1":2}', b'{"x1":1,"x\\u0030":0}', b'{"x0":0,"x1":0}']
    got = MessageDecoder("json", schema).decode(values, where, 0)
    np.testing.assert_array_equal(got, [[1, 2], [0, 1], [0, 0]])


@pytest.mark.parametrize(
    "bad,text,column",
    [
        (b'{"x0":1,"x1":7}', "value 7 out of range 0..2 for variable 'x1'", 1),
        (b'{"x0":1,"x1":1.5}', "couldn't parse:1.5", None),
        (b'{"x0":1,"x1":"a"}', "changed from number to string", None),
        (b'{"x0":1,"x1":1,"z":0}', "unexpected field", None),
        (b'{"x0":1}', "null value for variable 'x1'", 1),
        (b'{"x0":1,"x1":1', "JSON parse error", None),
    ],
)
@pytest.mark.parametrize("position", [0, 600, 1199])
def test_bad_message_in_a_large_chunk_is_named(bad, text, column, position):
    schema = Schema.from_cardinalities([2, 3])
    values = [b'{"x0": 1, "x1": 2}'] * 1200
    values[position] = bad
    with pytest.raises(SchemaError) as info:
        MessageDecoder("json", schema).decode(values, where, 50)
    assert f"offset {100 + position}," in str(info.value) and text in str(info.value)
    assert info.value.row == 50 + position and info.value.column == column


def test_a_null_message_is_refused_wherever_it_stands():
    """pyarrow crashes the process on a chunk starting with a JSON null, and reads one
    elsewhere as a row of nulls: the decoder refuses it, in any position."""
    schema = Schema.from_cardinalities([2, 2]).with_missing()
    good = b'{"x0": 1, "x1": 0}'
    for values in ([b"null", good], [good, b" null "], [b"\xef\xbb\xbfnull", good]):
        for decoder in (MessageDecoder("json", schema), GeneralDecoder("json", schema)):
            with pytest.raises(SchemaError, match="JSON null, not an object") as info:
                decoder.decode(values, where, 0)
            assert info.value.row == values.index(good) ^ 1


@pytest.mark.parametrize(
    "format,values",
    [
        ("csv", [b"1,0", b"1,0\n0,1", b"\n", b"1,1"]),
        ("csv", [b"1,0", b"1,0\r\n0,1", b"\r\n\r\n", b"1,1"]),
        ("json", [b'{"x0":1,"x1":0}', b'{"x0":1,"x1":0} {"x0":0,"x1":1}', b" \n", b"{}"]),
    ],
)
def test_a_message_of_two_rows_next_to_a_blank_one_is_named(format, values):
    """Their row counts add up to the message count, which once shifted every later row by
    one message, silently."""
    schema = Schema.from_cardinalities([2, 2]).with_missing()
    with pytest.raises(SchemaError, match="offset 101.*message holds 2 rows"):
        MessageDecoder(format, schema).decode(values, where, 0)
