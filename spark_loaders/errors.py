"""Errors of the Spark loaders."""

from registry.errors import TerminalError


class LoaderError(TerminalError):
    """The loader cannot run as configured; the message says what to fix."""
