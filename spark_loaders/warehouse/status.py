"""Where each gold table stands in the warehouse passes, for `hub load status` and alerts.

Like the bronze loader's feed statuses (`spark_loaders.bronze.feed_status`), one JSON file next
to the loader's checkpoints, `hub-gold.tables.json`, holds one entry per gold table of every
model built: its `GoldState`, the reason code and message of its last incident, and since when
it is in that state. The file is rewritten atomically, and only when a table changes state.

Unlike the bronze file, it may be written by two processes (the loader's passes and a
`hub warehouse build` run next to it), so every change re-reads the file under an exclusive lock
(`flock` on `hub-gold.tables.json.lock`): each writer changes only its own tables' entries, and
no writer's change is lost to another's.
"""

import fcntl
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from spark_loaders.runtime.status_files import now_iso, write_atomically
from spark_loaders.types import GoldState

STATUS_FILE = "hub-gold.tables.json"
# Reason codes of gold incidents (the 40440 of a missing source keeps its error code's name).
BUILD_FAILED = "BUILD_FAILED"
DIMENSION_NOT_BUILT = "DIMENSION_NOT_BUILT"


@dataclass(frozen=True, slots=True)
class GoldTableStatus:
    """One gold table's state in the warehouse passes."""

    table: str
    model: str  # the model file that declares it
    state: GoldState
    since: str  # ISO 8601, UTC
    reason_code: str | None = None
    message: str | None = None

    def describe(self) -> str:
        """One line for `hub load status`."""
        line = f"{self.table} ({self.model}): {self.state} since {self.since}"
        return line + (f" {self.reason_code}: {self.message}" if self.reason_code else "")


class GoldStatusBook:
    """Reads and records the gold tables' states in their status file."""

    def __init__(self, path: Path) -> None:
        self._path = path

    @classmethod
    def in_checkpoints(cls, checkpoint_dir: Path) -> "GoldStatusBook":
        """The book of the loader whose checkpoints are under `checkpoint_dir`."""
        return cls(checkpoint_dir / STATUS_FILE)

    def list(self) -> list[GoldTableStatus]:
        """Every gold table built or tried, by name."""
        statuses = self._read()
        return [statuses[t] for t in sorted(statuses)]

    def get(self, table: str) -> GoldTableStatus | None:
        return self._read().get(table)

    def record(
        self,
        table: str,
        state: GoldState,
        *,
        model: str,
        reason_code: str | None = None,
        message: str | None = None,
    ) -> None:
        """Record the table's state after a pass; the file changes only when the entry does."""
        with self._locked():
            statuses = self._read()
            current = statuses.get(table)
            since = current.since if current is not None and current.state is state else now_iso()
            status = GoldTableStatus(table, model, state, since, reason_code, message)
            if current == status:
                return
            statuses[table] = status
            write_atomically(self._path, {t: asdict(s) for t, s in sorted(statuses.items())})

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Held while a writer reads, changes and replaces the file; readers need no lock, as
        the file is replaced whole."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._path.with_name(f"{self._path.name}.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> dict[str, GoldTableStatus]:
        if not self._path.exists():
            return {}
        body = json.loads(self._path.read_text())
        return {
            table: replace(GoldTableStatus(**entry), state=GoldState(entry["state"]))
            for table, entry in body.items()
        }
