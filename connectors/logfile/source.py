"""The `logfile` source: tailed lines parsed into records of one event feed."""

import json
from collections.abc import Sequence

from catalog.types import FeedKind, TeamName
from connectors.errors import UnparseableRecord
from connectors.logfile.config import LogfileConnector
from connectors.logfile.formats import LineParser
from connectors.logfile.tail import Tailer
from connectors.runtime import Batch, SourceContext
from publish.feeds import FeedSpec
from publish.publisher import IncomingRecord, Unparsed


class LogfileTailer:
    """Follows the configured files and emits one batch per file and poll."""

    def __init__(self, config: LogfileConnector) -> None:
        self._config = config
        self._parser = LineParser(config.source)  # its fields were checked with the file

    def feeds(self) -> Sequence[FeedSpec]:
        options = self._config.schema_options
        schema = {
            "type": "record",
            "name": "LogLine",
            "namespace": options.namespace,
            "doc": options.doc or f"Lines of {', '.join(self._config.source.paths)}.",
            "fields": self._parser.avro_fields(),
        }
        return [
            FeedSpec(
                topic=self._config.topic,
                owner=TeamName(self._config.owner),
                kind=FeedKind.EVENT,
                value_schema=json.dumps(schema),
                partitions=self._config.partitions,
                description=f"Log lines tailed by connector {self._config.name}.",
            )
        ]

    def run(self, context: SourceContext) -> None:
        source = self._config.source
        stored = {s.partition["file"]: s.offset for s in context.stored if "file" in s.partition}
        tailer = Tailer(
            source.paths,
            stored=stored,
            start_at_end=source.start_at == "end",
            max_line_bytes=source.max_line_bytes,
            rotate_wait_s=source.rotate_wait_seconds,
        )
        try:
            while not context.stopped:
                chunks = tailer.poll(source.batch_size)
                for chunk in chunks:
                    context.emit(self._batch(chunk.partition, chunk.position, chunk.lines,
                                             chunk.oversize))  # fmt: skip
                # Every chunk handed out is committed now: what is left is unread.
                context.lag.unread_bytes(tailer.unread())
                if not any(len(c.lines) + len(c.oversize) == source.batch_size for c in chunks):
                    context.sleep(source.poll_seconds)
        finally:
            tailer.close()

    def _batch(
        self,
        partition: dict[str, str],
        position: dict[str, object],
        lines: list[bytes],
        oversize: list[bytes],
    ) -> Batch:
        records: list[IncomingRecord] = []
        rejected = [
            Unparsed(
                raw=line.decode("utf-8", "replace"),
                error=UnparseableRecord(
                    f"the line is longer than source.max_line_bytes "
                    f"({self._config.source.max_line_bytes}); it was cut"
                ),
            )
            for line in oversize
        ]
        for raw in lines:
            if not raw.strip():
                continue  # blank lines carry nothing
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                rejected.append(
                    Unparsed(raw=raw.decode("utf-8", "replace"),
                             error=UnparseableRecord(f"the line is not UTF-8: {exc}"))
                )  # fmt: skip
                continue
            try:
                records.append(IncomingRecord(value=self._parser.parse(text)))
            except UnparseableRecord as exc:
                rejected.append(Unparsed(raw=text, error=exc))
        return Batch(self._config.topic, partition, position, records=records, rejected=rejected)


def create(config: LogfileConnector) -> LogfileTailer:
    """The source of a `logfile` connector."""
    return LogfileTailer(config)
