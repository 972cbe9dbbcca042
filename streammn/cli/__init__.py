"""The ``streammn`` command (``python -m streammn.cli`` runs it too).

- :mod:`~streammn.cli.parser`: the commands, their options and ``--help``; :func:`main`.
- :mod:`~streammn.cli.commands`: what each command does, on the library's public API.
- :mod:`~streammn.cli.learners`: the learners ``learn --algo`` offers and their options, read
  from each learner's parameter table (:mod:`streammn.params`).
- :mod:`~streammn.cli.options`: value checks for options, as argparse ``type=`` functions.
- :mod:`~streammn.cli.pictures`: the pictures of ``inspect --graph`` and ``report``.
"""

from streammn.cli.parser import main

__all__ = ["main"]
