"""streammn reaches numba and llvmlite through public names only (issue 42, finding 6).

A private name (``numba.np.linalg._LAPACK`` was one) can go in any numba release and take
``import streammn...`` with it. The check reads the source: every name imported from a numba or
llvmlite module, every module imported, and every attribute read from a name bound to one of
them; a part with a leading underscore (dunders aside) fails it.
"""

import ast
from pathlib import Path

import pytest

import streammn

PACKAGES = ("numba", "llvmlite")


def _private(dotted):
    return any(p.startswith("_") and not p.endswith("__") for p in dotted.split("."))


def _dotted(node):
    """``a.b.c`` for an attribute chain rooted at a plain name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def private_uses(source):
    """``(line, dotted name)`` of every private numba or llvmlite name ``source`` reaches."""
    tree = ast.parse(source)
    bound, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    bound.add(alias.asname or alias.name.split(".")[0])
                    if _private(alias.name):
                        found.append((node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in PACKAGES:
                for alias in node.names:
                    bound.add(alias.asname or alias.name)
                    if _private(f"{node.module}.{alias.name}"):
                        found.append((node.lineno, f"{node.module}.{alias.name}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Store):
            name = _dotted(node)
            if name and name.split(".")[0] in bound and _private(name):
                found.append((node.lineno, name))
    return sorted(set(found))


@pytest.mark.parametrize(
    "source",
    [
        "from numba.np.linalg import _LAPACK\n",
        "from numba.np import linalg\nf = linalg._LAPACK().numba_ez_xxgetri\n",
        "import numba.np.linalg as la\nla._LAPACK()\n",
        "import numba\nnumba.np.linalg._LAPACK()\n",
        "import numba as nb\nx = nb._helperlib\n",
        "from numba import _helperlib\n",
        "import llvmlite.binding as llvm\nllvm.ffi._lib\n",
    ],
)
def test_the_check_finds_private_names(source):
    assert private_uses(source)


def test_the_check_passes_public_names_and_other_packages():
    source = (
        "import numba as nb\nimport numpy as np\nfrom numba.extending import intrinsic\n"
        "nb.types.ExternalFunction\nnb.__version__\nnp._NoValue\n"
        '"""numba.np.linalg._LAPACK in a docstring is not a use"""\n'
    )
    assert private_uses(source) == []


def test_no_module_of_streammn_uses_a_private_numba_name():
    root = Path(streammn.__file__).parent
    uses = {
        str(path.relative_to(root)): found
        for path in sorted(root.rglob("*.py"))
        if (found := private_uses(path.read_text()))
    }
    assert uses == {}
