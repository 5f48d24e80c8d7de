"""Logging shared by every `hub` command: readable lines or JSON, and never a secret.

HUB_LOG_LEVEL (default INFO) and HUB_LOG_FORMAT (`text`, default, or `json`: one object per
line with time, level, logger and message, for log collectors).
"""

import json
import logging
import os
import re
from datetime import UTC, datetime
from typing import Any

# API keys (`hub_<id>_<secret>`), passwords in URLs and `password=` parameters (libpq
# connection strings, JDBC URLs) are masked wherever they appear.
_SECRETS = (
    (re.compile(r"\bhub_([0-9a-f]{6,})_[A-Za-z0-9_\-]{8,}"), r"hub_\1_***"),
    (re.compile(r"(://[^:/@\s]+:)[^/\s]*@"), r"\1***@"),  # up to the last @ of the authority
    (re.compile(r"(\b(?:password|passwd|pwd)=)[^\s&;,'\"]+", re.IGNORECASE), r"\1***"),
    # The web console's cookies (a session id, a form token), should a Cookie header be logged.
    (re.compile(r"(\bhub_console_(?:session|form)=)[^\s;,'\"]+"), r"\1***"),
)


def redact(text: str) -> str:
    """`text` with API key secrets and URL passwords replaced by `***`."""
    if "hub_" not in text and "://" not in text and "=" not in text:
        return text  # none of the patterns can match: most lines (access log lines) end here
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


class _Redacting(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class _TextFormatter(logging.Formatter):
    """Lines with the traceback and stack masked too: an exception's message (a connection
    URL with its password) reaches the log through them, not through the record's message."""

    def formatException(self, ei: Any) -> str:
        return redact(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return redact(super().formatStack(stack_info))

    def format(self, record: logging.LogRecord) -> str:
        # A traceback another handler formatted first is cached unmasked in `exc_text`.
        return redact(super().format(record))


class _JsonFormatter(_TextFormatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["error"] = redact(record.exc_text)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry)


def configure_logging() -> None:
    """Configure the root logger from HUB_LOG_LEVEL and HUB_LOG_FORMAT."""
    handler = logging.StreamHandler()
    if os.environ.get("HUB_LOG_FORMAT", "text").lower() == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(
            _TextFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")
        )
    handler.addFilter(_Redacting())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("HUB_LOG_LEVEL", "INFO").upper())
    # These are chatty at INFO and say nothing a hub operator needs.
    for name in ("py4j", "httpx", "alembic.runtime.plugins"):
        logging.getLogger(name).setLevel(logging.WARNING)
