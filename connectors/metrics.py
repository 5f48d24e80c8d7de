"""Prometheus metrics of the connector worker, served on its health port (`GET /metrics`).

The runtime counts each batch once Kafka acknowledged it, from the results the publish path
returns anyway (no metric costs a walk over the records); a task counts every failure it sees
by its error code and shows its state. Sources set their lag, in their own units, as often as
they look at their system anyway: a CDC connector at each heartbeat, a log file connector at
each poll, a JDBC connector at each batch. Counters start from zero with the process.
"""

import datetime as dt
import time
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge

from connectors.control import State
from hub_core.errors import HubError

UNKNOWN_CODE = "UNKNOWN"  # a failure without a hub error code (a bug, an unwrapped error)


class ConnectorMetrics:
    """The connector worker's collectors, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._published = Counter(
            "hub_connector_records_published",
            "Records a connector published to a topic (batches Kafka acknowledged).",
            ["connector", "topic"],
            registry=self.registry,
        )
        self._dead_lettered = Counter(
            "hub_connector_records_dead_lettered",
            "Records of a connector that went to the topic's dead-letter topic instead.",
            ["connector", "topic"],
            registry=self.registry,
        )
        self._errors = Counter(
            "hub_connector_errors",
            "Failures of a connector's batches or source by error code: each retry of a "
            "transient one, and the one that left it FAILED.",
            ["connector", "code"],
            registry=self.registry,
        )
        self._state = Enum(
            "hub_connector_state",
            "The state of a connector in this worker.",
            ["connector"],
            states=[s.value for s in State],
            registry=self.registry,
        )
        self._slot_lag = Gauge(
            "hub_connector_cdc_slot_lag_bytes",
            "WAL a PostgreSQL CDC connector's replication slot holds: pg_current_wal_lsn() "
            "minus its confirmed flush LSN, as of its last heartbeat.",
            ["connector", "slot"],
            registry=self.registry,
        )
        self._unread = Gauge(
            "hub_connector_logfile_unread_bytes",
            "Bytes of a followed log file after its committed position, as of the last poll.",
            ["connector", "path"],
            registry=self.registry,
        )
        self._position_age = Gauge(
            "hub_connector_jdbc_position_age_seconds",
            "Now minus the timestamp of a JDBC connector's position in a table (or its query).",
            ["connector", "table"],
            registry=self.registry,
        )

    def published(self, connector: str, topic: str, *, records: int, dead_lettered: int) -> None:
        """A batch is in Kafka: `records` in the topic, `dead_lettered` in its DLQ."""
        if records:
            self._published.labels(connector, topic).inc(records)
        if dead_lettered:
            self._dead_lettered.labels(connector, topic).inc(dead_lettered)

    def failed(self, connector: str, error: BaseException) -> None:
        """The connector's batch or source failed with `error` (retried or final)."""
        code = error.code.name if isinstance(error, HubError) else UNKNOWN_CODE
        self._errors.labels(connector, code).inc()

    def state(self, connector: str, state: State) -> None:
        self._state.labels(connector).state(state.value)

    def source(self, connector: str) -> "SourceLag":
        """Where the sources of `connector` set their lag."""
        return SourceLag(self, connector)


class SourceLag:
    """How far one connector's source is behind its system, in the units of its kind."""

    def __init__(self, metrics: ConnectorMetrics, connector: str) -> None:
        self._metrics = metrics
        self._connector = connector
        self._paths: set[str] = set()

    def slot_bytes(self, slot: str, lag: int | None) -> None:
        """The WAL bytes `slot` holds; None (the slot is gone) removes the figure."""
        if lag is None:
            self._metrics._slot_lag.remove(self._connector, slot)
        else:
            self._metrics._slot_lag.labels(self._connector, slot).set(lag)

    def unread_bytes(self, by_path: Mapping[str, int]) -> None:
        """The bytes after the committed position of every followed file; files no longer
        followed (read to the end after rotation, or renamed) lose their figure."""
        gauge = self._metrics._unread
        for path in self._paths - by_path.keys():
            gauge.remove(self._connector, path)
        for path, unread in by_path.items():
            gauge.labels(self._connector, path).set(unread)
        self._paths = set(by_path)

    def position_time(self, table: str, moment: dt.datetime) -> None:
        """The position in `table` is at `moment` (UTC when naive): its age grows from now on,
        computed when scraped."""
        at = (moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)).timestamp()
        child = self._metrics._position_age.labels(self._connector, table)
        child.set_function(lambda: time.time() - at)
