"""The .mn reader's scan (issue 38 item 9): the model a file was written from comes back, bit
for bit, however the file is laid out within the format (formats/libra-mn.md), and what is not
in the format is refused at its line, the first fault in the file first."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.formats_strategies import brute_scores, models
from streammn import Schema
from streammn.formats import ModelFormatError, read_libra_dn, read_libra_mn, write_libra_mn
from streammn.features import FeatureSet


def _same(a: FeatureSet, b: FeatureSet) -> None:
    """Identical features: order, conditions and the weights' bits."""
    for column in ("ptr", "var", "val", "eq"):
        np.testing.assert_array_equal(getattr(a, column), getattr(b, column), err_msg=column)
    np.testing.assert_array_equal(a.weights.view(np.int64), b.weights.view(np.int64))


def _relaid(text: str, draw) -> str:
    """``text`` (one feature per line, as written) laid out another way the format allows:
    blank lines (empty or spaces and tabs), runs of spaces and tabs between tokens, weight-tie
    ids (-1 or an id), upper-case ``V``, features grouped in ``features { }`` / ``table { }``
    blocks, ``w`` lines, ``\\r\\n`` or ``\\r`` line ends, and ``EOF`` after the closing brace."""
    head, body = text.split("MN {\n")
    body_lines = body.rstrip("\n").split("\n")[:-1]  # without the closing }
    out = [head.rstrip("\n"), "MN {"]
    block_left = 0
    for line in body_lines:
        if block_left == 0 and draw(st.integers(0, 5)) == 0:
            out.append(draw(st.sampled_from(["features {", "table {", "FEATURES {"])))
            block_left = draw(st.integers(1, 4))
        if draw(st.integers(0, 4)) == 0:
            out.append(draw(st.sampled_from(["", " ", "\t", " \t "])))
        if block_left == 0 and draw(st.integers(0, 6)) == 0:  # between factors
            out.append("w 3 -1.5e+00")
        tokens = line.split(" ")
        if draw(st.integers(0, 3)) == 0:
            tokens.insert(0, draw(st.sampled_from(["-1", "7", "0"])))
        if draw(st.booleans()):
            tokens = [t.replace("v", "V") for t in tokens]
        gaps = [draw(st.sampled_from([" ", "  ", "\t", " \t"])) for _ in tokens]
        lead = draw(st.sampled_from(["", " ", "\t"]))
        out.append(lead + "".join(t + g for t, g in zip(tokens, gaps)).rstrip(" \t"))
        if block_left:
            block_left -= 1
            if block_left == 0:
                out.append("}")
    if block_left:
        out.append("}")
    out.append("}")
    if draw(st.booleans()):
        out.append("EOF")
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return end.join(out) + end


@settings(max_examples=80, deadline=None)
@given(models(max_vars=5, max_card=4, max_features=12), st.data())
def test_the_model_comes_back_from_any_layout(tmp_path_factory, model, data):
    """Multi-valued variables, = and != conditions, -inf, constants: written, laid out another
    way, read back identical to the model."""
    schema, fs = model
    path = tmp_path_factory.mktemp("mn") / "m.mn"
    write_libra_mn(path, schema, fs)
    path.write_bytes(_relaid(path.read_text(), data.draw).encode("ascii"))
    schema2, back = read_libra_mn(path)
    assert list(schema2.cardinalities) == list(schema.cardinalities)
    _same(fs, back)


@settings(max_examples=60, deadline=None)
@given(models(max_vars=4, max_card=4, max_features=10, canonical=False), st.data())
def test_conditions_as_written_come_back_canonical(tmp_path_factory, model, data):
    """Unsorted, repeated, contradictory or redundant conditions (negated literals of every
    kind) come back as ``FeatureSet.from_features`` puts them: canonical, the features that
    can never hold dropped, scores unchanged."""
    schema, fs = model
    path = tmp_path_factory.mktemp("mn") / "m.mn"
    write_libra_mn(path, schema, fs)
    path.write_bytes(_relaid(path.read_text(), data.draw).encode("ascii"))
    _, back = read_libra_mn(path, schema=schema)
    _same(FeatureSet.from_features(schema, list(fs)), back)
    np.testing.assert_array_equal(brute_scores(fs, schema), brute_scores(back, schema))


