"""Settings of the Spark loaders (environment prefix `HUB_LOADER_`)."""

import re
from collections.abc import Iterable
from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hub_core.settings import default_home
from spark_loaders.runtime.storage import (
    Location,
    RemoteLocation,
    is_remote,
    parse_location,
    s3a_conf,
)

# Hub topics are `<domain>.<name>`; dead-letter topics and Kafka's internal ones are not landed.
DEFAULT_TOPIC_PATTERN = r"^(?!.*\.dlq$)[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$"
# The table layers, in the order data flows through them (databases of the same names).
LAYERS = ("bronze", "silver", "gold")


def check_layers(names: Iterable[str]) -> None:
    """ValueError naming any of `names` that is not a layer, with the valid choices."""
    unknown = sorted(set(names) - set(LAYERS))
    if unknown:
        raise ValueError(f"unknown layer(s) {', '.join(unknown)}; choose from {', '.join(LAYERS)}")


# The masters the loader is run on: in-process, a standalone cluster, Kubernetes, YARN.
MASTER_URL = re.compile(
    r"^(local(\[(\*|\d+)(,\d+)?\])?|spark://\S+:\d+(,\S+:\d+)*|k8s://\S+|yarn)$"
)


class LoaderSettings(BaseSettings):
    """Where the loaders read from, write to, and how Spark runs."""

    model_config = SettingsConfigDict(
        env_prefix="HUB_LOADER_", extra="ignore", arbitrary_types_allowed=True
    )

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
    codegen_cache_entries: int = Field(
        default=1000,
        ge=100,
        description=(
            "spark.sql.codegen.cache.maxEntries: classes of generated code kept for reuse "
            "(Spark's default 100). Each topic of distinct columns adds about a dozen; a batch "
            "whose classes were evicted compiles them again."
        ),
    )
    warehouse_dir: Location = Field(
        default_factory=lambda: default_home() / "warehouse",
        description=(
            "Where managed Delta tables are stored (spark.sql.warehouse.dir): a local folder, "
            "or `s3a://bucket/path` on S3-compatible storage (see the s3_* settings)."
        ),
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
    checkpoint_dir: Location = Field(
        default_factory=lambda: default_home() / "checkpoints",
        description=(
            "Structured Streaming checkpoints; deleting one reprocesses from Kafka. A local "
            "folder, or `s3a://bucket/path` on S3-compatible storage."
        ),
    )
    local_state_dir: Path = Field(
        default_factory=lambda: default_home() / "loader-state",
        description=(
            "Where the loader keeps its status files and reprocessing swap requests when "
            "checkpoint_dir is an s3a:// URI; with a local checkpoint_dir they stay in it."
        ),
    )
    s3_endpoint: str | None = Field(
        default=None,
        description=(
            "URL of the S3-compatible service (e.g. http://127.0.0.1:7070); default: AWS S3. "
            "An http:// URL turns TLS off."
        ),
    )
    s3_access_key: str | None = Field(
        default=None, description="Access key id for s3a:// locations (with s3_secret_key)."
    )
    s3_secret_key: SecretStr | None = Field(
        default=None, description="Secret access key for s3a:// locations (or a file)."
    )
    s3_secret_key_file: Path | None = Field(
        default=None,
        description="File holding the secret access key (a mounted secret); newline ignored.",
    )
    s3_path_style_access: bool = Field(
        default=False,
        description=(
            "Address buckets as http://host/bucket instead of http://bucket.host: needed by "
            "most local S3-compatible servers (MinIO, versitygw)."
        ),
    )
    s3_region: str | None = Field(
        default=None, description="Region of the bucket (fs.s3a.endpoint.region)."
    )
    jars_dir: Path = Field(
        default_factory=lambda: default_home() / "jars" / "spark",
        description="Folder with the Delta, Kafka and Avro jars, fetched by `make jars`.",
    )
    s3a_jars_dir: Path = Field(
        default_factory=lambda: default_home() / "jars" / "s3a",
        description=(
            "Folder with hadoop-aws and the AWS SDK bundle, fetched by `make jars`; added to "
            "Spark only when warehouse_dir or checkpoint_dir is an s3a:// URI."
        ),
    )
    registry_url: str = Field(
        default="http://127.0.0.1:8080",
        description="Base URL of the schema registry, for writer schemas by id.",
    )
    registry_key: str | None = Field(
        default=None,
        description="API key for the registry, needed when HUB_API_PUBLIC_READS is false: a "
        "loader key (`hub key create --loader`), which reads and changes nothing.",
    )
    topic_pattern: str = Field(
        default=DEFAULT_TOPIC_PATTERN,
        description="Regular expression of the topics to land, matched whole (Java and Python "
        "syntax alike); new matching topics are picked up live. Silver follows the same topics.",
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
    health_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="Port of the loader's /healthz and /readyz (Kubernetes probes); unset: "
        "not served.",
    )
    health_host: str = Field(
        default="127.0.0.1",
        description="Interface of the health endpoints; 0.0.0.0 in a pod, for the kubelet.",
    )
    control_token: SecretStr | None = Field(
        default=None,
        description="Bearer token of the loader's /status, /plan and /replay on its health "
        "port (the console reads them through the API); unset: those routes answer 404.",
    )
    status_refresh_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How often /status re-reads the tables' Delta logs (a listing and the new "
        "commit files per table; no Spark job).",
    )

    maintenance_seconds: float = Field(
        default=3600.0,
        ge=0,
        description=(
            "How often the running loader compacts (OPTIMIZE) and vacuums the tables of "
            "maintenance_layers; 0 turns it off (`hub load maintain` still runs on demand)."
        ),
    )
    maintenance_layers: str = Field(
        default="bronze",
        description=(
            "Layers (bronze, silver, gold; comma-separated, or empty) whose tables the running "
            "loader maintains. Bronze is append-only, so its OPTIMIZE never conflicts with a "
            "batch; silver and gold tables change by MERGE, which a concurrent OPTIMIZE can fail."
        ),
    )
    auto_compact_layers: str = Field(
        default="silver,gold",
        description=(
            "Layers whose tables compact small files right after each write (Delta's "
            "delta.autoOptimize.autoCompact), in the writer's own thread: no conflicts."
        ),
    )
    vacuum_retention_hours: float = Field(
        default=168.0,
        ge=24,
        description=(
            "VACUUM deletes files that no table version of the last this many hours needs: "
            "time travel and readers (a lagging silver stream, a long analyst query) reach back "
            "this far. Delta's default is 7 days; below 24 hours is refused."
        ),
    )

    vacuum_listing_tasks: int = Field(
        default=0,
        ge=0,
        description=(
            "Tasks in each Spark job with which VACUUM lists a table's files; 0: one per core "
            "the loader has (Spark's default parallelism). Spark's own default, 10,000, costs "
            "even a small table tens of seconds of task overhead."
        ),
    )

    openlineage_config: Path | None = Field(
        default=None,
        description=(
            "An openlineage.yml (the OpenLineage client's format, `transport:`): each batch "
            "sends START and COMPLETE (or FAIL) run events there. Unset: no events."
        ),
    )

    @field_validator("maintenance_layers", "auto_compact_layers")
    @classmethod
    def _layers(cls, value: str) -> str:
        check_layers(part.strip() for part in value.split(",") if part.strip())
        return value

    def layers(self, setting: str) -> tuple[str, ...]:
        """The layers a comma-separated layer setting names, in bronze, silver, gold order."""
        named = {part.strip() for part in str(getattr(self, setting)).split(",")}
        return tuple(layer for layer in LAYERS if layer in named)

    @field_validator("warehouse_dir", "checkpoint_dir", mode="before")
    @classmethod
    def _location(cls, value: object) -> object:
        """`s3a://` URIs become remote locations; paths stay paths, as before."""
        return parse_location(value)

    @model_validator(mode="after")
    def _s3_credentials_complete(self) -> "LoaderSettings":
        """Half a key pair fails here, naming the setting, not as a 403 deep in Spark."""
        if self.s3_secret_key is not None and self.s3_secret_key_file is not None:
            raise ValueError(
                "Set HUB_LOADER_S3_SECRET_KEY or HUB_LOADER_S3_SECRET_KEY_FILE, not both"
            )
        has_secret = self.s3_secret_key is not None or self.s3_secret_key_file is not None
        if bool(self.s3_access_key) != has_secret:
            raise ValueError(
                "HUB_LOADER_S3_ACCESS_KEY and HUB_LOADER_S3_SECRET_KEY (or _FILE) go together: "
                "set both, or neither"
            )
        if self.s3_secret_key_file is not None and not self.s3_secret_key_file.is_file():
            raise ValueError(f"HUB_LOADER_S3_SECRET_KEY_FILE: no file at {self.s3_secret_key_file}")
        return self

    @property
    def state_dir(self) -> Path:
        """The local folder of the loader's status files and swap requests: the checkpoint
        folder when it is local (as it always was), else `local_state_dir`."""
        if isinstance(self.checkpoint_dir, RemoteLocation):
            return self.local_state_dir
        return self.checkpoint_dir

    @property
    def uses_object_storage(self) -> bool:
        """Whether the tables or the checkpoints are in a bucket."""
        return is_remote(self.warehouse_dir) or is_remote(self.checkpoint_dir)

    def spark_s3_conf(self) -> dict[str, str]:
        """The `spark.hadoop.fs.s3a.*` settings; none unless an s3_* setting is given."""
        secret = self.s3_secret_key.get_secret_value() if self.s3_secret_key else None
        if secret is None and self.s3_secret_key_file is not None:
            secret = self.s3_secret_key_file.read_text().rstrip("\r\n")
        return s3a_conf(
            endpoint=self.s3_endpoint,
            access_key=self.s3_access_key,
            secret_key=secret,
            path_style_access=self.s3_path_style_access,
            region=self.s3_region,
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

    @field_validator("topic_pattern")
    @classmethod
    def _valid_pattern(cls, value: str) -> str:
        """Kafka matches the pattern in Java, and silver picks its tables with it in Python: it
        must be a regular expression both read the same (no Java-only classes like `\\p{...}`)."""
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"not a regular expression: {error}") from None
        return value
