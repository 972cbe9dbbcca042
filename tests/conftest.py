"""Test configuration shared by every test module.

The helpers the tests share are the package ``tests/helpers`` (see its docstring), imported
as ``from helpers.datasets import DATA``: pyproject.toml's pytest options put ``tests/`` on
``sys.path`` (``pythonpath``) and register the ``slow`` marker. Tests that take seconds to
minutes are marked ``@pytest.mark.slow`` (whole modules by ``pytestmark``):

    python -m pytest -q                  # everything, as CI runs it
    python -m pytest -q -m "not slow"    # the fast suite

No fixture is shared yet: the fixtures of the same name in different modules build different
data.
"""

import os
from pathlib import Path

# numba's on-disk cache is not safe for two processes compiling overloads of one function at
# once: each rewrites the function's index, so a process can load another's machine code for
# its own signature and fail with "can't unbox array from PyObject" (seen on a cold cache under
# ``-n auto``). Under pytest-xdist each worker, and the command-line runs its tests start (they
# inherit the variable), therefore keep a cache of their own. Set here, before any test module
# imports numba, which reads it once.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and "NUMBA_CACHE_DIR" not in os.environ:
    os.environ["NUMBA_CACHE_DIR"] = str(
        Path(__file__).resolve().parent.parent / ".numba-cache" / _WORKER
    )
