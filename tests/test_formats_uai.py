"""UAI MARKOV: the written tables define the same distribution (same Z) as the features."""

import itertools
import math
import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from helpers.formats_strategies import all_rows, brute_scores, log_z, models
from streammn import Schema
from streammn.features import FeatureSet
from streammn.formats import ModelFormatError, read_model, read_uai, write_model, write_uai

SPEC_EXAMPLE = """MARKOV
2
2 2
3
1 0
1 1
2 0 1
2
 0.4 0.6
2
 0.5 0.5
4
 2.0 1.0 1.0 2.0
"""

WEIGHTS = st.one_of(st.floats(-3, 3), st.just(-math.inf))


def table_log_potentials(text):
    """Independent UAI evaluator: log of the product of potentials for every joint state."""
    toks = text.split()
    assert toks[0] == "MARKOV"
    n = int(toks[1])
    cards = [int(t) for t in toks[2 : 2 + n]]
    pos = 2 + n
    m = int(toks[pos])
    pos += 1
    scopes = []
    for _ in range(m):
        k = int(toks[pos])
        scopes.append([int(t) for t in toks[pos + 1 : pos + 1 + k]])
        pos += 1 + k
    tables = []
    for scope in scopes:
        size = int(toks[pos])
        tables.append([float(t) for t in toks[pos + 1 : pos + 1 + size]])
        pos += 1 + size
    assert pos == len(toks)
    out = []
    for x in itertools.product(*[range(c) for c in cards]):
        p = 1.0
        for scope, table in zip(scopes, tables):
            idx = 0
            for v in scope:  # last variable of the scope changes fastest
                idx = idx * cards[v] + x[v]
            p *= table[idx]
        out.append(math.log(p) if p > 0 else -math.inf)
    return m, np.array(out)


@settings(max_examples=60, deadline=None)
@given(models(max_vars=4, max_card=3, max_features=10, weights=WEIGHTS), st.booleans())
def test_written_tables_have_the_same_partition_function(tmp_path_factory, model, merge):
    schema, fs = model
    path = tmp_path_factory.mktemp("uai") / "m.uai"
    write_uai(path, schema, fs, merge=merge)
    n_factors, logp = table_log_potentials(path.read_text())
    scores = brute_scores(fs, schema)
    assert (
        np.allclose(log_z(logp), log_z(scores), rtol=0, atol=1e-9)
        or log_z(logp) == log_z(scores) == -math.inf
    )
    finite = np.isfinite(scores)
    np.testing.assert_array_equal(np.isfinite(logp), finite)
    np.testing.assert_allclose(logp[finite], scores[finite], atol=1e-9)
    # every variable can be placed by readers that build the graph from scopes (pgmpy)
    tokens = path.read_text().split()
    written, at = [], 3 + schema.n_vars
    for _ in range(n_factors):
        k = int(tokens[at])
        written.append(tuple(map(int, tokens[at + 1 : at + 1 + k])))
        at += 1 + k
    if schema.n_vars >= 2:
        assert {v for s in written if len(s) >= 2 for v in s} == set(range(schema.n_vars))
    scopes = {fs.scope(f) for f in range(fs.n_features) if len(fs.scope(f)) >= 2}
    if merge:
        assert scopes <= set(written)


@settings(max_examples=40, deadline=None)
@given(models(max_vars=3, max_card=3, max_features=6, weights=WEIGHTS))
def test_reader_gives_back_the_same_scores(tmp_path_factory, model):
    schema, fs = model
    path = tmp_path_factory.mktemp("uai") / "m.uai"
    write_model(path, schema, fs)
    a = brute_scores(fs, schema)
    assume(np.isfinite(a).any())  # no state possible is no distribution (see test_malformed_files)
    schema2, fs2 = read_model(path, schema=schema)
    assert schema2 == schema
    b = brute_scores(fs2, schema)
    np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
    np.testing.assert_allclose(a[np.isfinite(a)], b[np.isfinite(b)], atol=1e-9)


