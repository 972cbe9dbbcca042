"""Old module paths, kept importable for one release after their modules moved into packages.

``import streammn.model`` (or ``from streammn.features import FeatureSet``) still works: a finder
at the end of ``sys.meta_path`` answers only for the old names in :data:`MOVED`, imports the
module's new home and hands back a module holding the same objects, with a
``DeprecationWarning`` naming the new path. The alias is a copy of the namespace taken at import,
so assigning to it does not reach the real module (patch the new path instead).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = {
    # the Markov network: the model, scoring kernels, weight learning
    "streammn.model": "streammn.network.model",
    "streammn.loglinear": "streammn.network.loglinear",
    "streammn.bitscan": "streammn.network.bitscan",
    "streammn.reach_lists": "streammn.network.reach_lists",
    "streammn.grouping": "streammn.features.grouping",
    "streammn.weights": "streammn.network.weights",
    "streammn.weight_sample": "streammn.network.weight_sample",
    "streammn.lbfgs": "streammn.network.lbfgs",
    # dependency networks and DN2MN
    "streammn.dn_to_mn": "streammn.dn.conversion",
    "streammn.dn2mn": "streammn.dn.conversion",
    # the stream path: sources, the engine's loop, snapshots and what they publish
    "streammn.engine": "streammn.stream.engine",
    "streammn.source": "streammn.stream.source",
    "streammn.snapshot": "streammn.stream.snapshot",
    "streammn.publishing": "streammn.stream.publishing",
    "streammn.published": "streammn.network.published",
    "streammn.warmup": "streammn.stream.warmup",
    "streammn.resume_guard": "streammn.stream.resume_guard",
    "streammn.progress": "streammn.stream.progress",
    # the command line
    "streammn.commands": "streammn.cli.commands",
    "streammn.options": "streammn.cli.options",
    "streammn.pictures": "streammn.cli.pictures",
    "streammn.learners": "streammn.cli.learners",
    # the connectors' Dask passes
    "streammn.distributed": "streammn.connectors.distributed",
}


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return None  # a plain module, filled by exec_module

    def exec_module(self, module) -> None:
        new = MOVED[module.__name__]
        warnings.warn(f"{module.__name__} moved to {new}", DeprecationWarning, stacklevel=2)
        target = importlib.import_module(new)
        names = getattr(target, "__all__", None) or [
            name for name in vars(target) if not name.startswith("__")
        ]
        module.__dict__.update({name: getattr(target, name) for name in names})
        module.__doc__ = f"Deprecated: moved to :mod:`{new}`."


class _PackageAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``old.x`` with the module ``new.x`` itself (not a copy: a class imported
    either way is the same class)."""

    def __init__(self, old: str, new: str):
        self.old, self.new = old, new
        self._specs: dict = {}  # each module's own spec, while the import system has another

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(self.old + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module(self.new + spec.name[len(self.old) :])
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # the import system gave the module the alias's spec: give its own back
        module.__spec__ = self._specs.pop(module.__name__)


def alias_package(old: str, new: str) -> None:
    """Make the package ``old`` (being imported) and its submodules the modules of ``new``,
    with a ``DeprecationWarning``: for a package that moved whole (``connectors``)."""
    warnings.warn(f"the package {old} is now {new}", DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
    if not any(isinstance(f, _PackageAlias) and f.old == old for f in sys.meta_path):
        sys.meta_path.insert(0, _PackageAlias(old, new))


def install() -> None:
    """Put the finder of old paths at the end of ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.append(_OldPaths())
