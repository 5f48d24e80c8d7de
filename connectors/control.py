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
from connectors.state_topic import StateTopic
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
        self.offsets = OffsetStore(
            StateTopic(settings.offsets_topic, kafka=kafka, admin=admin, producer=producer)
        )

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
