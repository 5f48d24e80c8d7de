"""Where each topic stands in the bronze loader, for `hub load status` and alerts.

The loader keeps one JSON file next to its checkpoint, `hub-bronze.feeds.json`, with one entry
per topic it has seen: its `FeedState`, the reason code and message of the last incident, since
when it is in that state and in which batch it got there. The file is rewritten (atomically:
a temporary file renamed over it) only when a topic changes state, so a healthy loader does
not write it at every batch; readers in other processes never see half a file.

For a parked topic the entry also lists, per partition, the first and last offset of every
batch that was neither landed nor quarantined: those records are still in Kafka (until its
retention ends) and `hub load reprocess TOPIC` lands them once the cause is fixed. The loader
drops a range from the list when it swaps in a rebuild that read the partition past the range's
last offset (`reprocessed`): only then are the records in the table. Landing again does not
clear the list, since later batches do not hold the parked offsets.
"""

import json
import logging
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from spark_loaders.runtime.status_files import now_iso, write_atomically
from spark_loaders.types import FeedState

log = logging.getLogger(__name__)

STATUS_FILE = "hub-bronze.feeds.json"


@dataclass(frozen=True, slots=True)
class FeedStatus:
    """One topic's state in the loader."""

    topic: str
    state: FeedState
    since: str  # ISO 8601, UTC
    batch_id: int
    reason_code: str | None = None
    message: str | None = None
    # partition -> [first, last] offset not landed while parked (JSON keys are strings).
    parked_offsets: dict[str, list[int]] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for `hub load status`."""
        line = f"{self.topic}: {self.state} since {self.since} (batch {self.batch_id})"
        if self.reason_code:
            line += f" {self.reason_code}: {self.message}"
        if self.parked_offsets:
            ranges = ", ".join(
                f"partition {p} offsets {first}-{last}"
                for p, (first, last) in sorted(self.parked_offsets.items(), key=lambda i: int(i[0]))
            )
            line += f"; waiting in Kafka: {ranges}"
        return line


class FeedStatusBook:
    """Reads and records the loader's per-topic states in its status file."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._statuses = self._read()

    @classmethod
    def in_checkpoints(cls, checkpoint_dir: Path) -> "FeedStatusBook":
        """The book of the bronze loader whose checkpoints are under `checkpoint_dir`."""
        return cls(checkpoint_dir / STATUS_FILE)

    def list(self) -> list[FeedStatus]:
        """Every topic seen, by name."""
        return [self._statuses[t] for t in sorted(self._statuses)]

    def get(self, topic: str) -> FeedStatus | None:
        return self._statuses.get(topic)

    def landing(self, topic: str, *, batch_id: int) -> None:
        """The topic's batch landed; a topic back from quarantine or parking says so in the log."""
        current = self._statuses.get(topic)
        if current is not None and current.state is FeedState.LANDING:
            return
        if current is not None:
            log.info("feed %s lands again in batch %d (was %s)", topic, batch_id, current.state)
        waiting = current.parked_offsets if current is not None else {}
        # Offsets parked before stay listed until a reprocessing swap has landed them.
        self._set(FeedStatus(topic, FeedState.LANDING, now_iso(), batch_id, parked_offsets=waiting))

    def reprocessed(self, topic: str, *, end_offsets: dict[str, int]) -> None:
        """A rebuild read `topic` up to `end_offsets` (partition -> last offset) and is swapped
        in: parked offsets up to there are in the table now, so they are no longer listed."""
        current = self._statuses.get(topic)
        if current is None or not current.parked_offsets:
            return
        waiting: dict[str, list[int]] = {}
        for partition, (first, last) in current.parked_offsets.items():
            end = end_offsets.get(partition)
            if end is None or end < first:
                waiting[partition] = [first, last]
            elif end < last:
                waiting[partition] = [end + 1, last]
        if waiting != current.parked_offsets:
            log.info(
                "feed %s: parked offsets landed by reprocessing; still waiting: %s",
                topic,
                waiting or "none",
            )
        self._set(replace(current, parked_offsets=waiting))

    def set_aside(
        self,
        topic: str,
        state: FeedState,
        *,
        batch_id: int,
        reason_code: str,
        message: str,
        offsets: dict[int, tuple[int, int]] | None = None,
    ) -> FeedStatus:
        """Record an incident: the topic's batch was quarantined or parked."""
        current = self._statuses.get(topic)
        since = current.since if current is not None and current.state is state else now_iso()
        parked = dict(current.parked_offsets) if current is not None else {}
        for partition, (first, last) in (offsets or {}).items():
            known = parked.get(str(partition))
            parked[str(partition)] = [min(first, known[0]), last] if known else [first, last]
        status = FeedStatus(topic, state, since, batch_id, reason_code, message, parked)
        self._set(status)
        return status

    def _set(self, status: FeedStatus) -> None:
        if self._statuses.get(status.topic) == status:
            return
        self._statuses[status.topic] = status
        write_atomically(self._path, {t: asdict(s) for t, s in sorted(self._statuses.items())})

    def _read(self) -> dict[str, FeedStatus]:
        if not self._path.exists():
            return {}
        body = json.loads(self._path.read_text())
        return {
            topic: replace(FeedStatus(**entry), state=FeedState(entry["state"]))
            for topic, entry in body.items()
        }