def test_spec_example(tmp_path):
    path = tmp_path / "spec.uai"
    path.write_text(SPEC_EXAMPLE)
    schema, fs = read_uai(path)
    expect = [
        math.log([0.4, 0.6][x0] * [0.5, 0.5][x1] * [[2, 1], [1, 2]][x0][x1])
        for x0, x1 in all_rows(schema)
    ]
    np.testing.assert_allclose(brute_scores(fs, schema), expect, atol=1e-12)
    assert all(all(eq for _, _, eq in c) for _, c in fs)


def test_known_layout_and_hard_zero(tmp_path):
    schema = Schema.from_cardinalities([2, 3])
    fs = FeatureSet.from_features(
        schema,
        [
            (math.log(2), [(0, 1, True), (1, 0, False)]),
            (-math.inf, [(1, 2, True)]),
            (math.log(3), []),
        ],
    )
    write_uai(tmp_path / "m.uai", schema, fs)
    assert (tmp_path / "m.uai").read_text().split("\n") == [
        "MARKOV",
        "2",
        "2 3",
        "2",
        "2 0 1",
        "1 1",  # the constant 3 multiplies the first table
        "6",
        " 3.0000000000000004 3.0000000000000004 3.0000000000000004 3.0000000000000004 6 6",
        "3",
        " 1 1 0",
        "",
    ]


@pytest.mark.parametrize("conds", [[(0, 1, True)], []])
def test_overflowing_potentials_are_refused(tmp_path, conds):
    schema = Schema.binary(2)
    fs = FeatureSet.from_features(schema, [(800.0, conds)])
    with pytest.raises(ModelFormatError, match="overflows"):
        write_uai(tmp_path / "m.uai", schema, fs)


def test_table_size_limit(tmp_path):
    schema = Schema.binary(12)
    fs = FeatureSet.from_features(schema, [(1.0, [(v, 1, True) for v in range(12)])])
    with pytest.raises(ModelFormatError, match="4,096 entries") as refused:
        write_uai(tmp_path / "m.uai", schema, fs, max_entries=1000)
    assert ".mn (Libra) and .json" in str(refused.value)


def test_convert_has_one_uai_limit_and_says_what_works(tmp_path, capsys):
    """Snapshots and convert refuse the same tables, convert names what works instead and the
    option that raises the limit, and an unknown suffix lists what --help lists."""
    import re

    from streammn import formats
    from streammn.cli import _parser, main
    from streammn.formats import write_model

    assert formats.SNAPSHOT_UAI_MAX_ENTRIES == formats.UAI_MAX_ENTRIES
    assert formats.uai.write_uai.__defaults__[1] == formats.UAI_MAX_ENTRIES
    schema = Schema.binary(12)
    fs = FeatureSet.from_features(schema, [(1.0, [(v, 1, True) for v in range(12)])])
    write_model(tmp_path / "m.json", schema, fs)
    model, out = str(tmp_path / "m.json"), str(tmp_path / "m.uai")
    assert main(["convert", model, out, "--uai-max-entries", "1000"]) == 3
    err = capsys.readouterr().err
    assert "4,096 entries" in err and ".mn (Libra) and .json" in err
    assert "--uai-max-entries" in err
    assert main(["convert", model, out, "--uai-max-entries", "4096"]) == 0
    assert formats.read_model(out)[1].n_features > 0
    help_text = _parser(with_learners=False)._subparsers._group_actions[0].choices["convert"]
    help_text = " ".join(help_text.format_help().split())
    assert formats.SUFFIX_HELP in help_text
    listed = set(re.findall(r"\.\w+", formats.SUFFIX_HELP))
    assert listed == set(formats.MN_SUFFIXES + formats.DN_SUFFIXES)
    for bad in ("m.dn", "m.txt", "m"):
        assert main(["convert", model, str(tmp_path / bad)]) == 3
        err = capsys.readouterr().err
        assert set(re.findall(r"\.\w+", err.split("; use ")[1])) == listed, err


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("BAYES\n1\n2\n0\n", 1, "expected a MARKOV network"),
        ("MARKOV\n2\n2 0\n0\n", 3, "cardinality"),  # one state (a constant) is allowed
        ("MARKOV\n1\n2\n1\n1 1\n2\n 1 1\n", 5, "an integer 0..0"),
        ("MARKOV\n2\n2 2\n1\n2 1 1\n4\n 1 1 1 1\n", 5, "lists a variable twice"),
        ("MARKOV\n1\n2\n1\n1 0\n3\n 1 1 1\n", 6, "needs 2 entries"),
        ("MARKOV\n1\n2\n1\n1 0\n2\n 1 -1\n", 7, "non-negative potential"),
        ("MARKOV\n1\n2\n1\n1 0\n2\n 1 nan\n", 7, "non-negative potential"),
        ("MARKOV\n1\n2\n1\n1 0\n2\n 1\n", 7, "unexpected end of file"),
        ("MARKOV\n1\n2\n1\n1 0\n2\n 1 1\n5\n", 8, "after the last table"),
        # issue 42: an all-zero table was accepted and scored NaN
        ("MARKOV\n2\n2 2\n2\n1 0\n1 1\n2\n 1 1\n2\n 0 0\n", 9, "all zeros"),
    ],
)
def test_malformed_files(tmp_path, text, line, message):
    path = tmp_path / "bad.uai"
    path.write_text(text)
    with pytest.raises(ModelFormatError, match=message) as err:
        read_uai(path)
    assert err.value.line == line


