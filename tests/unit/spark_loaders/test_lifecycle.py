"""Stopping the loader's queries between batches: the batch a query runs when stopping is
asked for is its last, also when the rest of the loader takes a while to wind down."""

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from pyspark.sql.streaming import StreamingQuery

from spark_loaders.runtime.lifecycle import batch_marks, stop_between_batches

pytestmark = pytest.mark.unit


@dataclass
class Report:
    """A progress report as the JVM's query hands it over: its JSON text."""

    batch_id: int
    timestamp: str

    def json(self) -> str:
        return json.dumps({"batchId": self.batch_id, "timestamp": self.timestamp})


@dataclass
class JvmQuery:
    query: "Query"

    def lastProgress(self) -> Report | None:  # the JVM query's name
        batch = self.query.batch
        return None if batch == 0 else Report(batch - 1, f"t{batch - 1}")


@dataclass(eq=False)  # hashable by identity, as a StreamingQuery is
class Query:
    """What `stop_between_batches` reads of a running `StreamingQuery`: a query that is
    always behind, so it starts its next batch the moment one commits."""

    batch: int = 0
    stopped_in: list[int] = field(default_factory=list)
    isActive: bool = True

    @property
    def _jsq(self) -> JvmQuery:
        return JvmQuery(self)

    @property
    def status(self) -> dict[str, Any]:
        return {"isTriggerActive": self.isActive}

    def commit(self) -> None:
        """The running batch commits; the next begins at once."""
        self.batch += 1

    def stop(self) -> None:
        self.stopped_in.append(self.batch)
        self.isActive = False


class Behind:
    """Commits the query's running batch every `every_s` (the next begins at once), until the
    query stops: a query that is always behind, as a loader catching up is."""

    def __init__(self, query: Query, *, every_s: float) -> None:
        self._query, self._every_s = query, every_s
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Behind":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._query.isActive = False
        self._thread.join()

    def _run(self) -> None:
        while True:
            time.sleep(self._every_s)
            if not self._query.isActive:
                return
            self._query.commit()


def test_a_batch_committed_while_the_loader_wound_down_is_the_last() -> None:
    query = Query(batch=3)
    marks = batch_marks([cast(StreamingQuery, query)])
    query.commit()  # batch 3 commits while other parts stop; batch 4 begins

    with Behind(query, every_s=0.5):
        stop_between_batches(cast(StreamingQuery, query), since=marks, timeout_s=30)

    # Stopped at the first look, in batch 4 that had only begun: no batch more was run.
    assert query.stopped_in == [4]


def test_without_marks_the_batch_under_way_at_the_call_is_the_last() -> None:
    query = Query(batch=3)
    with Behind(query, every_s=0.5):
        stop_between_batches(cast(StreamingQuery, query), timeout_s=30)

    # Batch 3 was let commit, and batch 4 stopped as it began.
    assert query.stopped_in == [4]


def test_a_query_that_never_ends_its_batch_is_stopped_at_the_deadline() -> None:
    query = Query(batch=2)
    stop_between_batches(cast(StreamingQuery, query), since={}, timeout_s=0.5)
    assert query.stopped_in == [2]
