"""Libra .mn / .dn: every factor form read with the right semantics, identical round trips."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.formats_strategies import all_rows, brute_scores, models
from streammn import Schema
from streammn.dn import DependencyNetwork
from streammn.features import FeatureSet
from streammn.formats import (
    ModelFormatError,
    read_libra_dn,
    read_libra_mn,
    read_model,
    write_libra_dn,
    write_libra_mn,
    write_model,
)

SPEC_MN = """2,2,2
MN {
-2.541960e-02 +v0_0 +v2_0
-4.340748e-02 +v2_0
1.951711e-02 +v0_0
}
"""

# Every factor form, keywords in mixed case, tie ids, w lines, inf weights, blank lines, EOF.
ALL_FORMS = """2,3,2
mn {
w 0 1.5
3 0.5 +v0_1 -v1_2
-1 0.25 +v1_0

1.5
FEATURES {
-1.0e+00 +v1_0 +v2_1
2.0e-01 +v1_1 +v2_1
}
table {
0.1 +v0_0 +v2_0
0.2 +v0_0 +v2_1
0.3 +v0_1 +v2_0
-inf +v0_1 +v2_1
}
Tree {
(v1_0
    (v2_1 0.7 -0.3)
    (V1_2 1.25
        (v0_0 2 -2)))
}
}
EOF
"""


def all_forms_score(x0, x1, x2):
    """ALL_FORMS's log score, written out by hand."""
    s = 1.5
    s += 0.5 if x0 == 1 and x1 != 2 else 0
    s += 0.25 if x1 == 0 else 0
    s += -1.0 if x1 == 0 and x2 == 1 else 0
    s += 0.2 if x1 == 1 and x2 == 1 else 0
    s += {(0, 0): 0.1, (0, 1): 0.2, (1, 0): 0.3, (1, 1): -math.inf}[x0, x2]
    if x1 == 0:
        s += 0.7 if x2 == 1 else -0.3
    else:
        s += 1.25 if x1 == 2 else (2 if x0 == 0 else -2)
    return s


def test_spec_example(tmp_path):
    path = tmp_path / "spec.mn"
    path.write_text(SPEC_MN)
    schema, fs = read_libra_mn(path)
    assert list(schema.cardinalities) == [2, 2, 2]
    expect = [
        (-2.541960e-02 if x0 == 0 and x2 == 0 else 0)
        + (-4.340748e-02 if x2 == 0 else 0)
        + (1.951711e-02 if x0 == 0 else 0)
        for x0, x1, x2 in all_rows(schema)
    ]
    np.testing.assert_allclose(brute_scores(fs, schema), expect, rtol=0, atol=1e-15)


def test_every_factor_form(tmp_path):
    path = tmp_path / "forms.mn"
    path.write_bytes(ALL_FORMS.replace("\n", "\r\n").encode())
    schema, fs = read_model(path, schema=Schema.from_cardinalities([2, 3, 2], ["a", "b", "c"]))
    assert schema.names == ["a", "b", "c"]
    expect = [all_forms_score(*row) for row in all_rows(schema)]
    got = brute_scores(fs, schema)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(expect))
    np.testing.assert_allclose(got, expect, rtol=0, atol=1e-12)
    # conditions come out canonical (sorted); the tree has 5 leaves, all reachable
    assert all(list(c) == sorted(c) for _, c in fs)
    assert fs.n_features == 2 + 1 + 2 + 4 + 5


def test_written_file_matches_the_spec_layout(tmp_path):
    schema = Schema.from_cardinalities([2, 3])
    fs = FeatureSet.from_features(
        schema, [(-0.25, [(0, 0, True), (1, 2, False)]), (-math.inf, [(1, 1, True)]), (0.5, [])]
    )
    write_libra_mn(tmp_path / "m.mn", schema, fs)
    assert (tmp_path / "m.mn").read_text() == (
        "2,3\nMN {\n-2.5000000000000000e-01 +v0_0 -v1_2\n-inf +v1_1\n5.0000000000000000e-01\n}\n"
    )


