"""streammn: learn Markov networks from data streams and files too large for memory."""

from streammn.schema import Schema, SchemaError, Variable

__version__ = "0.1.0"

__all__ = ["Schema", "SchemaError", "Variable", "__version__"]
