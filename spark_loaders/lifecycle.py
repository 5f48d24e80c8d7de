"""Stopping streaming queries without interrupting a batch half-way."""

import time

from pyspark.sql.streaming import StreamingQuery


def stop_between_batches(*queries: StreamingQuery, timeout_s: float = 30.0) -> None:
    """Wait for the queries' running micro-batches to commit, then stop the queries.

    All queries share one deadline, so stopping several takes no longer than stopping one.
    Stopping mid-batch is safe (the batch is redone on restart and Delta's idempotent writes
    drop the repeat), but it wastes the work and fills the log with interrupt traces.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(
        query.isActive and query.status.get("isTriggerActive") for query in queries
    ):
        time.sleep(0.2)
    for query in queries:
        if query.isActive:
            query.stop()
