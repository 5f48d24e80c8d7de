"""Errors of the Spark loaders."""

from registry.errors import LocalServiceFailed


class LoaderError(LocalServiceFailed):
    """The loader cannot run as configured; the message says what to fix."""
