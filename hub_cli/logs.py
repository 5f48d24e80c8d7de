"""Logging set-up shared by every `hub` command."""

import logging
import os


def configure_logging() -> None:
    """Log lines with time, component and message; level from HUB_LOG_LEVEL (default INFO)."""
    logging.basicConfig(
        level=os.environ.get("HUB_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    # The JVM bridge is chatty at INFO and says nothing a hub operator needs.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
