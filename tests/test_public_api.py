"""The public API (the names of ``streammn/__init__.py``) is typed: every function and public
method of those names annotates its parameters and its result, the stub type checkers read
for the lazily loaded names lists exactly those names, and ``py.typed`` and the stub ship with
the package (issue 38)."""

import ast
import inspect
import tomllib
from pathlib import Path

import streammn
from streammn import _LAZY

ROOT = Path(streammn.__file__).parent


def public_callables():
    """(qualified name, function) of every public function, and every public method and
    property a class of the package's names defines (exceptions left out)."""
    for name in streammn.__all__:
        obj = getattr(streammn, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            continue
        if not inspect.isclass(obj):
            if callable(obj):
                yield name, obj
            continue
        for attr, member in vars(obj).items():
            if attr.startswith("_") and attr != "__init__":
                continue
            if isinstance(member, property):
                yield f"{name}.{attr}", member.fget
            elif isinstance(member, (classmethod, staticmethod)):
                yield f"{name}.{attr}", member.__func__
            elif inspect.isfunction(member):
                yield f"{name}.{attr}", member


def unannotated(func) -> list[str]:
    """The parameters of ``func`` without a type, and ``return`` if its result has none
    (``__init__`` returns None)."""
    signature = inspect.signature(func)
    missing = [
        p.name
        for p in signature.parameters.values()
        if p.name not in ("self", "cls")
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and p.annotation is p.empty
    ]
    if func.__name__ != "__init__" and signature.return_annotation is signature.empty:
        missing.append("return")
    return missing


def test_public_functions_are_annotated():
    callables = dict(public_callables())
    assert len(callables) > 100  # the learners', the model's, the schema's, the functions
    missing = {name: unannotated(func) for name, func in callables.items()}
    assert {name: gaps for name, gaps in missing.items() if gaps} == {}


def test_type_checkers_see_the_lazy_names():
    """The stub ``__init__.pyi`` imports exactly the names ``__init__.py`` exports, each from
    the module it loads it from."""
    imported = {}
    for node in ast.parse((ROOT / "__init__.pyi").read_text()).body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                assert alias.asname == alias.name  # an explicit re-export
                imported[alias.name] = node.module
    assert set(imported) | {"__version__"} == set(streammn.__all__)
    assert {name: imported[name] for name in _LAZY} == _LAZY


def test_py_typed_ships_with_the_package():
    assert (ROOT / "py.typed").is_file()
    pyproject = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())
    assert {"py.typed", "__init__.pyi"} <= set(
        pyproject["tool"]["setuptools"]["package-data"]["streammn"]
    )
