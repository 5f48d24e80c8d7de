"""Settings of the Spark loaders (environment prefix `HUB_LOADER_`)."""

import re
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hub_core.settings import default_home

# Hub topics are `<domain>.<name>`; dead-letter topics and Kafka's internal ones are not landed.
DEFAULT_TOPIC_PATTERN = r"^(?!.*\.dlq$)[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$"
# The masters the loader is run on: in-process, a standalone cluster, Kubernetes, YARN.
MASTER_URL = re.compile(
    r"^(local(\[(\*|\d+)(,\d+)?\])?|spark://\S+:\d+(,\S+:\d+)*|k8s://\S+|yarn)$"
)


class LoaderSettings(BaseSettings):
    """Where the loaders read from, write to, and how Spark runs."""

    model_config = SettingsConfigDict(env_prefix="HUB_LOADER_", extra="ignore")

    master: str = Field(
        default="local[*]",
        description=(
            "Spark master URL: `local[*]` runs Spark inside the loader's own process; "
            "`spark://host:port` uses a standalone cluster, `k8s://https://host:port` Kubernetes."
        ),
    )
    driver_memory: str = Field(default="2g", description="Driver heap for the local Spark JVM.")
    executor_memory: str = Field(
        default="1g",
        description=(
            "Heap of each executor on a cluster master (`spark://`, `k8s://`); it must fit in "
            "what a worker offers. Unused with `local[...]`, where the driver runs the tasks."
        ),
    )
    shuffle_partitions: int = Field(
        default=4, ge=1, description="spark.sql.shuffle.partitions (small data: keep it low)."
    )
    warehouse_dir: Path = Field(
        default_factory=lambda: default_home() / "warehouse",
        description="Where managed Delta tables are stored (spark.sql.warehouse.dir).",
    )
    metastore_dir: Path = Field(
        default_factory=lambda: default_home() / "metastore",
        description="Home of the local Derby metastore server: its database, log and pid file.",
    )
    metastore_url: str | None = Field(
        default=None,
        description=(
            "JDBC URL of the Hive metastore database (e.g. jdbc:postgresql://...); default: the "
            "local Derby network server on metastore_port."
        ),
    )
    metastore_driver: str | None = Field(
        default=None,
        description=(
            "JDBC driver class for metastore_url; inferred for Derby, PostgreSQL and MySQL URLs."
        ),
    )
    metastore_user: str | None = Field(
        default=None, description="User of the metastore database (metastore_url)."
    )
    metastore_password: SecretStr | None = Field(
        default=None, description="Password of the metastore database (metastore_url)."
    )
    metastore_uris: str | None = Field(
        default=None,
        description=(
            "thrift://host:9083[,...] of an external Hive metastore service; when set, Spark "
            "talks to it and the metastore_url settings are not used."
        ),
    )
    metastore_port: int = Field(
        default=1527, ge=1, le=65535, description="Port of the local Derby metastore server."
    )
    metastore_jars_dir: Path = Field(
        default_factory=lambda: default_home() / "jars" / "metastore",
        description=(
            "Folder with the Derby server and client jars and the PostgreSQL JDBC driver, "
            "fetched by `make jars`."
        ),
    )
    checkpoint_dir: Path = Field(
        default_factory=lambda: default_home() / "checkpoints",
        description="Structured Streaming checkpoints; deleting one reprocesses from Kafka.",
    )
    jars_dir: Path = Field(
        default_factory=lambda: default_home() / "jars" / "spark",
        description="Folder with the Delta, Kafka and Avro jars, fetched by `make jars`.",
    )
    registry_url: str = Field(
        default="http://127.0.0.1:8080",
        description="Base URL of the schema registry, for writer schemas by id.",
    )
    registry_key: str | None = Field(
        default=None,
        description="API key for the registry, needed when HUB_API_PUBLIC_READS is false.",
    )
    topic_pattern: str = Field(
        default=DEFAULT_TOPIC_PATTERN,
        description="Java regex of the topics to land; new matching topics are picked up live.",
    )
    trigger_seconds: float = Field(
        default=1.0, gt=0, description="Micro-batch trigger interval in seconds."
    )
    max_offsets_per_trigger: int | None = Field(
        default=None, ge=1, description="Cap on records read per micro-batch (all topics)."
    )
    schema_refresh_seconds: float = Field(
        default=5.0,
        ge=0,
        description=(
            "How long a subject's latest schema is cached; a newly registered version is "
            "picked up by the running stream within this time."
        ),
    )
    registry_retry_seconds: float = Field(
        default=60.0,
        gt=0,
        description=(
            "How long the loader retries a registry that does not answer (or answers 5xx or "
            "429) before the batch fails and is redone from the checkpoint."
        ),
    )
    fail_on_data_loss: bool = Field(
        default=False,
        description=(
            "Stop the bronze query when Kafka no longer holds records it has not landed (a "
            "deleted topic, retention passing a stopped loader); by default it logs and goes on."
        ),
    )
    starting_offsets: str = Field(
        default="earliest",
        description="Where a new checkpoint starts reading: `earliest` or `latest`.",
    )

    @field_validator("master")
    @classmethod
    def _known_master(cls, value: str) -> str:
        """A mistyped master fails here, in a line, not deep in Spark's start-up."""
        if not MASTER_URL.match(value):
            raise ValueError(
                "not a Spark master URL; use local[*], local[N], spark://host:port, "
                "k8s://https://host:port or yarn"
            )
        return value
