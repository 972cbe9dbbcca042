"""The blocked column-to-row transpose against numpy's."""

import numpy as np
import pytest

from streammn.connectors.layout import columns_to_rows


@pytest.mark.parametrize("n, k", [(0, 3), (1, 1), (7, 9), (8, 8), (64, 100), (1003, 17), (16, 255)])
def test_columns_to_rows_equals_numpy(n, k):
    rng = np.random.default_rng(n * 1000 + k)
    cols = [rng.integers(0, 256, n).astype(np.uint8) for _ in range(k)]
    out = columns_to_rows(cols)
    assert out.dtype == np.uint8 and out.flags.c_contiguous and out.shape == (n, k)
    np.testing.assert_array_equal(out, np.stack(cols, axis=1).reshape(n, k))
