"""OpenLineage run events of the loader's batches: START, then COMPLETE or FAIL.

Off unless `HUB_LOADER_OPENLINEAGE_CONFIG` names an `openlineage.yml` (the client's own format:
`transport: {type: http|file|kafka|console, ...}`). Each bronze batch is one run of job
`hub-bronze`, its inputs the Kafka topics read, its outputs the bronze tables written; each
silver batch one run of `hub-silver-<table>`. Events are sent on the batch's thread, so a slow
HTTP transport slows the batch: prefer the client's async transport for remote collectors. A
failure to send an event is logged and never fails a batch: the data comes first.
"""

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import yaml
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.uuid import generate_new_uuid

from hub_kafka.settings import KafkaSettings
from spark_loaders.settings import LoaderSettings

log = logging.getLogger(__name__)

JOB_NAMESPACE = "integration-hub"
PRODUCER = "https://github.com/integration-hub/integration-hub/spark_loaders"


class RunEvents:
    """Sends a batch's run events to the configured transport; does nothing without one."""

    def __init__(
        self, client: OpenLineageClient | None, *, kafka_namespace: str, table_namespace: str
    ) -> None:
        self._client = client
        self._kafka = kafka_namespace
        self._tables = table_namespace

    @classmethod
    def configured(
        cls, config: Path | None, *, kafka_namespace: str, table_namespace: str
    ) -> "RunEvents":
        """From an `openlineage.yml` at `config`; None turns events off."""
        client = None
        if config is not None:
            client = OpenLineageClient(config=yaml.safe_load(config.read_text()) or {})
            log.info("OpenLineage run events of each batch go to the transport in %s", config)
        return cls(client, kafka_namespace=kafka_namespace, table_namespace=table_namespace)

    @property
    def enabled(self) -> bool:
        return self._client is not None

    @contextmanager
    def run(
        self,
        job: str,
        *,
        topics: Sequence[str] = (),
        tables: Sequence[str] = (),
        read_tables: Sequence[str] = (),
    ) -> Iterator[None]:
        """START before the block, COMPLETE after it, FAIL (and the error raised) if it fails."""
        if self._client is None:
            yield
            return
        run_id = str(generate_new_uuid())
        inputs = [InputDataset(self._kafka, t) for t in topics] + [
            InputDataset(self._tables, t) for t in read_tables
        ]
        outputs = [OutputDataset(self._tables, t) for t in tables]
        self._emit(RunState.START, job, run_id, inputs, outputs)
        try:
            yield
        except BaseException:
            self._emit(RunState.FAIL, job, run_id, inputs, outputs)
            raise
        self._emit(RunState.COMPLETE, job, run_id, inputs, outputs)

    def _emit(
        self,
        state: RunState,
        job: str,
        run_id: str,
        inputs: list[InputDataset],
        outputs: list[OutputDataset],
    ) -> None:
        assert self._client is not None
        event = RunEvent(
            eventType=state,
            eventTime=datetime.now(UTC).isoformat(),
            run=Run(runId=run_id),
            job=Job(namespace=JOB_NAMESPACE, name=job),
            producer=PRODUCER,
            inputs=inputs,
            outputs=outputs,
        )
        try:
            self._client.emit(event)
        except Exception:
            log.warning("could not send the OpenLineage %s event of %s", state.value, job,
                        exc_info=True)  # fmt: skip


def run_events(settings: LoaderSettings, kafka: KafkaSettings | None = None) -> RunEvents:
    """The loader's run events as its settings configure them; datasets are named as
    OpenLineage's naming spec says (`kafka://<bootstrap>`, the warehouse location)."""
    bootstrap = kafka.bootstrap_servers.split(",")[0] if kafka is not None else "unknown"
    return RunEvents.configured(
        settings.openlineage_config,
        kafka_namespace=f"kafka://{bootstrap}",
        table_namespace=str(settings.warehouse_dir),
    )
