"""Prometheus metrics of the loader process, served on its health port (`GET /metrics`).

The bronze loader counts what each batch did with each topic's records, from the counts it
makes anyway (no Spark job runs for a metric); the loader's main loop sets the lag of every
topic-partition from the streaming query's progress once a second. Counters start from zero
with the process, as Prometheus counters do.
"""

import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_BATCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class LoaderMetrics:
    """The loader's collectors, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._landed = Counter(
            "hub_loader_records_landed",
            "Records landed in a table.",
            ["table"],
            registry=self.registry,
        )
        self._quarantined = Counter(
            "hub_loader_records_quarantined",
            "Records of a topic set aside in quarantine, by reason code.",
            ["table", "reason"],
            registry=self.registry,
        )
        self._last_landed = Gauge(
            "hub_loader_last_landed_timestamp_seconds",
            "When the loader last landed records in a table (Unix time); freshness is now "
            "minus this.",
            ["table"],
            registry=self.registry,
        )
        self._batch_seconds = Histogram(
            "hub_loader_batch_seconds",
            "Wall time of a micro-batch, by query.",
            ["query"],
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self._lag = Gauge(
            "hub_loader_lag_records",
            "Records in Kafka the query has not read yet, per topic-partition, as of its last "
            "batch.",
            ["query", "topic", "partition"],
            registry=self.registry,
        )
        self._lag_lock = threading.Lock()
        self._lag_now: dict[tuple[str, str], int] = {}  # (topic, partition): records behind

    def landed(self, table: str, records: int) -> None:
        """`records` landed in `table` (a batch's append)."""
        if records > 0:
            self._landed.labels(table).inc(records)
            self._last_landed.labels(table).set(time.time())

    def quarantined(self, table: str, by_reason: Mapping[str, int]) -> None:
        """Records of the topic of `table` put in quarantine, {reason code: count}."""
        for reason, records in by_reason.items():
            if records > 0:
                self._quarantined.labels(table, reason).inc(records)

    def batch(self, query: str, seconds: float) -> None:
        self._batch_seconds.labels(query).observe(seconds)

    def follow(self, progress: Iterable[dict[str, Any] | None]) -> None:
        """Set the lag of every topic-partition from the queries' last progress reports."""
        for report in progress:
            if not report:
                continue
            lags = source_lag(report)
            for (topic, partition), lag in lags.items():
                self._lag.labels(report.get("name") or "", topic, partition).set(lag)
            with self._lag_lock:
                self._lag_now.update(lags)

    def lag_by_topic(self) -> dict[str, int]:
        """Records in Kafka not read yet, per topic (all partitions), as of the last batches:
        what `/status` shows as a feed's loader lag."""
        totals: dict[str, int] = {}
        with self._lag_lock:
            for (topic, _partition), lag in self._lag_now.items():
                totals[topic] = totals.get(topic, 0) + lag
        return totals


def source_lag(progress: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """{(topic, partition): records behind} of a Kafka query's progress report: the latest
    offset the source saw minus the offset its last batch read to."""
    lag: dict[tuple[str, str], int] = {}
    for source in progress.get("sources") or []:
        latest, end = _offsets(source.get("latestOffset")), _offsets(source.get("endOffset"))
        for topic, partitions in latest.items():
            for partition, offset in partitions.items():
                done = end.get(topic, {}).get(partition)
                if isinstance(offset, int) and isinstance(done, int):
                    lag[(topic, partition)] = max(0, offset - done)
    return lag


def _offsets(value: Any) -> dict[str, dict[str, Any]]:
    """A Kafka source's offsets, `{topic: {partition: offset}}`, from the progress report as the
    loader reads it (`spark_loaders.runtime.progress`: its JSON, where Spark renders a source's
    offsets as an object); empty for any other source."""
    if not isinstance(value, dict):
        return {}
    return {t: p for t, p in value.items() if isinstance(p, dict)}


# The loader process's metrics: its queries and its health server share them.
LOADER_METRICS = LoaderMetrics()
