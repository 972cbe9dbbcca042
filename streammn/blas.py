"""BLAS thread limits for the hot paths that run numpy linear algebra many times a second.

``threadpoolctl.threadpool_limits`` finds the process's thread pools anew at every call by
reading its loaded libraries, a few milliseconds each time: more than the small matrix products
and factorisations it guards on a fast stream or in an optimiser's inner loop. numpy's BLAS is
loaded with numpy, so the pools are found once here. (A library loaded later, such as scipy's
own BLAS, is not seen: code limiting scipy keeps ``threadpool_limits``, called once per fit.)
"""

from __future__ import annotations

import functools

from threadpoolctl import ThreadpoolController


@functools.cache
def _controller() -> ThreadpoolController:
    return ThreadpoolController()


def blas_threads(limit: int):
    """A context manager that holds numpy's BLAS to ``limit`` threads."""
    return _controller().limit(limits=limit, user_api="blas")
