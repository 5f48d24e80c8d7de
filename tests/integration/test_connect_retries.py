"""A connector task on the session's hub (real Kafka, the registry database) whose source fails.

The source is scripted: each build takes the next step of its script, so a test says which
failures happen, in which order, and sees what each new source was given to resume from.
"""

import json
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from catalog.types import FeedKind, TeamName
from connectors.control import State
from connectors.errors import SourceUnavailable
from connectors.runtime import Batch, FeedSink, SourceContext, Task, task_backoff
from connectors.settings import ConnectSettings
from connectors.worker import connect_services
from hub_core.errors import TerminalError
from hub_kafka.errors import KafkaUnavailable
from hub_kafka.settings import KafkaSettings
from publish.feeds import FeedSpec
from publish.publisher import IncomingRecord
from registry.settings import RegistrySettings
from tests.support.connect import ConnectHub
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

SCHEMA = json.dumps({"type": "record", "name": "Tick", "fields": [{"name": "n", "type": "long"}]})
PARTITION = {"source": "scripted"}
SECRET = "s3cret-password"


@dataclass
class Step:
    """One build's run: emit records up to `emit_to`, then raise `error` (or idle)."""

    emit_to: int = 0
    error: Exception | None = None


@dataclass
class Script:
    topic: str
    steps: list[Step]
    resumed_from: list[dict[str, Any] | None] = field(default_factory=list)


class ScriptedSource:
    def __init__(self, script: Script) -> None:
        self._script = script
        self._step = script.steps.pop(0) if len(script.steps) > 1 else script.steps[0]

    def feeds(self) -> Sequence[FeedSpec]:
        return [FeedSpec(topic=self._script.topic, owner=TeamName("erp"), kind=FeedKind.EVENT,
                         value_schema=SCHEMA)]  # fmt: skip

    def run(self, context: SourceContext) -> None:
        stored = context.offset(PARTITION)
        self._script.resumed_from.append(stored)
        n = stored["n"] if stored else 0
        while n < self._step.emit_to:
            n += 1
            context.emit(Batch(self._script.topic, PARTITION, {"n": n}, [IncomingRecord({"n": n})]))
        if self._step.error is not None:
            raise self._step.error
        while True:
            context.sleep(0.2)


@dataclass
class Seen:
    """Every status the task reported: state, retry and trace."""

    states: list[tuple[State, dict[str, Any] | None, str | None]] = field(default_factory=list)

    def __call__(self, task: Task) -> None:
        status = task.status
        self.states.append((status.state, dict(status.retry or {}) or None, status.trace))


@contextmanager
def scripted_task(
    hub: ConnectHub, steps: list[Step], **settings: Any
) -> Iterator[tuple[Task, Script, Seen]]:
    hub.team_key("erp")
    name = f"scripted-{uuid.uuid4().hex[:8]}"
    script = Script(topic=f"erp.scripted_{name[-8:]}", steps=steps)
    connect = ConnectSettings(heartbeat_seconds=1.0, **settings)
    services = connect_services(
        RegistrySettings(database_url=hub.database_url),
        KafkaSettings(bootstrap_servers=hub.bootstrap, delivery_timeout_ms=15_000),
        connect,
    )
    sink = FeedSink(
        name,
        feeds=services.publish.feeds,
        registry=services.publish.registry,
        publisher=services.publish.publisher,
        offsets=services.control.offsets,
        settings=connect,
    )
    seen = Seen()
    task = Task(
        name,
        build=lambda: ScriptedSource(script),
        sink=sink,
        offsets=services.control.offsets,
        on_change=seen,
        redact=lambda text: text.replace(SECRET, "**********"),
        backoff=task_backoff(connect),
    )
    task.start()
    try:
        yield task, script, seen
    finally:
        task.stop()
        services.close()