@settings(max_examples=60, deadline=None)
@given(models())
def test_round_trip_is_identical(tmp_path_factory, model):
    schema, fs = model
    path = tmp_path_factory.mktemp("mn") / "m.mn"
    write_model(path, schema, fs)
    schema2, fs2 = read_model(path, schema=schema)
    assert schema2 == schema
    assert fs.equals(fs2)
    assert np.array_equal(fs.weights.view(np.int64), fs2.weights.view(np.int64))


@settings(max_examples=40, deadline=None)
@given(models(max_vars=3, max_card=3, canonical=False))
def test_non_canonical_features_keep_their_scores(tmp_path_factory, model):
    schema, fs = model
    path = tmp_path_factory.mktemp("mn") / "m.mn"
    write_libra_mn(path, schema, fs)
    _, fs2 = read_libra_mn(path, schema=schema)
    np.testing.assert_array_equal(brute_scores(fs, schema), brute_scores(fs2, schema))


@st.composite
def trees(draw, cards, depth=3):
    """A random tree: a leaf weight, or (var, value, subtree if equal, subtree otherwise)."""
    if depth == 0 or draw(st.booleans()):
        return draw(st.one_of(st.floats(-5, 5), st.just(-math.inf)))
    v = draw(st.integers(0, len(cards) - 1))
    return (
        v,
        draw(st.integers(0, cards[v] - 1)),
        draw(trees(cards, depth - 1)),
        draw(trees(cards, depth - 1)),
    )


def render(tree, indent=0):
    if not isinstance(tree, tuple):
        return "%.16e" % tree
    v, a, yes, no = tree
    pad = "\n" + " " * (indent + 4)
    return f"(v{v}_{a}{pad}{render(yes, indent + 4)}{pad}{render(no, indent + 4)})"


def evaluate(tree, row):
    while isinstance(tree, tuple):
        v, a, yes, no = tree
        tree = yes if row[v] == a else no
    return tree


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(2, 4), min_size=1, max_size=3).flatmap(
        lambda cards: st.tuples(st.just(cards), st.lists(trees(cards), min_size=1, max_size=3))
    )
)
def test_random_trees_read_as_their_leaf_sums(tmp_path_factory, case):
    cards, forest = case
    text = (
        ",".join(map(str, cards))
        + "\nMN {\n"
        + "".join(f"tree {{\n{render(t)}\n}}\n" for t in forest)
        + "}\n"
    )
    path = tmp_path_factory.mktemp("tree") / "t.mn"
    path.write_text(text)
    schema, fs = read_libra_mn(path)
    expect = np.array([sum(evaluate(t, row) for t in forest) for row in all_rows(schema)])
    got = brute_scores(fs, schema)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(expect))
    np.testing.assert_allclose(got[np.isfinite(got)], expect[np.isfinite(expect)], atol=1e-12)


# .dn: the spec's v0 block, a feature-set block, and a 3-valued child's chain tree
SPEC_DN = """2,2,3
DN {
v0 {
tree {
(v2_0
    (v0_0 -4.632841e-02 -3.095075e+00)
    (v0_0 -6.537525e-01 -7.341577e-01))
}
}
v1 {
features {
-0.5 +v1_0 +v0_1
0.25 +v1_1 -v2_2
}
}
V2 {
tree {
(v0_0
    (v2_0 -1.2 (v2_1 -0.7 -1.5))
    (v2_0 -2.0 (v2_1 -0.3 -1.4)))
}
}
}
"""


def spec_dn_logits(i, x):
    """Unnormalised log P(X_i = a | x) of SPEC_DN for a = 0, 1, ..., by hand."""
    x0, x1, x2 = x
    if i == 0:
        return [-4.632841e-02, -3.095075e00] if x2 == 0 else [-6.537525e-01, -7.341577e-01]
    if i == 1:
        return [-0.5 if x0 == 1 else 0.0, 0.25 if x2 != 2 else 0.0]
    return [-1.2, -0.7, -1.5] if x0 == 0 else [-2.0, -0.3, -1.4]


