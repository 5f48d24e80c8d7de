"""A Delta table's facts read from its transaction log with plain Python: no Spark job.

`/status` (spark_loaders/control/status.py) shows, for every table, its row count, its last commit
version and time. Asking Spark (`DESCRIBE HISTORY`, a `count()`) costs a job per table per
refresh, CPU the loader's own batches need; the log already says all of it. Each commit file
`_delta_log/<version>.json` holds one JSON action a line: `commitInfo` (with its `timestamp`,
milliseconds), `add` (a data file and its `stats`: `numRecords`, the minimum and maximum of the
first columns) and `remove`. Replaying the adds and removes gives the live files and their
rows; the newest commit gives the version and time.

`TableLog` keeps what it replayed and reads only commits newer than the last one it saw, so a
refresh costs a directory listing and the new commit files: on local disk, or on object storage
through Hadoop's file system (`spark_loaders.runtime.storage.HadoopFiles`).

What the log alone cannot say is reported as unknown, never guessed:
- Delta cleans up JSON commits older than its log retention (30 days) once a checkpoint
  (`<version>.checkpoint.parquet`) covers them. Reading Parquet needs a library the hub does not
  ship, so a table whose commits no longer start at version 0 has an unknown row count (its
  version and last commit time are still known).
- A file written without statistics has unknown rows.
"""

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hub_core.ledger import LocalFiles, LogFiles, commit_file, log_versions

# The quarantine column whose per-file minimum and maximum give the files' reason codes.
REASON_COLUMN = "_hub_reason_code"
MIXED_REASONS = "(several reasons in one file)"


@dataclass(frozen=True, slots=True)
class LogFacts:
    """What a table's log says now; None where it cannot say."""

    version: int | None  # the newest commit
    committed_ms: int | None  # its commitInfo timestamp
    rows: int | None
    files: int
    by_reason: dict[str, int] = field(default_factory=dict)  # quarantine tables only


@dataclass(slots=True)
class _LiveFile:
    rows: int | None
    reason: str | None


class TableLog:
    """Follows one table's `_delta_log`, reading each commit file once."""

    def __init__(self, location: Path | str, files: LogFiles | None = None) -> None:
        self.location = location
        self._files = files or LocalFiles()  # Hadoop's file system for object storage
        self._log = f"{location}/_delta_log"
        self._reset()

    def _reset(self) -> None:
        self._version = -1
        self._committed_ms: int | None = None
        self._complete = True  # every commit since version 0 was replayed
        self._live: dict[str, _LiveFile] = {}

    def refresh(self) -> LogFacts | None:
        """The table's facts after reading the commits that appeared since the last call;
        None when there is no Delta table at the location (yet, or any more)."""
        versions = log_versions(self._files, str(self.location))
        if not versions:
            return None
        newest = versions[-1]
        if newest < self._version:  # the table was replaced (a new folder at the same path)
            self._reset()
        pending = [v for v in versions if v > self._version]
        if pending and self._version < 0 and pending[0] != 0:
            self._complete = False  # commits before the first one here were cleaned up
        elif pending and self._version >= 0 and pending[0] != self._version + 1:
            self._complete = False  # a gap: cleaned up while we were not looking
        for version in pending:
            self._replay(version)
        rows: int | None = None
        if self._complete and all(f.rows is not None for f in self._live.values()):
            rows = sum(f.rows or 0 for f in self._live.values())
        reasons: Counter[str] = Counter()
        for live in self._live.values():
            if live.reason is not None and live.rows:
                reasons[live.reason] += live.rows
        return LogFacts(
            version=self._version,
            committed_ms=self._committed_ms,
            rows=rows,
            files=len(self._live) if self._complete else 0,
            by_reason=dict(reasons) if self._complete else {},
        )

    def _replay(self, version: int) -> None:
        text = self._files.read(f"{self._log}/{commit_file(version)}")
        if text is None:  # cleaned up between the listing and now
            self._complete = False
            return
        committed_ms: int | None = None
        for line in text.splitlines():
            if not line.strip():
                continue
            action: dict[str, Any] = json.loads(line)
            if "add" in action:
                add = action["add"]
                self._live[add["path"]] = _file(add.get("stats"))
            elif "remove" in action:
                self._live.pop(action["remove"]["path"], None)
            elif "commitInfo" in action:
                stamp = action["commitInfo"].get("timestamp")
                committed_ms = int(stamp) if isinstance(stamp, int) else None
        self._version = version
        self._committed_ms = committed_ms


def _file(stats_text: str | None) -> _LiveFile:
    """A data file's rows and, in a quarantine table, its reason code, from its statistics."""
    try:
        stats = json.loads(stats_text) if stats_text else {}
    except ValueError:
        stats = {}
    rows = stats.get("numRecords")
    low = (stats.get("minValues") or {}).get(REASON_COLUMN)
    high = (stats.get("maxValues") or {}).get(REASON_COLUMN)
    reason = None
    if low is not None or high is not None:
        reason = low if low == high else MIXED_REASONS
    return _LiveFile(rows if isinstance(rows, int) else None, reason)
