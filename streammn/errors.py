"""One exception root for every error streammn raises on purpose, with its CLI exit code.

Each library error class derives from one of the three kinds below, and the kind carries the
exit code the ``streammn`` command returns for it, so the CLI maps any error in one line
(``error.exit_code``) instead of a list of ``isinstance`` checks that falls behind the code:

- :class:`SettingsError` (exit 2): arguments or options that make no sense, or that contradict
  what a snapshot being resumed was made with.
- :class:`DataError` (exit 3): rows, model files, snapshots or learner states that are malformed.
- :class:`UnavailableError` (exit 4): a source or service that cannot be reached at all.

Errors outside this tree (a bug, ``MemoryError``) exit 1. The kinds keep ``ValueError`` as a
base so code that caught ``ValueError`` before the root existed keeps working.
"""

from __future__ import annotations

EXIT_OK, EXIT_OTHER, EXIT_USAGE, EXIT_BAD_INPUT, EXIT_UNAVAILABLE = 0, 1, 2, 3, 4
EXIT_SIGTERM, EXIT_SIGINT = 143, 130


class StreamMNError(Exception):
    """Root of every error streammn raises on purpose; ``exit_code`` is the CLI's."""

    exit_code = EXIT_OTHER


class SettingsError(StreamMNError, ValueError):
    """Options or arguments that are invalid or inconsistent (exit code 2)."""

    exit_code = EXIT_USAGE


class UsageError(SettingsError):
    """Command-line arguments that parse but do not make sense together (exit code 2)."""


class DataError(StreamMNError, ValueError):
    """Input rows, files, models, snapshots or states that are malformed (exit code 3)."""

    exit_code = EXIT_BAD_INPUT


class UnavailableError(StreamMNError):
    """A source, file or service that cannot be reached at all (exit code 4)."""

    exit_code = EXIT_UNAVAILABLE


def exit_code(error: BaseException) -> int:
    """The CLI exit code for ``error``: its class's own, 130 for Ctrl-C, else 1."""
    if isinstance(error, KeyboardInterrupt):
        return EXIT_SIGINT
    return (
        getattr(error, "exit_code", EXIT_OTHER) if isinstance(error, StreamMNError) else EXIT_OTHER
    )
