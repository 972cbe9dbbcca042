"""A griffe extension that turns the docstrings' Sphinx roles into links of the API reference.

streammn's docstrings are NumPy style with Sphinx roles (``:class:`~streammn.schema.Schema```),
which mkdocstrings would print as written. This extension rewrites each role, before the
docstrings are parsed, into an *optional* cross-reference: a link when the reference renders
the target, plain code when it does not (an internal module, a kernel), so the reference can
stay a selection of the public API without the build warning about every other name.

A role's target is resolved as Python would see the name from the object the docstring belongs
to (its class, then its module), so ``:meth:`drift_summary``` in ``DTSL`` links to
``streammn.dtsl.DTSL.drift_summary``; a dotted name is resolved by its first part, and a name
that does not resolve (a full path, an outside library) is kept as written.

A role whose target names nothing (a renamed or removed object of streammn, a typo, a bare name
found nowhere) is a warning, which fails CI's strict build: the role would otherwise render as plain
code and the docstring would point at nothing. Targets in outside libraries are not checked.
"""

from __future__ import annotations

import builtins
import html
import logging
import re
from functools import cache
from pathlib import Path

import griffe

ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|exc|obj):`(?P<body>[^`]+)`")
EXPLICIT = re.compile(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>", re.S)
ROOT = Path(__file__).resolve().parents[1]
# the folder `connectors/` installs as `streammn.connectors` (pyproject's package mapping)
PACKAGES = {"streammn.connectors": "connectors", "streammn": "streammn", "connectors": "connectors"}
LOG = logging.getLogger("mkdocs.plugins.sphinx_roles")  # mkdocs --strict fails on its warnings


@cache
def _package(name: str) -> griffe.Module:
    """The package ``name`` as griffe reads it from this repository (static, no import)."""
    return griffe.load(name, search_paths=[ROOT])


def _lookup(path: str) -> griffe.Object | bool | None:
    """The object of streammn at ``path`` (an import followed to what it imports), or None when
    there is none; ``path`` outside streammn is returned as found (``True``: not checked)."""
    for prefix, folder in PACKAGES.items():
        if path == prefix or path.startswith(prefix + "."):
            rest = path[len(prefix) + 1 :]
            break
    else:
        return True
    try:
        found = _package(folder)[rest] if rest else _package(folder)
    except KeyError:
        return None
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return True  # through an import of a name from outside: not checked
    if not found.is_alias:
        return found
    try:
        return found.final_target
    except griffe.CyclicAliasError:
        return True
    except griffe.AliasResolutionError:  # an import from the other package: look it up there
        return _lookup(found.target_path)


def _target(obj: griffe.Object, name: str) -> str:
    first, _, rest = name.partition(".")
    try:
        path = obj.resolve(first)
        scope = obj if obj.is_class else obj.parent
        if rest and scope is not None and scope.is_class and _is_method(scope, first):
            # ``replay.pack_rows`` in a class with a method ``replay``: the module is meant
            path = obj.module.resolve(first)
    except griffe.NameResolutionError:
        path = _inherited(obj, first)
        if path is None:
            return name
    return f"{path}.{rest}" if rest else path


def _is_method(cls: griffe.Object, name: str) -> bool:
    member = cls.members.get(name)
    return member is not None and not member.is_alias and member.is_function


def _inherited(obj: griffe.Object, name: str) -> str | None:
    """The path of ``name`` as a member the enclosing class inherits (``stop`` in a source's
    docstring is its base class's), or None."""
    cls = obj
    while cls is not None and not cls.is_class:
        cls = cls.parent
    return None if cls is None else _member_of(cls, name)


def _member_of(cls: griffe.Object, name: str) -> str | None:
    if name in cls.members:
        return cls.members[name].path
    for base in cls.bases:
        found = _lookup(base if isinstance(base, str) else base.canonical_path)
        if isinstance(found, griffe.Object) and found.is_class:
            path = _member_of(found, name)
            if path is not None:
                return path
    return None


def _names_nothing(obj: griffe.Object, target: str) -> bool:
    """Whether a role's resolved ``target`` names nothing: an object of streammn that does not
    exist, or a bare name that resolved nowhere (no builtin, no name the module assigns)."""
    if "." in target or target in PACKAGES:
        if _lookup(target) is not None:
            return False
        owner_path, _, name = target.rpartition(".")
        owner = _lookup(owner_path)
        if not isinstance(owner, griffe.Object):
            return True
        if owner.is_class:  # an inherited member?
            return _member_of(owner, name) is None
        return not (owner.is_module and _assigns(owner, name))
    return not (hasattr(builtins, target) or _assigns(obj.module, target))


def _assigns(module: griffe.Module, name: str) -> bool:
    """Whether ``module`` assigns ``name`` at its top level in a way griffe does not list
    (``A, B = 0, 1``; ``serial, parallel = twins(body)``)."""
    assigned = re.compile(rf"^(?:\w+\s*,\s*)*{re.escape(name)}(?:\s*,\s*\w+)*\s*=", re.M)
    return bool(assigned.search(module.filepath.read_text()))


def _link(obj: griffe.Object, body: str) -> str:
    explicit = EXPLICIT.fullmatch(body)
    # a name never holds spaces: any there are where a line wrapped inside the role
    name = "".join((explicit["target"] if explicit else body).split())
    if explicit:
        title = " ".join(explicit["title"].split())
    else:
        title = name.rsplit(".", 1)[-1] if name.startswith("~") else name.lstrip(".")
    target = _target(obj, name.lstrip("~."))
    if _names_nothing(obj, target):
        LOG.warning(f"{obj.path}: the role's target {name!r} names nothing in streammn")
    target = html.escape(target, quote=True)
    return f'<autoref identifier="{target}" optional><code>{html.escape(title)}</code></autoref>'


class SphinxRoles(griffe.Extension):
    """Rewrite the roles of every docstring of a loaded package (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if obj.docstring is not None:
                obj.docstring.value = ROLE.sub(lambda m: _link(obj, m["body"]), obj.docstring.value)
            stack.extend(member for member in obj.members.values() if not member.is_alias)
