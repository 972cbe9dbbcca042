"""The seams between the parts, checked from the source (issue 39): imports run one way, no module
reaches into another's private names, and the engine calls its learner and source instead of
probing them. Read with ``ast``, so nothing is imported."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("streammn", "connectors")  # folders; connectors/ installs as streammn.connectors
CONNECTORS = "streammn.connectors"
# the command-line application wires the core to the connectors
APPLICATION = {"streammn.cli", "streammn.demo"}  # packages (see _package)


def _modules() -> dict[str, Path]:
    """Every module by the name it is imported as (``connectors/csv.py``:
    ``streammn.connectors.csv``)."""
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if parts[0] == "connectors":
                parts.insert(0, "streammn")
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: Path):
    """``(imported module, imported name or None)`` for every absolute import in the file,
    at any depth (an import inside a function is a dependency too)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None


def _graph() -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        deps = set()
        for imported, name in _imports(path):
            target = (name and _resolve(f"{imported}.{name}")) or _resolve(imported)
            if target and target != module:
                deps.add(target)
        graph[module] = deps
    return graph


def _assert_acyclic(graph: dict[str, set[str]]) -> None:
    state: dict[str, int] = {}  # 1: on the path being explored, 2: done

    def visit(node, path):
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycle = path[path.index(dep) :] + [dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, path + [dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def test_no_import_cycle_between_files():
    _assert_acyclic(_graph())


def _package(module: str) -> str:
    """The part of the tree a module belongs to: the connectors, a subpackage of ``streammn``
    (``streammn.trees``), or a module at ``streammn``'s top level."""
    parts = module.split(".")
    if module == CONNECTORS or module.startswith(CONNECTORS + "."):
        return CONNECTORS
    if len(parts) > 1 and (ROOT / "streammn" / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def test_no_import_cycle_between_packages():
    """Layers run one way: no package imports one that (through others) imports it back."""
    graph: dict[str, set[str]] = {}
    for module, deps in _graph().items():
        graph.setdefault(_package(module), set()).update(
            _package(dep) for dep in deps if _package(dep) != _package(module)
        )
    _assert_acyclic(graph)


def test_the_core_does_not_import_the_connectors():
    offenders = [
        f"{module} imports {dep}"
        for module, deps in _graph().items()
        if _package(module) not in APPLICATION | {CONNECTORS}
        for dep in deps
        if _package(dep) == CONNECTORS
    ]
    assert offenders == []
    assert any(_package(dep) == CONNECTORS for dep in _graph()["streammn.cli.commands"])


def test_every_package_is_installed():
    """pyproject.toml lists the packages (connectors/ installs under streammn): every folder
    with an ``__init__.py`` is on the list, and nothing else."""
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for package in PACKAGES
        for init in (ROOT / package).rglob("__init__.py")
    }
    assert listed == found | {CONNECTORS}


def test_no_module_imports_another_modules_private_names():
    offenders = [
        f"{module}: from {imported} import {name}"
        for module, path in MODULES.items()
        for imported, name in _imports(path)
        if name
        and name.startswith("_")
        and not name.startswith("__")
        and imported.split(".")[0] in PACKAGES
    ]
    assert offenders == []


def test_the_engine_calls_its_learner_and_source_instead_of_probing_them():
    tree = ast.parse(MODULES["streammn.stream.engine"].read_text())
    probes = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
    ]
    assert probes == []


def test_every_moved_module_still_imports_from_its_old_path_with_a_warning():
    """The old flat paths (streammn.moved) give the new modules' objects, and say where they are."""
    import importlib
    import sys
    import warnings

    import streammn
    from streammn.moved import MOVED

    for old, new in MOVED.items():
        sys.modules.pop(old, None)
        before = dict(vars(streammn))  # importing `streammn.dn2mn` would shadow the function
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            alias = importlib.import_module(old)
        assert [str(w.message) for w in caught] == [f"{old} moved to {new}"], old
        target = importlib.import_module(new)
        public = getattr(target, "__all__", None) or [n for n in vars(target) if n[0] != "_"]
        assert public and all(getattr(alias, n) is getattr(target, n) for n in public), old
        sys.modules.pop(old)
        vars(streammn).clear()
        vars(streammn).update(before)


def test_the_old_connectors_package_is_the_new_one_with_a_warning(tmp_path):
    """``import connectors`` (its name before streammn.connectors) still works for a release:
    the same module objects, so a class is the same class either way; one warning."""
    import subprocess
    import sys

    code = (
        "import warnings; warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    import connectors, connectors.csv\n"
        "    from connectors.parquet import ParquetSource\n"
        "import streammn.connectors as new, streammn.connectors.csv, streammn.connectors.parquet\n"
        "assert connectors is new and connectors.csv is new.csv\n"
        "assert ParquetSource is new.parquet.ParquetSource\n"
        "assert connectors.csv.__spec__.name == 'streammn.connectors.csv'\n"
        "print([str(w.message) for w in caught])\n"
    )
    done = subprocess.run(  # a fresh process, from outside the repository
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "['the package connectors is now streammn.connectors']"
