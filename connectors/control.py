"""The control plane: what connectors exist, their state, and pause/resume/restart requests.

Connectors run as their own processes, so this state lives where every process reaches it: two
compacted Kafka topics, as in Kafka Connect. The configs topic holds each connector's (masked)
configuration, its target state (`STARTED` or `PAUSED`) and its latest restart request; the status
topic holds the state each worker reports. The API reads and writes them; workers follow them.
"""

import time
import uuid
from dataclasses import dataclass
from enum import StrEnum, unique
from typing import Any

from connectors.errors import ConnectorNotFound
from connectors.offsets import OffsetStore, StoredOffset
from connectors.settings import ConnectSettings
from connectors.state_topic import StateCache, StateTopic
from hub_kafka.admin import TopicAdmin
from hub_kafka.producer import FeedProducer
from hub_kafka.settings import KafkaSettings

CONNECTOR_PREFIX = "connector-"
TARGET_PREFIX = "target-state-"
RESTART_PREFIX = "restart-"
STATUS_PREFIX = "status-"
# A status older than this many heartbeats means its worker is gone.
_MISSED_HEARTBEATS = 3


@unique
class State(StrEnum):
    """Kafka Connect's states of connectors and tasks."""

    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    UNASSIGNED = "UNASSIGNED"
    STOPPED = "STOPPED"


@unique
class TargetState(StrEnum):
    STARTED = "STARTED"
    PAUSED = "PAUSED"


@dataclass(frozen=True, slots=True)
class ConnectorInfo:
    name: str
    type: str
    owner: str
    config: dict[str, Any]
    worker_id: str


def now_ms() -> int:
    return int(time.time() * 1000)