def test_spec_dn_conditionals(tmp_path):
    path = tmp_path / "spec.dn"
    path.write_text(SPEC_DN)
    schema, cpds = read_model(path)
    dn = DependencyNetwork(schema, cpds)
    rows = np.array(all_rows(schema), dtype=np.uint8)
    for i in range(3):
        got = dn.log_conditional(rows, i)
        for r, x in enumerate(all_rows(schema)):
            lg = np.array(spec_dn_logits(i, x))
            np.testing.assert_allclose(got[r], lg - np.logaddexp.reduce(lg), atol=1e-12)


def test_dn_round_trip(tmp_path):
    path = tmp_path / "spec.dn"
    path.write_text(SPEC_DN)
    schema, cpds = read_libra_dn(path)
    write_model(tmp_path / "again.dn", schema, cpds)
    _, cpds2 = read_libra_dn(tmp_path / "again.dn")
    assert all(a.equals(b) for a, b in zip(cpds, cpds2))
    with pytest.raises(ModelFormatError, match="expected 3 CPDs"):
        write_libra_dn(tmp_path / "short.dn", schema, cpds[:2])


MN_HEAD = "2,3\nMN {\n"


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("2,x\nMN {\n}\n", 1, "bad schema line"),
        ("2,2\nBN {\n}\n", 2, "expected 'MN {'"),
        (MN_HEAD + "1.2.3 +v0_1\n}\n", 3, "expected a feature"),
        (MN_HEAD + "0.5 +v0_1\n.5 +v0_1\n}\n", 4, "expected a feature"),
        (MN_HEAD + "0.5 +v2_0\n}\n", 3, "variable v2 does not exist"),
        (MN_HEAD + "0.5 -v1_3\n}\n", 3, "value 3 out of range"),
        (MN_HEAD + "0.5 v0_1\n}\n", 3, "expected a condition"),
        (MN_HEAD + "nan +v0_1\n}\n", 3, "expected a feature"),
        (MN_HEAD + "inf +v0_1\n}\n", 3, "not allowed"),
        (MN_HEAD + "features {\n1 +v0_0\n", 4, "unexpected end of file"),
        (MN_HEAD + "tree {\n(v0_0 1\n}\n}\n", 4, "tree ends early"),
        (MN_HEAD + "tree {\n(v0_0 1 2 3)\n}\n}\n", 4, "expected \\)"),
        (MN_HEAD + "tree {\n1 2\n}\n}\n", 4, "after the end of the tree"),
        (MN_HEAD + "tree {\n(+v0_0 1 2)\n}\n}\n", 4, "expected a test"),
        (MN_HEAD + "w 1\n}\n", 3, "w line"),
        (MN_HEAD + "}\n1 +v0_0\n", 4, "after the model's closing"),
    ],
)
def test_malformed_mn(tmp_path, text, line, message):
    path = tmp_path / "bad.mn"
    path.write_text(text)
    with pytest.raises(ModelFormatError, match=message) as err:
        read_libra_mn(path)
    assert err.value.line == line and err.value.path == str(path)
    assert f"{path}, line {line}:" in str(err.value)


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("2,2\nDN {\nv0 {\n}\n}\n", None, r"no block for variable\(s\) \[1\]"),
        ("2,2\nDN {\nv0 {\n}\nv0 {\n}\n", 5, "second block for v0"),
        ("2,2\nDN {\nv3 {\n}\n", 3, "the schema has 2 variables"),
        ("2,2\nDN {\nx0 {\n}\n", 3, "expected a block"),
    ],
)
def test_malformed_dn(tmp_path, text, line, message):
    path = tmp_path / "bad.dn"
    path.write_text(text)
    with pytest.raises(ModelFormatError, match=message) as err:
        read_libra_dn(path)
    assert err.value.line == line


def test_schema_mismatch_is_an_error(tmp_path):
    path = tmp_path / "spec.mn"
    path.write_text(SPEC_MN)
    with pytest.raises(ModelFormatError, match="does not match"):
        read_libra_mn(path, schema=Schema.from_cardinalities([2, 3, 2]))
