"""An in-memory numpy matrix as a source: :class:`~streammn.stream.source.ArraySource`, from the
core (learners turn a matrix given to ``fit`` into a source with it)."""

from streammn.stream.source import ArraySource

__all__ = ["ArraySource"]