class ControlPlane:
    """Reads and writes the shared connector state; used by the API and by workers."""

    def __init__(
        self,
        settings: ConnectSettings,
        kafka: KafkaSettings,
        *,
        admin: TopicAdmin,
        producer: FeedProducer | None,
    ) -> None:
        self.settings = settings
        self.configs = StateTopic(
            settings.configs_topic, kafka=kafka, admin=admin, producer=producer
        )
        self.status_topic = StateTopic(
            settings.status_topic, kafka=kafka, admin=admin, producer=producer
        )
        self.offsets_topic = StateTopic(
            settings.offsets_topic, kafka=kafka, admin=admin, producer=producer
        )
        self.offsets = OffsetStore(self.offsets_topic)
        self._kafka = kafka
        self._cache: StateCache | None = None

    def keep_cached(self) -> None:
        """Follow the state topics with one consumer thread and answer reads from memory from
        now on (the API does, once per worker); `close` stops it."""
        self._cache = StateCache(
            [self.configs, self.status_topic, self.offsets_topic], kafka=self._kafka
        )
        self._cache.start()

    def close(self) -> None:
        if self._cache is not None:
            self._cache.stop()

    @property
    def consumers_opened(self) -> int:
        """Kafka consumers built so far to read the state topics (a metric of the API)."""
        topics = (self.configs, self.status_topic, self.offsets_topic)
        cached = self._cache.consumers_opened if self._cache is not None else 0
        return cached + sum(t.consumers_opened for t in topics)

    def names(self) -> list[str]:
        """Names of every announced connector."""
        return sorted(
            key.removeprefix(CONNECTOR_PREFIX)
            for key in self.configs.snapshot()
            if key.startswith(CONNECTOR_PREFIX)
        )

    def describe(self, name: str) -> ConnectorInfo:
        value = self.configs.snapshot().get(CONNECTOR_PREFIX + name)
        if value is None:
            raise ConnectorNotFound(name)
        return ConnectorInfo(
            name=name,
            type=value["type"],
            owner=value["owner"],
            config=value["config"],
            worker_id=value["worker_id"],
        )

    def status(self, name: str) -> dict[str, Any]:
        """Kafka Connect's status answer: the connector's state and worker, and its tasks."""
        self.describe(name)
        reported = self.status_topic.snapshot().get(STATUS_PREFIX + name)
        if reported is None:
            return {
                "name": name,
                "connector": {"state": State.UNASSIGNED, "worker_id": None},
                "tasks": [],
                "type": "source",
            }
        connector: dict[str, Any] = {
            "state": reported["state"],
            "worker_id": reported["worker_id"],
        }
        tasks = [dict(task) for task in reported["tasks"]]
        age_s = (now_ms() - reported["updated_at"]) / 1000
        alive = reported["state"] in (State.RUNNING, State.PAUSED)
        if alive and age_s > _MISSED_HEARTBEATS * reported["heartbeat_seconds"]:
            trace = f"no status from worker {reported['worker_id']} for {age_s:.0f}s"
            connector = {"state": State.UNASSIGNED, "worker_id": reported["worker_id"]}
            for task in tasks:
                task.update(state=State.UNASSIGNED, trace=trace)
        elif reported.get("trace"):
            connector["trace"] = reported["trace"]
        return {"name": name, "connector": connector, "tasks": tasks, "type": "source"}

    def pause(self, name: str) -> None:
        """Ask the connector's worker to stop reading (it keeps its position)."""
        self.describe(name)
        self.configs.put(TARGET_PREFIX + name, {"state": TargetState.PAUSED})

    def resume(self, name: str) -> None:
        self.describe(name)
        self.configs.put(TARGET_PREFIX + name, {"state": TargetState.STARTED})

    def restart(self, name: str) -> None:
        """Ask the worker to stop the connector's task and start it again from its position."""
        self.describe(name)
        self.configs.put(
            RESTART_PREFIX + name, {"request_id": uuid.uuid4().hex, "requested_at": now_ms()}
        )

    def stored_offsets(self, name: str) -> list[StoredOffset]:
        self.describe(name)
        return self.offsets.load(name)

    def target_state(self, name: str) -> TargetState:
        value = self.configs.snapshot().get(TARGET_PREFIX + name)
        return TargetState(value["state"]) if value else TargetState.STARTED

    def announce(self, info: ConnectorInfo) -> None:
        """Record a connector's (masked) configuration, so the API can list and describe it."""
        self.configs.put(
            CONNECTOR_PREFIX + info.name,
            {
                "type": info.type,
                "owner": info.owner,
                "config": info.config,
                "worker_id": info.worker_id,
            },
        )

    def report(self, name: str, *, state: State, tasks: list[dict[str, Any]], trace: str | None
               ) -> None:  # fmt: skip
        """Record the state of a connector and its tasks, as seen by its worker now."""
        self.status_topic.put(
            STATUS_PREFIX + name,
            {
                "state": state,
                "worker_id": self.settings.worker_id,
                "tasks": tasks,
                "trace": trace,
                "updated_at": now_ms(),
                "heartbeat_seconds": self.settings.heartbeat_seconds,
            },
        )


def without_traces(status: dict[str, Any], *, owner: str) -> dict[str, Any]:
    """A status answer for readers other than the connector's owner team and admins.

    Traces and retry errors can name hosts, tables and the source's own error text: only the
    owner sees them. Others get each state, and in place of a trace a short message with the
    failure's code where there is one (`error_code`).
    """
    connector = {k: v for k, v in status["connector"].items() if k != "trace"}
    if "trace" in status["connector"]:
        connector["message"] = _hidden(connector["state"], None, owner)
    tasks = []
    for task in status["tasks"]:
        public = {k: v for k, v in task.items() if k not in ("trace", "retry")}
        if "retry" in task:
            public["retry"] = {k: v for k, v in task["retry"].items() if k != "last_error"}
        if "trace" in task:
            public["message"] = _hidden(task["state"], task.get("error_code"), owner)
        tasks.append(public)
    return {**status, "connector": connector, "tasks": tasks}


def _hidden(state: str, code: int | None, owner: str) -> str:
    coded = f" with error {code}" if code is not None else ""
    return (
        f"{state}{coded}; the trace is shown to team '{owner}' and admins only "
        "(see the error table of the getting-started guide for the code)."
    )
