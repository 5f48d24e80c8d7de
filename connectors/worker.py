"""A connector process: the hub's publish path wired up, and the connectors it runs.

`connect_services` wires the publish path with `publish_services`, as the API does, so
connectors publish exactly as the gateway does. `Worker` runs connectors as tasks, follows
pause/resume/restart requests from the configs topic, reports status with a heartbeat and keeps
the connectors' Prometheus metrics (`metrics.registry`, served by the health server).
"""

import logging
import threading
from dataclasses import dataclass
from typing import Any

from connectors.config import LoadedConnector
from connectors.control import (
    RESTART_PREFIX,
    TARGET_PREFIX,
    ConnectorInfo,
    ControlPlane,
    State,
    TargetState,
    now_ms,
)
from connectors.errors import ConfigProblem, ConnectorConfigError
from connectors.metrics import ConnectorMetrics
from connectors.runtime import FeedSink, Task, task_backoff
from connectors.settings import ConnectSettings, PublishSettings
from connectors.sources import build_source, secret_values
from hub_core.health import HealthServer
from hub_kafka.settings import KafkaSettings
from publish.services import PublishServices, publish_services
from registry.settings import RegistrySettings

log = logging.getLogger(__name__)


@dataclass
class ConnectServices:
    """The publish path and Kafka clients of one connector process."""

    publish: PublishServices
    control: ControlPlane
    settings: PublishSettings

    def close(self) -> None:
        self.publish.close()


def connect_services(
    registry: RegistrySettings, kafka: KafkaSettings, connect: ConnectSettings
) -> ConnectServices:
    """Wire the registry database and Kafka as the API does, for a connector process."""
    services = publish_services(registry, kafka)
    return ConnectServices(
        publish=services,
        control=ControlPlane(connect, kafka, admin=services.admin, producer=services.producer),
        settings=PublishSettings(registry=registry, kafka=kafka, connect=connect),
    )


class Worker:
    """Runs connectors until stopped, acting on control requests and reporting status."""

    def __init__(
        self,
        connectors: list[LoadedConnector],
        *,
        services: ConnectServices,
        settings: ConnectSettings,
        metrics: ConnectorMetrics | None = None,
    ) -> None:
        seen: dict[str, LoadedConnector] = {}
        for loaded in connectors:
            if loaded.name in seen:
                raise ConnectorConfigError(
                    loaded.path,
                    [ConfigProblem("name", f"'{loaded.name}' is also the name of the connector "
                                   f"in {seen[loaded.name].path}; names must be unique")],
                )  # fmt: skip
            seen[loaded.name] = loaded
        self._connectors = {c.name: c for c in connectors}
        self._services = services
        self.metrics = metrics if metrics is not None else ConnectorMetrics()
        self._settings = settings
        self._control = services.control
        self._tasks: dict[str, Task] = {}
        self._lock = threading.Lock()
        self._started_at_ms = now_ms()

    def run(self, stop: threading.Event, *, health: HealthServer | None = None) -> None:
        """Start every connector, then serve control requests and heartbeats until `stop`.

        `health` hears at every heartbeat whether any connector has FAILED (`/readyz`)."""
        health = health or HealthServer("", None, name="connectors")
        control_stop = threading.Event()
        for loaded in self._connectors.values():
            self._start(loaded)
        follower = threading.Thread(
            target=self._control.configs.follow,
            kwargs={"on_change": self._on_control, "stop": control_stop, "start_at_end": False},
            name="connect-control",
            daemon=True,
        )
        follower.start()
        try:
            health.report(self._not_ready())
            while not stop.wait(self._settings.heartbeat_seconds):
                for task in list(self._tasks.values()):
                    self._report(task)
                health.report(self._not_ready())
        finally:
            health.report("stopping")
            log.info("stopping %d connector(s)", len(self._tasks))
            control_stop.set()
            for task in self._tasks.values():
                task.stop()
                task.status.state = State.UNASSIGNED
                task.status.trace = "the worker was shut down"
                task.status.retry = None
                self._report(task)
            follower.join(timeout=5)

    def _not_ready(self) -> str | None:
        """Why the worker is not doing its work: its FAILED connectors; None when none is."""
        failed = sorted(n for n, t in self._tasks.items() if t.status.state is State.FAILED)
        return f"FAILED: {', '.join(failed)}" if failed else None

    def task(self, name: str) -> Task:
        return self._tasks[name]

    def status(self, name: str) -> State | None:
        """The state of connector `name`, or None before it was started."""
        task = self._tasks.get(name)
        return None if task is None else task.status.state

    def _start(self, loaded: LoadedConnector) -> None:
        services = self._services
        self._control.announce(
            ConnectorInfo(
                name=loaded.name,
                type=loaded.config.type,
                owner=loaded.config.owner,
                config=loaded.public(),
                worker_id=self._settings.worker_id,
            )
        )
        secrets = secret_values(loaded)

        def redact(text: str) -> str:
            for secret in secrets:
                text = text.replace(secret, "**********")
            return text

        sink = FeedSink(
            loaded.name,
            feeds=services.publish.feeds,
            registry=services.publish.registry,
            publisher=services.publish.batch_publisher(),
            offsets=self._control.offsets,
            settings=self._settings,
            metrics=self.metrics,
            publishing=services.settings,
        )
        task = Task(
            loaded.name,
            build=lambda: build_source(loaded),
            sink=sink,
            offsets=self._control.offsets,
            on_change=self._report,
            redact=redact,
            backoff=task_backoff(self._settings),
            metrics=self.metrics,
        )
        self._tasks[loaded.name] = task
        paused = self._control.target_state(loaded.name) is TargetState.PAUSED
        log.info("starting connector %s (%s)%s", loaded.name, loaded.config.type,
                 ", paused" if paused else "")  # fmt: skip
        task.start(paused=paused)

    def _on_control(self, key: str, value: Any) -> None:
        """Apply a record of the configs topic that concerns one of this worker's connectors."""
        if key.startswith(TARGET_PREFIX) and value is not None:
            task = self._tasks.get(key.removeprefix(TARGET_PREFIX))
            if task is not None:
                if value["state"] == TargetState.PAUSED:
                    task.pause()
                else:
                    task.resume()
        elif key.startswith(RESTART_PREFIX) and value is not None:
            task = self._tasks.get(key.removeprefix(RESTART_PREFIX))
            # Requests older than this worker were meant for an earlier run.
            if task is not None and value["requested_at"] > self._started_at_ms:
                task.restart()

    def _report(self, task: Task) -> None:
        status = task.status
        entry: dict[str, Any] = {
            "id": 0,
            "state": status.state,
            "worker_id": self._settings.worker_id,
        }
        if status.trace:
            entry["trace"] = status.trace
        if status.state is State.FAILED and status.error_code is not None:
            entry["error_code"] = status.error_code
        if status.metrics:
            entry["metrics"] = dict(status.metrics)
        if status.retry:
            entry["retry"] = dict(status.retry)
        with self._lock:
            try:
                self._control.report(task.name, state=status.state, tasks=[entry], trace=None)
            except Exception as exc:
                log.warning("%s: could not report status: %s", task.name, exc)
