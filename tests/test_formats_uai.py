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
from streammn.formats import (
    UAI_MAX_ENTRIES,
    ModelFormatError,
    read_model,
    read_uai,
    write_model,
    write_uai,
)

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
    if merge:  # covering scopes: every feature in a table that holds its scope, none nested
        tables = [set(s) for s in written if len(s) >= 2]
        for f in range(fs.n_features):
            assert len(fs.scope(f)) < 2 or any(set(fs.scope(f)) <= t for t in tables)
        assert not any(a < b for a in tables for b in tables)


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
        "1",
        "2 0 1",  # the feature over X_1 is folded into the table over X_0, X_1 that holds it
        "6",  # the constant 3 multiplies the first table
        " 3.0000000000000004 3.0000000000000004 0 3.0000000000000004 6 0",
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


def test_tables_beyond_two_to_the_62_are_refused_whatever_the_limit(tmp_path):
    schema = Schema.binary(70)
    fs = FeatureSet.from_features(schema, [(1.0, [(v, 1, True) for v in range(70)])])
    with pytest.raises(ModelFormatError, match=r"1.18e\+21 entries, more than 2\*\*62"):
        write_uai(tmp_path / "m.uai", schema, fs, max_entries=2**70)
    assert not (tmp_path / "m.uai").exists()


def test_convert_has_one_uai_limit_and_says_what_works(tmp_path, capsys):
    """Snapshots and convert refuse the same tables, convert names what works instead and the
    option that raises the limit, and an unknown suffix lists what --help lists."""
    import re

    from streammn import formats
    from streammn.cli import main
    from streammn.cli.parser import _parser
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


# covering scopes (issue 38 item 9) --------------------------------------------------------------
def _scopes_of(fs):
    return [fs.scope(f) for f in range(fs.n_features) if fs.scope(f)]


def _one_table_per_scope(schema, fs) -> float:
    """Entries of the tables the writer used to write: one per distinct scope."""
    return sum(
        float(np.prod(schema.cardinalities[list(s)].astype(float))) for s in set(_scopes_of(fs))
    )


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 130), st.data())
def test_maximal_scopes_hold_every_scope(n_vars, data):
    """Every distinct scope goes to a maximal one that holds it; the maximal ones are exactly
    the scopes that no other scope holds. Scopes are drawn inside a few base scopes (over
    variables in one word of a bitset or in several), so that many are nested."""
    from streammn.formats.uai import _maximal_scopes

    variables = st.integers(0, n_vars - 1)
    bases = data.draw(st.lists(st.sets(variables, min_size=1, max_size=12), min_size=1, max_size=4))
    inside = st.sampled_from([sorted(b) for b in bases]).flatmap(
        lambda b: st.sets(st.sampled_from(b), min_size=1)
    )
    other = st.sets(variables, min_size=1, max_size=6)
    drawn = data.draw(st.lists(st.one_of(inside, other), max_size=30))
    scopes = list(dict.fromkeys(tuple(sorted(s)) for s in [*map(sorted, bases), *drawn]))
    ptr = np.cumsum([0] + [len(s) for s in scopes]).astype(np.int64)
    var = np.array([v for s in scopes for v in s], dtype=np.int64)
    cover = _maximal_scopes(ptr, var, n_vars)
    np.testing.assert_array_equal(cover, _maximal_scopes(ptr, var, n_vars, max_bit_words=0))
    for g, s in enumerate(scopes):
        assert set(s) <= set(scopes[cover[g]])
        is_maximal = not any(set(s) < set(t) for t in scopes)
        assert (cover[g] == g) == is_maximal


@settings(max_examples=50, deadline=None)
@given(models(max_vars=6, max_card=3, max_features=25, weights=WEIGHTS))
def test_covering_tables_read_back_to_the_same_scores(tmp_path_factory, model):
    """Brute force over every state: the features folded into covering tables, written and
    read back, score each state as the model does (to 1e-9, -inf where it is -inf); the tables
    never hold more entries than one table per scope did, nor more than one table over all the
    variables."""
    from streammn.formats.uai import UaiFactors

    schema, fs = model
    path = tmp_path_factory.mktemp("uai") / "m.uai"
    write_uai(path, schema, fs)
    assume(np.isfinite(_every_state_scores(schema, fs)).any())
    _same_scores_on_every_state(schema, fs, read_uai(path, schema=schema)[1])
    factors = UaiFactors(schema, fs, merge=True)
    assert factors.total <= _one_table_per_scope(schema, fs)
    assert factors.total <= np.prod(schema.cardinalities.astype(float))


def _long_features(n_features: int, lengths: tuple[int, int], seed: int):
    """16 binary variables and features over random scopes of the given lengths."""
    rng = np.random.default_rng(seed)
    schema = Schema.binary(16)
    feats = []
    for _ in range(n_features):
        scope = rng.choice(16, size=rng.integers(*lengths, endpoint=True), replace=False)
        feats.append((rng.normal(), [(int(v), int(rng.integers(2)), True) for v in scope]))
    feats.append((-math.inf, [(0, 1, True), (5, 0, True), (9, 1, True)]))  # a hard zero
    return schema, FeatureSet.from_features(schema, feats)


def _states(schema):
    return np.array(all_rows(schema), dtype=np.uint8)


