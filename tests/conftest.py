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