def test_a_large_model_with_a_tree_in_the_middle(tmp_path):
    """Tens of thousands of feature lines around a tree and a features block: every feature in
    file order (the tree's leaves where the tree is), identical to the model written."""
    rng = np.random.default_rng(3)
    cards = rng.integers(2, 6, size=40)
    schema = Schema.from_cardinalities(cards.tolist())
    feats = []
    for _ in range(30_000):
        scope = rng.choice(40, size=rng.integers(0, 8), replace=False)
        conds = [(int(v), int(rng.integers(cards[v])), bool(rng.random() < 0.7)) for v in scope]
        w = -math.inf if rng.random() < 0.001 else float(rng.normal() * 10.0 ** rng.integers(-8, 3))
        feats.append((w, conds))
    fs = FeatureSet.from_features(schema, feats)
    write_libra_mn(tmp_path / "m.mn", schema, fs)
    lines = (tmp_path / "m.mn").read_text().split("\n")
    tree = ["tree {", "(v3_1 (v0_0 1.5 -2.5e-01)", "    -inf)", "}"]
    block = ["features {", "2.0 +v1_0 -v2_1", "}"]
    cut = 2 + 12_345
    text = "\n".join(lines[:cut] + tree + lines[cut : cut + 5] + block + lines[cut + 5 :])
    (tmp_path / "t.mn").write_text(text)
    _, back = read_libra_mn(tmp_path / "t.mn")
    inserted = FeatureSet.from_features(
        schema,
        [
            (1.5, [(3, 1, True), (0, 0, True)]),
            (-0.25, [(3, 1, True), (0, 0, False)]),
            (-math.inf, [(3, 1, False)]),
        ],
    )
    extra = FeatureSet.from_features(schema, [(2.0, [(1, 0, True), (2, 1, False)])])
    n = cut - 2
    expect = FeatureSet.concat(
        schema,
        [
            fs.select(np.arange(n)),
            inserted,
            fs.select(np.arange(n, n + 5)),
            extra,
            fs.select(np.arange(n + 5, fs.n_features)),
        ],
    )
    _same(expect, back)


MN_HEAD = "2,3\nMN {\n"


@pytest.mark.parametrize(
    "text, line, message",
    [
        # the format has no comments: a comment line is a line the parser refuses
        (MN_HEAD + "// a comment\n0.5 +v0_1\n}\n", 3, "expected a feature"),
        (MN_HEAD + "0.5 +v0_1\n# a comment\n}\n", 4, "expected a feature"),
        (MN_HEAD + "0.5 +v0_1 # a comment\n}\n", 3, "expected a condition"),
        # the first fault in the file is the one named, whichever kind it is
        (MN_HEAD + "0.5 +v0_1\n\n0.5 +v7_0\n0.5 v0_1\n}\n", 5, "variable v7 does not exist"),
        (MN_HEAD + "0.5 -v1_4\n1e400 +v0_1\n}\n", 3, "value 4 out of range"),
        (MN_HEAD + "1e400 +v0_1\n0.5 -v1_4\n}\n", 3, "not allowed"),
        (MN_HEAD + "0.5 +v0_1\nInf\n}\n", 4, "not allowed"),
        (MN_HEAD + "features {\n0.5 +v0_1\n0.5 +v0_99999999999\n}\n}\n", 5, "value 99999999999"),
        (MN_HEAD + "0.5 +v99999999999_0\n}\n", 3, "v99999999999 does not exist"),
        (MN_HEAD + "0.5 +v0_1\x0b+v1_2\n0.5 +v0_300\n}\n", 4, "value 300 out of range"),
        (MN_HEAD + "0.5\t+v0_1\n0.5 +v0_1{\n}\n", 4, "expected a condition"),
        (MN_HEAD + "0.5 +v0_1\n}\n0.5 +v0_1\n", 5, "after the model's closing"),
    ],
)
def test_what_is_not_in_the_format_is_refused_at_its_line(tmp_path, text, line, message):
    path = tmp_path / "bad.mn"
    path.write_bytes(text.encode("ascii"))
    with pytest.raises(ModelFormatError, match=message) as err:
        read_libra_mn(path)
    assert err.value.line == line


def test_other_whitespace_and_line_ends_read_as_python_splits_them(tmp_path):
    """Vertical tab, form feed and the file separators are whitespace to the token parser,
    and a lone \\r ends a line: such lines still read (by the parser), with the same
    features as plain spaces give."""
    plain = MN_HEAD + "0.5 +v0_1 -v1_2\n-inf +v1_0\n}\n"
    odd = MN_HEAD.replace("\n", "\r") + "0.5\x0b+v0_1\x0c-v1_2\r\n\x1c\n-inf\x1f+v1_0\r}\r"
    (tmp_path / "plain.mn").write_text(plain)
    (tmp_path / "odd.mn").write_bytes(odd.encode("ascii"))
    _same(read_libra_mn(tmp_path / "plain.mn")[1], read_libra_mn(tmp_path / "odd.mn")[1])


def test_dependency_network_blocks_take_their_own_lines(tmp_path):
    text = "2,3\nDN {\nv0 {\n0.5 +v0_1 -v1_2\n\n-1 +v0_0\n}\nv1 {\n2.5e-01 +v1_1\n}\n}\n"
    (tmp_path / "m.dn").write_text(text)
    schema, cpds = read_libra_dn(tmp_path / "m.dn")
    _same(
        cpds[0],
        FeatureSet.from_features(
            schema, [(0.5, [(0, 1, True), (1, 2, False)]), (-1.0, [(0, 0, True)])]
        ),
    )
    _same(cpds[1], FeatureSet.from_features(schema, [(0.25, [(1, 1, True)])]))
