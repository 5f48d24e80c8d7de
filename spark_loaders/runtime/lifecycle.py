"""Stopping streaming queries without interrupting a batch half-way."""

import time
from collections.abc import Iterable, Mapping

from pyspark.sql.streaming import StreamingQuery

from spark_loaders.runtime.progress import last_progress

BatchMark = tuple[int, str] | None


def batch_marks(queries: Iterable[StreamingQuery]) -> dict[StreamingQuery, BatchMark]:
    """Each query's last reported batch now: taken when stopping is asked for, so that the
    batch under way then is the last one each query runs (`stop_between_batches(since=...)`)."""
    return {query: _last_batch(query) for query in queries}


def stop_between_batches(
    *queries: StreamingQuery,
    since: Mapping[StreamingQuery, BatchMark] | None = None,
    timeout_s: float = 30.0,
) -> None:
    """Stop each query as soon as the micro-batch it is running has committed.

    A query is stopped when it is seen idle, or when its progress shows that a batch ended
    since its mark in `since` (by default, since this call): a query that is behind starts its
    next batch at once, so it is seldom seen idle, and what the stop interrupts then is a
    batch that has only begun. Marks taken when stopping was asked for (`batch_marks`) keep
    the work done before this call (other parts winding down) from costing a batch more.
    All queries share one deadline, after which those still running are stopped mid-batch.
    That is safe (the batch is redone on restart and Delta's idempotent writes drop the
    repeat), but it wastes the work and fills the log with interrupt traces.
    """
    deadline = time.monotonic() + timeout_s
    marks = since or {}
    running = {query: marks[query] if query in marks else _last_batch(query) for query in queries}
    while running:
        late = time.monotonic() >= deadline
        for query, batch in list(running.items()):
            if late or _between_batches(query, batch):
                if query.isActive:
                    query.stop()
                del running[query]
        if running:
            time.sleep(0.2)


def _between_batches(query: StreamingQuery, batch_then: BatchMark) -> bool:
    if not query.isActive or not query.status.get("isTriggerActive"):
        return True
    return _last_batch(query) != batch_then


def _last_batch(query: StreamingQuery) -> BatchMark:
    """The id and time of the query's last reported batch; None before its first."""
    progress = last_progress(query)
    return None if progress is None else (progress["batchId"], progress["timestamp"])
