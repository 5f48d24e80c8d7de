"""The catalog's tables, in the hub's metadata database beside the registry's.

Only Alembic migrations create or change them.
"""

from datetime import UTC, datetime

from sqlalchemy import BigInteger, Boolean, DateTime, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def now() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


class TeamRow(Base):
    __tablename__ = "teams"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=now)


class ApiKeyRow(Base):
    """An API key: a public id and the SHA-256 of its random secret, never the secret."""

    __tablename__ = "api_keys"

    key_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    team: Mapped[str | None] = mapped_column(ForeignKey("teams.name"), nullable=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    secret_sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=now)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ConsoleSessionRow(Base):
    """A signed-in console session: the SHA-256 of its random id, never the id, and the key it
    stands for. Expired rows are found by their indexed times (`SessionStore.purge`)."""

    __tablename__ = "console_sessions"

    id_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[str] = mapped_column(
        ForeignKey("api_keys.key_id", ondelete="CASCADE"), nullable=False, index=True
    )
    team: Mapped[str | None] = mapped_column(String(64), nullable=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, index=True
    )
    last_seen_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, index=True
    )


class FeedRow(Base):
    __tablename__ = "feeds"

    topic: Mapped[str] = mapped_column(String(249), primary_key=True)
    owner: Mapped[str] = mapped_column(ForeignKey("teams.name"), nullable=False, index=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    partitions: Mapped[int] = mapped_column(Integer, nullable=False)
    key_fields: Mapped[str] = mapped_column(Text, nullable=False, default="[]")
    retention_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    description: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=now)
    read_public: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)


class FeedReaderRow(Base):
    """A team granted reads of a restricted feed (its records, tables and lineage)."""

    __tablename__ = "feed_readers"

    topic: Mapped[str] = mapped_column(
        ForeignKey("feeds.topic", ondelete="CASCADE"), primary_key=True
    )
    team: Mapped[str] = mapped_column(
        ForeignKey("teams.name", ondelete="CASCADE"), primary_key=True, index=True
    )
    granted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=now)


class IdempotencyRow(Base):
    """The answer to a publish request, kept so a retry with the same key gets it again."""

    __tablename__ = "idempotency_keys"

    scope: Mapped[str] = mapped_column(String(300), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    request_sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    response: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Indexed: expired answers are found and purged by age (`IdempotencyStore`).
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=now, index=True)


class LineageTableRow(Base):
    """A Delta table the lineage index follows, and the newest version of it indexed."""

    __tablename__ = "lineage_tables"

    table_name: Mapped[str] = mapped_column(String(300), primary_key=True)
    location: Mapped[str] = mapped_column(Text, nullable=False)
    synced_version: Mapped[int] = mapped_column(BigInteger, nullable=False)
    # The Delta table id at `location`, from the commit that set its metadata; None when the
    # index never saw that commit (cleaned up before the table was first indexed).
    table_id: Mapped[str | None] = mapped_column(String(64), nullable=True)


class LineageCommitRow(Base):
    """One Delta commit with a ledger entry: the entry as the commit holds it."""

    __tablename__ = "lineage_commits"

    table_name: Mapped[str] = mapped_column(String(300), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    topic: Mapped[str | None] = mapped_column(String(249), nullable=True, index=True)
    batch_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    committed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    entry: Mapped[str] = mapped_column(Text, nullable=False)


class LineageOffsetRow(Base):
    """A range of offsets of one partition a bronze commit landed, with their source positions
    (a stream's batch has one per partition, a replay one per run of consecutive offsets)."""

    __tablename__ = "lineage_offsets"

    table_name: Mapped[str] = mapped_column(String(300), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    topic: Mapped[str] = mapped_column(String(249), nullable=False, index=True)
    first_offset: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    last_offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    lsn_min: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)
    lsn_max: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    tx_min: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    tx_max: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class LineageRequestRow(Base):
    """The offsets of one publish request's records in one bronze commit and partition."""

    __tablename__ = "lineage_requests"

    request_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    table_name: Mapped[str] = mapped_column(String(300), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    first_offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    last_offset: Mapped[int] = mapped_column(BigInteger, nullable=False)


class LineageReadRow(Base):
    """Versions `first_version`..`last_version` of `source_table` that a commit read, and the
    Delta table id of the source read (`source_id`), where its entry names it."""

    __tablename__ = "lineage_reads"

    table_name: Mapped[str] = mapped_column(String(300), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    source_table: Mapped[str] = mapped_column(String(300), primary_key=True, index=True)
    first_version: Mapped[int] = mapped_column(BigInteger, nullable=False)
    last_version: Mapped[int] = mapped_column(BigInteger, nullable=False)
    source_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
