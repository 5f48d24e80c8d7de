"""Stopping streaming queries without interrupting a batch half-way."""

import time

from pyspark.sql.streaming import StreamingQuery


def stop_between_batches(query: StreamingQuery, *, timeout_s: float = 60.0) -> None:
    """Wait for the running micro-batch to commit, then stop the query.

    Stopping mid-batch is safe (the batch is redone on restart and Delta's idempotent writes
    drop the repeat), but it wastes the work and fills the log with interrupt traces.
    """
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.2)
    if query.isActive:
        query.stop()
