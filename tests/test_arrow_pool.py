"""Arrow's memory pool in a process that imports streammn first (streammn/__init__.py): jemalloc,
unless the user chose a pool or pyarrow was loaded before (then its own choice stands)."""

import os
import subprocess
import sys

import pytest

import streammn

pytestmark = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and streammn._arrow_has_jemalloc()),
    reason="jemalloc is preferred on Linux, where pyarrow's wheels have it",
)


def pool_after(imports: str, **env: str) -> str:
    """The backend of Arrow's default pool in a fresh interpreter after ``imports``."""
    environment = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    code = f"{imports}\nimport pyarrow as pa\nprint(pa.default_memory_pool().backend_name)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**environment, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stderr == ""  # no warning from Arrow about the variable
    return done.stdout.strip()


def test_streammn_first_gives_arrow_jemalloc():
    assert pool_after("import streammn") == "jemalloc"


def test_a_pool_the_user_chose_or_pyarrow_loaded_first_stands():
    assert pool_after("import streammn", ARROW_DEFAULT_MEMORY_POOL="system") == "system"
    first = pool_after("import pyarrow")
    assert pool_after("import pyarrow\nimport streammn") == first
