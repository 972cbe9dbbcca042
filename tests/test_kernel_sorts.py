"""The sorts numba kernels use in place of numba's argsort equal numpy's stable argsort."""

import numpy as np
import pytest

from streammn.kernel_sorts import largest_first, smallest_first


@pytest.mark.parametrize("n", [0, 1, 2, 7, 64, 1000])
def test_largest_first_is_a_stable_sort_by_size(n):
    rng = np.random.default_rng(n)
    sizes = rng.integers(0, 6, n + 5).astype(np.int64)  # few sizes: many ties
    items = rng.permutation(n + 5)[:n].astype(np.int64)
    expected = items[np.argsort(-sizes[items], kind="stable")]
    np.testing.assert_array_equal(largest_first(items, sizes), expected)


@pytest.mark.parametrize("lo, hi", [(0, 0), (3, 4), (2, 40), (0, 60)])
def test_smallest_first_is_a_stable_sort_of_a_range(lo, hi):
    keys = np.random.default_rng(hi).integers(0, 5, 60).astype(np.int32)  # many ties
    order = np.full(60, -1, dtype=np.int64)
    assert smallest_first(keys, lo, hi, order) == hi - lo
    expected = lo + np.argsort(keys[lo:hi], kind="stable")
    np.testing.assert_array_equal(order[: hi - lo], expected)