# written for every reader (issue 17 item 3) ---------------------------------------------------
UAI_NUMBER = re.compile(r"[0-9]+(\.[0-9]*)?")  # the UAI grammar's potentials (pgmpy's too)


def _tiny_and_huge_model():
    """Potentials far outside [1e-4, 1e16): '%.17g' wrote them with exponents."""
    schema = Schema.from_cardinalities([2, 2, 3, 2])
    fs = FeatureSet.from_features(
        schema,
        [
            (-12.0, [(0, 1, True), (1, 0, True)]),
            (38.5, [(1, 1, True), (2, 2, False)]),
            (-700.0, [(2, 0, True), (0, 0, True)]),
            (0.3, [(3, 1, True)]),  # X_3: a one-variable table
            (2.0, []),
        ],
    )
    return schema, fs


def test_potentials_are_plain_decimals_that_read_back_exactly(tmp_path):
    schema, fs = _tiny_and_huge_model()
    write_uai(tmp_path / "m.uai", schema, fs)
    lines = (tmp_path / "m.uai").read_text().split("\n")
    n_factors = int(lines[3])
    values = [
        tok for line in lines[4 + n_factors :] if line.startswith(" ") for tok in line.split()
    ]
    assert values and all(UAI_NUMBER.fullmatch(v) for v in values), [
        v for v in values if not UAI_NUMBER.fullmatch(v)
    ]
    _, fs2 = read_uai(tmp_path / "m.uai", schema=schema)
    np.testing.assert_allclose(brute_scores(fs2, schema) - brute_scores(fs, schema), 0, atol=1e-9)


def test_pgmpy_reads_the_model_and_places_every_variable(tmp_path):
    pgmpy_uai = pytest.importorskip("pgmpy.readwrite.UAI")
    schema, fs = _tiny_and_huge_model()
    write_uai(tmp_path / "m.uai", schema, fs)
    model = pgmpy_uai.UAIReader(str(tmp_path / "m.uai")).get_model()
    assert set(model.nodes()) == {f"var_{i}" for i in range(schema.n_vars)}
    # the product of pgmpy's factors is our distribution
    product = model.factors[0]
    for factor in model.factors[1:]:
        product = product * factor
    product.normalize()
    order = [f"var_{i}" for i in range(schema.n_vars)]
    p = product.get_value  # lookup by state names
    scores = brute_scores(fs, schema)
    ours = np.exp(scores - np.logaddexp.reduce(scores))
    for k, state in enumerate(itertools.product(*[range(c) for c in schema.cardinalities])):
        assert p(**dict(zip(order, state))) == pytest.approx(ours[k], rel=1e-9, abs=1e-300)
