"""SyntheticSource: reproducible, seekable rows from a planted model."""

import itertools

import numpy as np
import pytest

from streammn.connectors.synthetic import SyntheticSource
from helpers.helpers_mn import random_featureset
from streammn import Schema
from streammn.network.model import MarkovNetwork


@pytest.fixture(scope="module")
def mn():
    rng = np.random.default_rng(4)
    schema = Schema.from_cardinalities([2, 3, 2, 2])
    return MarkovNetwork(schema, random_featureset(rng, schema, 8, scale=0.8))


def test_seek_reproduces_the_stream(mn):
    src = SyntheticSource(mn, n_rows=1000, batch_size=128, seed=9, burn_in=20)
    full = src.read_all()
    assert full.shape == (1000, 4) and full.dtype == np.uint8
    for p in (0, 128, 300, 999, 1000):
        src.seek(p)
        rest = src.read_all()
        np.testing.assert_array_equal(rest, full[p:])
    src.seek(300)
    first = next(iter(src))
    assert (first.start, first.end, len(first)) == (300, 384, 84)
    other = SyntheticSource(mn, n_rows=1000, batch_size=128, seed=10, burn_in=20).read_all()
    assert not np.array_equal(other, full)


def test_unbounded_stream_and_distribution(mn):
    src = SyntheticSource(mn, batch_size=2000, seed=1, burn_in=30, thin=2)
    rows = np.concatenate([b.rows for b in itertools.islice(iter(src), 10)])
    assert src.position() == 20000
    states, p = mn.joint()
    idx = np.ravel_multi_index(rows.T.astype(np.int64), mn.schema.cardinalities)
    freq = np.bincount(idx, minlength=len(p)) / len(rows)
    assert 0.5 * np.abs(freq - p).sum() < 0.03
    assert "unbounded" in src.describe() and "SyntheticSource(" in repr(src)
    with pytest.raises(ValueError):
        SyntheticSource(mn, n_rows=10).seek(11)
