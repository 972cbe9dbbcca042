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
    "streammn.distributed": "connectors.distributed",
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


def install() -> None:
    """Put the finder of old paths at the end of ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.append(_OldPaths())
