"""Answers of the lineage API (`GET /v1/lineage/...`)."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class TableVersionPublic(BaseModel):
    """A version of a table and the kind of commit that made it (bronze, silver, gold, or
    quarantine: a commit that set records aside)."""

    table: str = Field(
        description="The table; `<table>@<label>` for a version of a bronze table's location "
        "that a reprocessing swap replaced (docs/lineage.md)."
    )
    version: int
    kind: str
    committed_at: datetime | None = None


class BronzeCommitPublic(BaseModel):
    """A bronze commit holding the position asked for, with the offsets it landed; or a
    quarantine commit (`table` `quarantine.<t>`) that set the record aside."""

    table: str = Field(
        description="The table; `<table>@<label>` for a commit at a bronze table's location "
        "that a reprocessing swap replaced (docs/lineage.md)."
    )
    version: int
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    lsn_range: list[int] | None = Field(
        default=None, description="Lowest and highest source LSN the commit landed (CDC)."
    )
    tx_id_range: list[int] | None = Field(
        default=None, description="Lowest and highest source transaction id (CDC)."
    )


class RowLineagePublic(BaseModel):
    """Where a row came from, and every table version that holds it."""

    table: str = Field(description="The table asked about.")
    key: dict[str, Any] | None = Field(
        default=None, description="The key the row was found by (a silver or gold row)."
    )
    bronze_table: str | None = Field(
        default=None,
        description="The bronze table holding the row's record (a silver or gold row).",
    )
    topic: str
    partition: int
    offset: int
    bronze_version: int = Field(description="The bronze table version that landed the row.")
    in_kafka: bool = Field(
        description="Whether Kafka still holds the record; the fields read from it (schema "
        "id, request id, idempotency key, LSN, transaction id) are null when it does not."
    )
    schema_id: int | None = None
    request_id: str | None = Field(default=None, description="The publish request's id.")
    idempotency_key: str | None = None
    lsn: int | None = Field(default=None, description="Source LSN of a CDC record.")
    tx_id: int | None = Field(default=None, description="Source transaction id of a CDC record.")
    versions: list[TableVersionPublic] = Field(
        description="The bronze version and every silver and gold version that read it."
    )


class PositionsPublic(BaseModel):
    """Every table version that holds a source position, a request's records or an offset."""

    bronze: list[BronzeCommitPublic]
    versions: list[TableVersionPublic] = Field(
        description="Every table version holding it: the bronze (and quarantine) ones, then "
        "those that read them."
    )
