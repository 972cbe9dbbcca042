"""UAI MARKOV: the written tables define the same distribution (same Z) as the features."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats_strategies import all_rows, brute_scores, log_z, models
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
    cards = [int(t) for t in toks[2:2 + n]]
    pos = 2 + n
    m = int(toks[pos])
    pos += 1
    scopes = []
    for _ in range(m):
        k = int(toks[pos])
        scopes.append([int(t) for t in toks[pos + 1:pos + 1 + k]])
        pos += 1 + k
    tables = []
    for scope in scopes:
        size = int(toks[pos])
        tables.append([float(t) for t in toks[pos + 1:pos + 1 + size]])
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
    assert np.allclose(log_z(logp), log_z(scores), rtol=0, atol=1e-9) or \
        log_z(logp) == log_z(scores) == -math.inf
    finite = np.isfinite(scores)
    np.testing.assert_array_equal(np.isfinite(logp), finite)
    np.testing.assert_allclose(logp[finite], scores[finite], atol=1e-9)
    scopes = {fs.scope(f) for f in range(fs.n_features) if fs.scope(f)}
    n_constant_factors = int((fs.lengths() == 0).any())
    if merge:
        assert n_factors == len(scopes) + n_constant_factors
    else:
        assert n_factors == int((fs.lengths() > 0).sum()) + n_constant_factors


@settings(max_examples=40, deadline=None)
@given(models(max_vars=3, max_card=3, max_features=6, weights=WEIGHTS))
def test_reader_gives_back_the_same_scores(tmp_path_factory, model):
    schema, fs = model
    path = tmp_path_factory.mktemp("uai") / "m.uai"
    write_model(path, schema, fs)
    schema2, fs2 = read_model(path, schema=schema)
    assert schema2 == schema
    a, b = brute_scores(fs, schema), brute_scores(fs2, schema)
    np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
    np.testing.assert_allclose(a[np.isfinite(a)], b[np.isfinite(b)], atol=1e-9)


def test_spec_example(tmp_path):
    path = tmp_path / "spec.uai"
    path.write_text(SPEC_EXAMPLE)
    schema, fs = read_uai(path)
    expect = [math.log([0.4, 0.6][x0] * [0.5, 0.5][x1] * [[2, 1], [1, 2]][x0][x1])
              for x0, x1 in all_rows(schema)]
    np.testing.assert_allclose(brute_scores(fs, schema), expect, atol=1e-12)
    assert all(all(eq for _, _, eq in c) for _, c in fs)


def test_known_layout_and_hard_zero(tmp_path):
    schema = Schema.from_cardinalities([2, 3])
    fs = FeatureSet.from_features(schema, [(math.log(2), [(0, 1, True), (1, 0, False)]),
                                           (-math.inf, [(1, 2, True)]), (math.log(3), [])])
    write_uai(tmp_path / "m.uai", schema, fs)
    assert (tmp_path / "m.uai").read_text().split("\n") == [
        "MARKOV", "2", "2 3", "3", "2 0 1", "1 1", "1 0",
        "6", " 1 1 1 1 2 2", "3", " 1 1 0", "2", " 3.0000000000000004 3.0000000000000004", ""]


@pytest.mark.parametrize("conds", [[(0, 1, True)], []])
def test_overflowing_potentials_are_refused(tmp_path, conds):
    schema = Schema.binary(2)
    fs = FeatureSet.from_features(schema, [(800.0, conds)])
    with pytest.raises(ModelFormatError, match="overflows"):
        write_uai(tmp_path / "m.uai", schema, fs)


def test_table_size_limit(tmp_path):
    schema = Schema.binary(12)
    fs = FeatureSet.from_features(schema, [(1.0, [(v, 1, True) for v in range(12)])])
    with pytest.raises(ModelFormatError, match="4096 entries"):
        write_uai(tmp_path / "m.uai", schema, fs, max_entries=1000)


@pytest.mark.parametrize("text, line, message", [
    ("BAYES\n1\n2\n0\n", 1, "expected a MARKOV network"),
    ("MARKOV\n2\n2 1\n0\n", 3, "cardinality"),
    ("MARKOV\n1\n2\n1\n1 1\n2\n 1 1\n", 5, "an integer 0..0"),
    ("MARKOV\n2\n2 2\n1\n2 1 1\n4\n 1 1 1 1\n", 5, "lists a variable twice"),
    ("MARKOV\n1\n2\n1\n1 0\n3\n 1 1 1\n", 6, "needs 2 entries"),
    ("MARKOV\n1\n2\n1\n1 0\n2\n 1 -1\n", 7, "non-negative potential"),
    ("MARKOV\n1\n2\n1\n1 0\n2\n 1 nan\n", 7, "non-negative potential"),
    ("MARKOV\n1\n2\n1\n1 0\n2\n 1\n", 7, "unexpected end of file"),
    ("MARKOV\n1\n2\n1\n1 0\n2\n 1 1\n5\n", 8, "after the last table"),
])
def test_malformed_files(tmp_path, text, line, message):
    path = tmp_path / "bad.uai"
    path.write_text(text)
    with pytest.raises(ModelFormatError, match=message) as err:
        read_uai(path)
    assert err.value.line == line
