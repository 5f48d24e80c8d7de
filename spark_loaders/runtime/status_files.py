"""The loader's status files beside its checkpoints (the bronze feeds' and the gold tables'):
JSON rewritten atomically, with times in UTC."""

import datetime as dt
import json
import os
from pathlib import Path


def write_atomically(path: Path, body: object) -> None:
    """Write `body` as JSON to a temporary file renamed over `path`: a reader in another
    process sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(body, indent=1))
    os.replace(temporary, path)


def now_iso() -> str:
    """Now, in UTC, as the ISO 8601 text the status files hold."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
