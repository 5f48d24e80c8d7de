"""The registry's tables as SQLAlchemy models. Only Alembic migrations create or change them."""

from datetime import UTC, datetime

from sqlalchemy import Boolean, DateTime, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def _now() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


class SchemaRow(Base):
    """A distinct schema. Ids are allocated by the database and never reused."""

    __tablename__ = "schemas"
    # AUTOINCREMENT on SQLite keeps ids of deleted rows from coming back.
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    schema_type: Mapped[str] = mapped_column(String(16), nullable=False)
    schema_text: Mapped[str] = mapped_column(Text, nullable=False)
    fingerprint: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class SubjectVersionRow(Base):
    """A version of a subject, pointing at a schema; soft-deleted rows keep `deleted=True`."""

    __tablename__ = "subject_versions"
    __table_args__ = (UniqueConstraint("subject", "version", name="uq_subject_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    subject: Mapped[str] = mapped_column(String(255), nullable=False, index=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    schema_id: Mapped[int] = mapped_column(ForeignKey("schemas.id"), nullable=False, index=True)
    deleted: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class SchemaReferenceRow(Base):
    """A named type a schema takes from a version of another subject."""

    __tablename__ = "schema_references"

    schema_id: Mapped[int] = mapped_column(ForeignKey("schemas.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), nullable=False)
    subject: Mapped[str] = mapped_column(String(255), nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class ConfigRow(Base):
    """Compatibility level and mode, for one subject or (subject '') the whole registry."""

    __tablename__ = "registry_config"

    subject: Mapped[str] = mapped_column(String(255), primary_key=True)
    compatibility: Mapped[str | None] = mapped_column(String(32))
    mode: Mapped[str | None] = mapped_column(String(16))