def _written_tables(path) -> list[tuple[tuple[int, ...], int]]:
    """Each table's scope and number of entries, as a UAI file lists them."""
    tokens = path.read_text().split()
    n_vars = int(tokens[1])
    at = 3 + n_vars
    scopes = []
    for _ in range(int(tokens[2 + n_vars])):
        k = int(tokens[at])
        scopes.append(tuple(map(int, tokens[at + 1 : at + 1 + k])))
        at += 1 + k
    sizes = []
    for _ in scopes:
        sizes.append(int(tokens[at]))
        at += 1 + sizes[-1]
    assert at == len(tokens)
    return list(zip(scopes, sizes))


def _every_state_scores(schema, fs) -> np.ndarray:
    """The unnormalised log score of every state, a dense array over the joint states (first
    variable slowest, as ``all_rows``): each feature adds its weight to the block of states
    where its conditions hold. By brute force, but the features that fix every variable they
    test (all of a UAI file's, read back) are added scope by scope, so 16 binary variables with
    tens of thousands of features take a second."""
    cards = schema.cardinalities.tolist()
    scores = np.zeros(cards)
    fixed: dict[tuple[int, ...], list] = {}
    for w, conds in fs:
        if all(eq for _, _, eq in conds) and len({v for v, _, _ in conds}) == len(conds):
            fixed.setdefault(tuple(v for v, _, _ in conds), []).append(
                (w, [a for _, a, _ in conds])
            )
            continue
        allowed = [np.ones(c, dtype=bool) for c in cards]
        for v, a, eq in conds:
            allowed[v] &= (np.arange(cards[v]) == a) == eq
        scores[np.ix_(*[np.flatnonzero(m) for m in allowed])] += w
    for scope, feats in fixed.items():  # a table over the scope, broadcast over the rest
        weights = np.array([w for w, _ in feats])
        if not scope:
            scores += weights.sum()
            continue
        table = np.zeros([cards[v] for v in scope])
        np.add.at(table, tuple(np.array([a for _, a in feats]).T), weights)
        table = table.transpose(np.argsort(scope))  # axes in the variables' order
        scores += table.reshape([cards[v] if v in scope else 1 for v in range(len(cards))])
    return scores.ravel()


def _same_scores_on_every_state(schema, fs, back):
    a, b = _every_state_scores(schema, fs), _every_state_scores(schema, back)
    np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
    np.testing.assert_allclose(a[np.isfinite(a)], b[np.isfinite(b)], rtol=0, atol=1e-9)


def test_sixteen_binary_variables_need_at_most_2_16_entries(tmp_path):
    """Hundreds of distinct long scopes over 16 binary variables needed millions of entries in
    one table per scope (more than the default limit); covering tables need at most 2**16, and
    the file read back scores all 65,536 states as the model does."""
    schema, fs = _long_features(1500, (12, 13), seed=0)
    assert _one_table_per_scope(schema, fs) > UAI_MAX_ENTRIES
    path = tmp_path / "m.uai"
    write_model(path, schema, fs)
    assert sum(size for _, size in _written_tables(path)) <= 2**16
    _same_scores_on_every_state(schema, fs, read_model(path, schema=schema)[1])


def test_covering_tables_keep_separate_parts_apart(tmp_path):
    """Two groups of variables that no feature joins get tables of their own, and a group
    whose scopes are nested gets its largest scope's table only."""
    schema = Schema.from_cardinalities([2, 3, 2, 2, 2, 2])
    fs = FeatureSet.from_features(
        schema,
        [
            (0.5, [(0, 1, True), (1, 2, True)]),
            (-0.25, [(1, 0, False), (2, 1, True)]),  # {0,1} and {1,2}: one table over {0,1,2}
            (0.75, [(3, 1, True), (4, 0, True), (5, 1, True)]),
            (1.5, [(4, 1, True)]),  # inside {3,4,5}
            (-1.0, [(3, 0, True), (5, 0, True)]),  # inside {3,4,5}
            (0.1, []),
        ],
    )
    write_uai(tmp_path / "m.uai", schema, fs)
    assert _written_tables(tmp_path / "m.uai") == [((0, 1, 2), 12), ((3, 4, 5), 8)]
    _same_scores_on_every_state(schema, fs, read_uai(tmp_path / "m.uai", schema=schema)[1])


@pytest.mark.slow
def test_libras_nltcs_model_is_written_in_covering_tables(tmp_path):
    """Libra's nltcs model (exact DTSL at kappa 0.1, DN2MN without merging: 38,076 features,
    REFERENCE.md) needs 437,848 entries in one table per scope and at most 2**16 in covering
    tables; every one of its 65,536 states scores the same read back."""
    from helpers.datasets import DATA
    from streammn.dn.conversion import dn2mn
    from streammn.dtsl import DTSL
    from streammn.stream.source import ArraySource

    train = np.loadtxt(DATA / "nltcs" / "nltcs.train.data", delimiter=",", dtype=np.uint8)
    schema = Schema.binary(train.shape[1])
    dn = DTSL(schema, kappa=0.1, mode="exact", cpd="tree").fit(ArraySource(train, schema=schema))
    fs = dn2mn(dn.to_dependency_network(), train=train, weights="closed-form", merge=False).features
    assert fs.n_features == 38076
    assert _one_table_per_scope(schema, fs) > 4 * 2**16
    path = tmp_path / "nltcs.uai"
    write_model(path, schema, fs)
    assert sum(size for _, size in _written_tables(path)) <= 2**16
    _same_scores_on_every_state(schema, fs, read_model(path, schema=schema)[1])
