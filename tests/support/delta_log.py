"""What a Delta table holds, read from its transaction log by a test that polls it.

Polling a table every few seconds with Spark costs a Spark job each time, CPU that the loader
under test needs on a small machine. The log's commit files list every data file with its
statistics (row count, and minimum and maximum of the first columns), which is enough to wait
for rows to land. Assertions on the rows themselves still read the table with Spark.
"""

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LiveFiles:
    """The table's data files now: those added and not removed since, with their statistics."""

    stats: list[dict[str, Any]]

    @classmethod
    def of(cls, table: Path) -> "LiveFiles":
        """Replays every commit file of `table` in order; no files before its first commit."""
        live: dict[str, dict[str, Any]] = {}
        log = table / "_delta_log"
        commits = sorted(log.glob("*.json")) if log.is_dir() else []
        for commit in commits:
            for line in commit.read_text().splitlines():
                action = json.loads(line) if line.strip() else {}
                if "add" in action:
                    add = action["add"]
                    live[add["path"]] = json.loads(add.get("stats") or "{}")
                elif "remove" in action:
                    live.pop(action["remove"]["path"], None)
        return cls(list(live.values()))

    def rows(self) -> int:
        return sum(int(stats.get("numRecords", 0)) for stats in self.stats)

    def newest(self, column: str) -> datetime | None:
        """The largest value of a timestamp column, from the files' maximum statistics."""
        values = [s["maxValues"][column] for s in self.stats if column in s.get("maxValues", {})]
        return max((datetime.fromisoformat(v) for v in values), default=None)
