"""Markov networks to and from pgmpy's ``DiscreteMarkovNetwork`` (optional extra ``pgmpy``).

streammn learns the structure; pgmpy offers exact and approximate inference, independence
queries and plotting on a fixed model. The bridge writes the model as factor tables, exactly as
the UAI writer does (:func:`streammn.formats.uai.log_factor_tables`): one ``DiscreteFactor``
per distinct feature scope holding ``exp(summed weights)`` of the features that hold at each
assignment, an edge between every two variables sharing a scope, and a uniform factor for a
variable in no scope, so pgmpy knows every cardinality. Features without conditions only scale
the model; their ``exp(sum)`` multiplies the first factor, so pgmpy's unnormalised probability
of every row, and its partition function, equal streammn's.

Named states travel as pgmpy's ``state_names``: a variable with names (words, booleans, codes)
or a number's bins gives its names or bin labels (``"[12.5, 40)"``), so queries read
``{"device": "mobile"}``; a variable of plain state numbers gives none (pgmpy numbers them
``0 .. k-1`` as streammn does).

Reading back gives one feature per factor entry whose potential is not 1 (weight its log, all
the scope's values as conditions): the same distribution, not the same features. State names
other than ``0 .. k-1`` come back as the variable's ``states`` (a bin label as a word). The file
route is UAI, which pgmpy reads and writes (``pgmpy.readwrite.UAIReader``): ``streammn convert
MODEL model.uai``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from streammn.errors import PgmpyMissing, PgmpyModelError
from streammn.features import FeatureSet
from streammn.formats.uai import log_factor_tables
from streammn.schema import Schema, Variable


def _pgmpy():
    try:
        with warnings.catch_warnings():
            # pgmpy's own modules import its deprecated estimators (pgmpy 1.1): its notice,
            # not one about the caller's code
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"pgmpy\.")
            from pgmpy.factors.discrete import DiscreteFactor
            from pgmpy.models import DiscreteMarkovNetwork
    except ImportError as e:
        raise PgmpyMissing(
            f"pgmpy is needed for this ({e}); install the extra: pip install 'streammn[pgmpy]'"
        ) from None
    return DiscreteMarkovNetwork, DiscreteFactor


def to_pgmpy(model):
    """A ``pgmpy.models.DiscreteMarkovNetwork`` with the same factors as ``model`` (a
    :class:`~streammn.network.model.MarkovNetwork`); nodes are the variable names."""
    DiscreteMarkovNetwork, DiscreteFactor = _pgmpy()
    schema = model.schema
    names, cards = schema.names, schema.cardinalities.astype(int)
    scopes, sizes, log_tables, constant = log_factor_tables(schema, model.features)
    state_names = {v.name: list(v.state_names) for v in schema if v.state_names is not None}

    def factor(scope, values):
        named = {names[v]: state_names[names[v]] for v in scope if names[v] in state_names}
        return DiscreteFactor(
            [names[v] for v in scope], [cards[v] for v in scope], values, state_names=named
        )

    net = DiscreteMarkovNetwork()
    net.add_nodes_from(names)
    factors = []
    start = 0
    for scope, size in zip(scopes, sizes):
        values = np.exp(log_tables[start : start + size])
        start += size
        net.add_edges_from(
            (names[a], names[b]) for k, a in enumerate(scope) for b in scope[k + 1 :]
        )
        factors.append(factor(scope, values))
    covered = {v for s in scopes for v in s}
    for v in range(schema.n_vars):
        if v not in covered:
            factors.append(factor([v], np.ones(cards[v])))
    if constant:
        factors[0].values = factors[0].values * math.exp(constant)
    net.add_factors(*factors)
    return net


def from_pgmpy(net) -> tuple[Schema, FeatureSet]:
    """Schema and features of a pgmpy Markov network (variables in ``net.nodes()`` order,
    states in each factor's order)."""
    _pgmpy()
    nodes = list(net.nodes())
    index = {n: i for i, n in enumerate(nodes)}
    try:
        cards = [int(net.get_cardinality(n)) for n in nodes]
    except (ValueError, KeyError) as e:  # pgmpy: a node without a factor has no cardinality
        raise PgmpyModelError(f"pgmpy model: {e}") from None
    named = {}
    for factor in net.get_factors():
        for v, states in factor.state_names.items():
            if not _numbered(states):
                named[v] = tuple(states)
    schema = Schema(Variable(str(n), c, named.get(n)) for n, c in zip(nodes, cards))
    feats = []
    for k, factor in enumerate(net.get_factors()):
        scope = [index[v] for v in factor.scope()]
        values = np.asarray(factor.values, dtype=np.float64)
        if (values < 0).any() or not np.isfinite(values).all():
            raise PgmpyModelError(
                f"pgmpy factor {k} over {factor.scope()} has a negative or non-finite potential"
            )
        for assignment in np.ndindex(*values.shape):
            p = float(values[assignment])
            if p != 1.0:
                w = math.log(p) if p > 0 else -math.inf
                feats.append((w, [(v, int(a), True) for v, a in zip(scope, assignment)]))
    return schema, FeatureSet.from_features(schema, feats)


def _numbered(states) -> bool:
    """Whether pgmpy's state names are its plain numbers ``0 .. k-1`` (booleans are names)."""
    return all(
        isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s == k
        for k, s in enumerate(states)
    )
