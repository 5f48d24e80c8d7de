"""SQL storage of schemas and subject versions, the same code on SQLite and PostgreSQL.

Only Alembic migrations (`migrations/`) create or change these tables.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from sqlalchemy import (
    Boolean,
    DateTime,
    Engine,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    func,
    select,
)
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from registry.avro import AvroSchema
from registry.errors import SchemaNotFound, StoreUnavailable, SubjectNotFound, VersionNotFound
from registry.types import RegisteredSchema, SchemaId, SchemaType, Subject, Version

# Concurrent registrations from several API processes race on the unique constraints; the loser
# retries and then finds the winner's row. A handful of rounds is plenty in practice.
_REGISTER_ATTEMPTS = 8


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
    """A version of a subject, pointing at a schema."""

    __tablename__ = "subject_versions"
    __table_args__ = (UniqueConstraint("subject", "version", name="uq_subject_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    subject: Mapped[str] = mapped_column(String(255), nullable=False, index=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    schema_id: Mapped[int] = mapped_column(ForeignKey("schemas.id"), nullable=False)
    deleted: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


def create_store_engine(database_url: str, *, pool_size: int = 5) -> Engine:
    """An engine for the registry database, with SQLite tuned for concurrent readers."""
    if database_url.startswith("sqlite"):
        engine = create_engine(
            database_url, connect_args={"check_same_thread": False, "timeout": 30}
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # type: ignore[no-untyped-def]
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    return create_engine(database_url, pool_size=pool_size, pool_pre_ping=True)


class SchemaStore:
    """Schemas and subject versions in a SQL database."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with self._sessions.begin() as session:
                yield session
        except OperationalError as exc:
            raise StoreUnavailable(
                f"The registry database is unavailable: {exc.orig}. "
                "Check HUB_REGISTRY_DATABASE_URL and that the database is running."
            ) from exc

    def register(self, *, subject: Subject, schema: AvroSchema) -> RegisteredSchema:
        """Store `schema` as the next version of `subject`, or return its existing version."""
        for _ in range(_REGISTER_ATTEMPTS):
            try:
                with self._session() as session:
                    return self._register_once(session, subject, schema)
            except IntegrityError:
                continue  # another process won a race on a unique key; look again
        raise StoreUnavailable(
            f"Could not register a schema under '{subject}': "
            f"{_REGISTER_ATTEMPTS} concurrent attempts conflicted. Retry the request."
        )

    def _register_once(
        self, session: Session, subject: Subject, schema: AvroSchema
    ) -> RegisteredSchema:
        schema_row = session.scalar(
            select(SchemaRow).where(SchemaRow.fingerprint == schema.fingerprint)
        )
        if schema_row is None:
            schema_row = SchemaRow(
                schema_type=SchemaType.AVRO.value,
                schema_text=schema.canonical,
                fingerprint=schema.fingerprint,
            )
            session.add(schema_row)
            session.flush()
        existing = session.scalar(
            select(SubjectVersionRow).where(
                SubjectVersionRow.subject == subject,
                SubjectVersionRow.schema_id == schema_row.id,
                SubjectVersionRow.deleted.is_(False),
            )
        )
        if existing is not None:
            return _registered(existing, schema_row)
        latest = session.scalar(
            select(func.max(SubjectVersionRow.version)).where(SubjectVersionRow.subject == subject)
        )
        row = SubjectVersionRow(subject=subject, version=(latest or 0) + 1, schema_id=schema_row.id)
        session.add(row)
        session.flush()
        return _registered(row, schema_row)

    def get(self, *, schema_id: SchemaId) -> tuple[SchemaType, str]:
        """The type and text of schema `schema_id`."""
        with self._session() as session:
            row = session.get(SchemaRow, schema_id)
            if row is None:
                raise SchemaNotFound(schema_id)
            return SchemaType(row.schema_type), row.schema_text

    def get_version(self, *, subject: Subject, version: Version | None) -> RegisteredSchema:
        """A live version of `subject`; `version=None` means the latest."""
        with self._session() as session:
            query = select(SubjectVersionRow, SchemaRow).join(
                SchemaRow, SchemaRow.id == SubjectVersionRow.schema_id
            )
            query = query.where(
                SubjectVersionRow.subject == subject, SubjectVersionRow.deleted.is_(False)
            )
            if version is None:
                query = query.order_by(SubjectVersionRow.version.desc()).limit(1)
            else:
                query = query.where(SubjectVersionRow.version == version)
            found = session.execute(query).first()
            if found is None:
                if not self._subject_exists(session, subject):
                    raise SubjectNotFound(subject)
                raise VersionNotFound(subject, "latest" if version is None else version)
            return _registered(found[0], found[1])

    def list(self) -> list[Subject]:
        """The subjects with at least one live version, sorted."""
        with self._session() as session:
            rows = session.scalars(
                select(SubjectVersionRow.subject)
                .where(SubjectVersionRow.deleted.is_(False))
                .distinct()
                .order_by(SubjectVersionRow.subject)
            )
            return [Subject(s) for s in rows]

    @staticmethod
    def _subject_exists(session: Session, subject: Subject) -> bool:
        return (
            session.scalar(
                select(SubjectVersionRow.id)
                .where(SubjectVersionRow.subject == subject, SubjectVersionRow.deleted.is_(False))
                .limit(1)
            )
            is not None
        )


def _registered(row: SubjectVersionRow, schema_row: SchemaRow) -> RegisteredSchema:
    return RegisteredSchema(
        subject=Subject(row.subject),
        version=Version(row.version),
        schema_id=SchemaId(schema_row.id),
        schema=schema_row.schema_text,
        schema_type=SchemaType(schema_row.schema_type),
    )
