"""A streaming query's progress reports, read from their JSON text.

PySpark's `StreamingQuery.lastProgress` and `recentProgress` build Python objects from the JVM's
field by field. Every map in a report (durations, event times, observed metrics, each source's
and the sink's metrics) is read through a py4j iterator, and each iterator ends in a Java
exception. PySpark converts each such exception by asking the JVM whether it is an instance of
about a dozen exception classes, and for every question py4j resolves
`py4j.reflection.TypeUtil` a package at a time, each name that is not a class a search through
every jar on the driver's class path. With the loader's jars, one `lastProgress` took 58 ms of
the driver's time and `recentProgress` of 99 reports 3.8 s; their JSON text, one call per report,
took 0.26 ms and 11 ms (`bench/progress_reads.py`, medians of 5 rounds).
The loader reads its queries' last reports every second.

A report read here is the JSON object Spark documents for `StreamingQueryProgress`: the same
names as PySpark's object (`batchId`, `durationMs`, `sources`, ...), with each Kafka source's
offsets as objects.
"""

import json
from typing import Any

from pyspark.sql.streaming import StreamingQuery

Report = dict[str, Any]


def last_progress(query: StreamingQuery) -> Report | None:
    """The query's last progress report; None before its first batch."""
    report = query._jsq.lastProgress()
    return None if report is None else json.loads(report.json())


def recent_progress(query: StreamingQuery) -> list[Report]:
    """The progress reports Spark keeps of the query's recent batches, oldest first."""
    return [json.loads(report.json()) for report in query._jsq.recentProgress()]
