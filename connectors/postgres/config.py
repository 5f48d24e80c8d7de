"""The `postgres-cdc` connector: its file model and its `source:` section."""

import re
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from connectors.base import ConnectorBase, is_topic_prefix

_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*\.[A-Za-z_][A-Za-z0-9_$]*$")
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")

SnapshotMode = Literal["initial", "never", "initial_only"]


class PostgresCdcSource(BaseModel):
    """Streams row changes of `tables` from a PostgreSQL database into one topic per table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["postgres-cdc"] = "postgres-cdc"
    dsn: SecretStr = Field(
        description=(
            "libpq connection URL, e.g. postgresql://hub@db:5432/shop; write `${ENV_VAR}` in the "
            "file to keep the password out of it. The role needs REPLICATION and SELECT."
        )
    )
    tables: list[str] = Field(
        min_length=1, description="Tables to capture, each as `schema.table`."
    )
    slot: str = Field(
        default="hub_cdc", description="Name of the logical replication slot (pgoutput)."
    )
    publication: str = Field(
        default="hub_cdc", description="Name of the publication listing the captured tables."
    )
    create_slot: bool = Field(
        default=True, description="Create the replication slot when it does not exist."
    )
    create_publication: bool = Field(
        default=True, description="Create the publication FOR the tables when it does not exist."
    )
    snapshot_mode: SnapshotMode = Field(
        default="initial",
        description=(
            "initial: read existing rows (op `r`) once, then stream; never: stream changes only; "
            "initial_only: read existing rows and stop."
        ),
    )
    heartbeat_seconds: float = Field(
        default=10.0,
        gt=0,
        description="Interval of status updates to the server, lag checks and heartbeat writes.",
    )
    heartbeat_write: bool = Field(
        default=False,
        description=(
            "Also write a tiny WAL record (pg_logical_emit_message) on every heartbeat, so the "
            "slot's position can move while the captured tables are idle and the server is busy."
        ),
    )
    snapshot_batch_rows: int = Field(
        default=5000, gt=0, description="Rows fetched and published per batch during snapshots."
    )
    snapshot_processes: int = Field(
        default=1,
        ge=1,
        le=32,
        description=(
            "Processes reading and publishing the snapshot, each a share of every table's pages "
            "in the same exported snapshot; more than 1 uses more cores (PostgreSQL 14 or newer "
            "reads a share without scanning the rest)."
        ),
    )
    stream_processes: int = Field(
        default=1,
        ge=1,
        le=32,
        description=(
            "Processes publishing the stream's changes, each the rows whose key falls in its "
            "share; every process reads every change, so a row's events keep their order. More "
            "than 1 uses more cores. A table keyed by anything but fixed-width columns "
            "(integers, uuid, dates and times), or without a key, is published by the first."
        ),
    )
    max_batch_events: int = Field(
        default=5000,
        gt=0,
        description="Most change events buffered before they are published to Kafka together.",
    )
    max_batch_seconds: float = Field(
        default=0.5,
        gt=0,
        description="Longest time a change waits in the buffer before it is published.",
    )

    @field_validator("tables")
    @classmethod
    def _qualified_tables(cls, tables: list[str]) -> list[str]:
        for table in tables:
            if not _TABLE.match(table):
                raise ValueError(
                    f"table {table!r} must be written as `schema.table` (e.g. public.orders)"
                )
        if len(set(tables)) != len(tables):
            raise ValueError("tables lists the same table twice")
        return tables

    @field_validator("slot", "publication")
    @classmethod
    def _plain_identifier(cls, name: str) -> str:
        if not _IDENTIFIER.match(name) or len(name) > 63:
            raise ValueError(
                f"{name!r} is not a valid slot/publication name: use lower-case letters, "
                "digits and underscores, at most 63 characters"
            )
        return name


class PostgresCdcConnector(ConnectorBase):
    """Streams row changes of PostgreSQL tables (logical replication)."""

    type: Literal["postgres-cdc"] = Field(description="`postgres-cdc`.")
    topic_prefix: str = Field(
        description="Topics are `<topic_prefix>.<schema>.<table>`, e.g. prefix `cdc.shop`."
    )
    source: PostgresCdcSource = Field(description="The database, tables and replication slot.")

    @model_validator(mode="after")
    def _prefix(self) -> Self:
        if not is_topic_prefix(self.topic_prefix):
            raise ValueError(
                f"topic_prefix '{self.topic_prefix}' must be lowercase dot-separated segments, "
                "e.g. 'cdc.shop'"
            )
        return self
