"""Errors of the `hub` command line and the local stack it runs."""

from hub_core.errors import LocalServiceFailed, TerminalError


class StackError(LocalServiceFailed):
    """A part of the local stack failed to start or died."""


class SchemaCheckError(TerminalError):
    """The check itself could not run: a bad file, mapping or registry answer."""