def test_a_task_rebuilds_its_source_after_transient_failures_and_resumes_from_its_position(
    connect_hub: ConnectHub,
) -> None:
    steps = [
        Step(error=SourceUnavailable("the database is restarting")),
        Step(error=KafkaUnavailable("Kafka is away")),
        Step(emit_to=3, error=SourceUnavailable("the connection was lost")),
        Step(emit_to=6),
    ]
    with scripted_task(connect_hub, steps, retry_backoff_seconds=0.1) as (task, script, seen):
        wait_until(
            lambda: task.status.records == 6 and task.status.retry is None,
            timeout_s=60,
            what="every record, and the task recovered",
        )
        assert task.status.state is State.RUNNING
    assert script.resumed_from == [None, None, None, {"n": 3}]
    assert State.FAILED not in {state for state, _, _ in seen.states}
    retrying = [(state, retry, trace) for state, retry, trace in seen.states if retry]
    attempts = [retry["attempts"] for _, retry, _ in retrying]
    # Two failures in a row, then one after progress: a new run of retries, counted from 1.
    assert [a for i, a in enumerate(attempts) if i == 0 or attempts[i - 1] != a] == [1, 2, 1]
    assert {state for state, _, _ in retrying} == {State.RUNNING}
    errors = [retry["last_error"] for _, retry, _ in retrying]
    assert "KafkaUnavailable (50301): Kafka is away" in errors
    assert all(trace and trace.startswith("retrying after") for _, _, trace in retrying)
    records = connect_hub.records(script.topic, expected=6)
    assert [value["n"] for _, value in records] == [1, 2, 3, 4, 5, 6]


def test_a_terminal_failure_fails_the_task_at_once_without_retrying(
    connect_hub: ConnectHub,
) -> None:
    steps = [Step(error=TerminalError("the table has no primary key"))]
    with scripted_task(connect_hub, steps, retry_backoff_seconds=0.1) as (task, script, seen):
        wait_until(lambda: not task.alive, timeout_s=60, what="the task to end")
        assert task.status.state is State.FAILED
        assert "the table has no primary key" in (task.status.trace or "")
    assert len(script.resumed_from) == 1
    assert not any(retry for _, retry, _ in seen.states)


def test_transient_failures_that_outlast_the_limit_fail_the_task_with_a_redacted_trace(
    connect_hub: ConnectHub,
) -> None:
    steps = [Step(error=SourceUnavailable(f"cannot log in as hub:{SECRET}"))]
    with scripted_task(
        connect_hub,
        steps,
        retry_backoff_seconds=0.1,
        retry_backoff_max_seconds=0.2,
        retry_limit_seconds=3.0,
    ) as (task, script, seen):
        wait_until(lambda: not task.alive, timeout_s=60, what="the task to give up")
        assert task.status.state is State.FAILED
        trace = task.status.trace or ""
    assert trace.startswith("gave up after")
    assert "HUB_CONNECT_RETRY_LIMIT_SECONDS" in trace
    assert len(script.resumed_from) >= 2  # retried before giving up
    assert all(SECRET not in (t or "") and SECRET not in json.dumps(r) for _, r, t in seen.states)
    assert any(r and "**********" in r["last_error"] for _, r, _ in seen.states)


def test_a_task_asked_to_stop_leaves_its_backoff_wait_at_once(connect_hub: ConnectHub) -> None:
    steps = [Step(error=SourceUnavailable("the database is restarting"))]
    with scripted_task(
        connect_hub, steps, retry_backoff_seconds=60.0, retry_backoff_max_seconds=120.0
    ) as (task, _, _):
        wait_until(
            lambda: (task.status.retry or {}).get("next_in_seconds", 0) >= 60,
            timeout_s=60,
            what="a long backoff wait",
        )
        started = time.monotonic()
        stopping = threading.Thread(target=task.stop)
        stopping.start()
        stopping.join(timeout=10)
        assert time.monotonic() - started < 5
        assert not task.alive
        assert task.status.state is State.RUNNING  # stopped, not failed: the worker reports it
