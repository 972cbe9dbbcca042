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
"""

from __future__ import annotations

import html
import re

import griffe

ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|exc|obj):`(?P<body>[^`]+)`")
EXPLICIT = re.compile(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>", re.S)


def _target(obj: griffe.Object, name: str) -> str:
    first, _, rest = name.partition(".")
    try:
        path = obj.resolve(first)
    except griffe.NameResolutionError:
        return name
    return f"{path}.{rest}" if rest else path


def _link(obj: griffe.Object, body: str) -> str:
    explicit = EXPLICIT.fullmatch(body)
    # a name never holds spaces: any there are where a line wrapped inside the role
    name = "".join((explicit["target"] if explicit else body).split())
    if explicit:
        title = " ".join(explicit["title"].split())
    else:
        title = name.rsplit(".", 1)[-1] if name.startswith("~") else name.lstrip(".")
    target = html.escape(_target(obj, name.lstrip("~.")), quote=True)
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
