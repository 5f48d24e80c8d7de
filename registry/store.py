"""SQL storage of schemas and subject versions, the same code on SQLite and PostgreSQL."""

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import (
    Engine,
    Select,
    delete,
    func,
    insert,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from hub_core.database import transaction
from hub_core.errors import StoreUnavailable
from registry.avro import AvroSchema
from registry.changes import ChangeSignal, NoSignal, change_signal
from registry.errors import SchemaNotFound, SubjectNotFound, VersionNotFound
from registry.tables import SchemaReferenceRow, SchemaRow, SubjectVersionRow
from registry.types import (
    RegisteredSchema,
    SchemaId,
    SchemaReference,
    SchemaType,
    Subject,
    Version,
)

# Concurrent registrations from several API processes race on the unique constraints; the loser
# retries and then finds the winner's row. A handful of rounds is plenty in practice.
_REGISTER_ATTEMPTS = 8


class SchemaStore:
    """Schemas and subject versions in a SQL database. Business rules live in the service."""

    def __init__(self, engine: Engine, *, watch_changes: bool = False) -> None:
        """`watch_changes`: notice other processes' writes (`registry.changes`), so that the
        service may cache answers that writes change; without it, it caches none of them."""
        self._engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self.changes: ChangeSignal = change_signal(engine) if watch_changes else NoSignal()

    def close(self) -> None:
        """Stop watching for changes (the engine is its owner's to dispose of)."""
        self.changes.close()

    @property
    def sessions(self) -> sessionmaker[Session]:
        return self._sessions

    def register(
        self,
        *,
        subject: Subject,
        schema: AvroSchema,
        schema_id: SchemaId | None = None,
        version: Version | None = None,
    ) -> RegisteredSchema:
        """Store `schema` as a version of `subject`, or return its existing live version.

        `schema_id` and `version` are given only when importing from another registry.
        """
        for _ in range(_REGISTER_ATTEMPTS):
            try:
                with transaction(self._sessions) as session:
                    registered = self._register_once(session, subject, schema, schema_id, version)
                    self.changes.written(session.connection())
                self.changes.changed_here()
                return registered
            except IntegrityError:
                continue  # another process won a race on a unique key; look again
        raise StoreUnavailable(
            f"Could not register a schema under '{subject}': "
            f"{_REGISTER_ATTEMPTS} concurrent attempts conflicted. Retry the request."
        )

    def _register_once(
        self,
        session: Session,
        subject: Subject,
        schema: AvroSchema,
        schema_id: SchemaId | None,
        version: Version | None,
    ) -> RegisteredSchema:
        schema_row = session.scalar(
            select(SchemaRow).where(SchemaRow.fingerprint == schema.fingerprint)
        )
        if schema_row is None:
            schema_row = SchemaRow(
                id=schema_id,
                schema_type=SchemaType.AVRO.value,
                schema_text=schema.canonical,
                fingerprint=schema.fingerprint,
            )
            session.add(schema_row)
            session.flush()
            session.add_all(
                SchemaReferenceRow(
                    schema_id=schema_row.id,
                    position=i,
                    name=ref.name,
                    subject=ref.subject,
                    version=ref.version,
                )
                for i, ref in enumerate(schema.references)
            )
            if schema_id is not None:
                _advance_id_sequence(session)
        live = (
            SubjectVersionRow.subject == subject,
            SubjectVersionRow.schema_id == schema_row.id,
            SubjectVersionRow.deleted.is_(False),
        )
        existing = session.scalar(select(SubjectVersionRow).where(*live))
        if existing is None:
            # One statement numbers the version and checks that the schema is not live under the
            # subject yet, from one snapshot. Reading those apart let two processes each add the
            # schema: a registration this statement cannot see either takes the same version
            # (a unique-key race, retried) or is this very schema (found on the retry).
            number = (
                literal(version)
                if version is not None
                else select(func.coalesce(func.max(SubjectVersionRow.version), 0) + 1)
                .where(SubjectVersionRow.subject == subject)
                .scalar_subquery()
            )
            session.execute(
                insert(SubjectVersionRow).from_select(
                    ["subject", "version", "schema_id", "deleted", "created_at"],
                    select(
                        literal(subject),
                        number,
                        literal(schema_row.id),
                        literal(False),
                        literal(datetime.now(UTC)),
                    ).where(~select(SubjectVersionRow.id).where(*live).exists()),
                )
            )
            existing = session.scalar(select(SubjectVersionRow).where(*live))
        if existing is None:
            raise StoreUnavailable(
                f"Subject '{subject}' changed while a schema was being registered. Retry."
            )
        return _registered(existing, schema_row, schema.references)

    def get(self, *, schema_id: SchemaId) -> tuple[SchemaRow, tuple[SchemaReference, ...]]:
        """Schema `schema_id` and its references, if any subject version (live or soft-deleted)
        still points at it."""
        with transaction(self._sessions) as session:
            row = session.get(SchemaRow, schema_id)
            used = session.scalar(
                select(SubjectVersionRow.id)
                .where(SubjectVersionRow.schema_id == schema_id)
                .limit(1)
            )
            if row is None or used is None:
                raise SchemaNotFound(schema_id)
            return row, _references(session, [schema_id]).get(schema_id, ())

    def is_used(self, *, schema_id: SchemaId) -> bool:
        """Whether any subject version, live or soft-deleted, still points at `schema_id`."""
        with transaction(self._sessions) as session:
            used = session.execute(
                select(SubjectVersionRow.id)
                .where(SubjectVersionRow.schema_id == schema_id)
                .limit(1)
            ).first()
        return used is not None

    def subject_exists(self, *, subject: Subject, include_deleted: bool = False) -> bool:
        """Whether `subject` has a version (a live one unless `include_deleted`)."""
        query = select(SubjectVersionRow.id).where(SubjectVersionRow.subject == subject)
        if not include_deleted:
            query = query.where(SubjectVersionRow.deleted.is_(False))
        with transaction(self._sessions) as session:
            return session.execute(query.limit(1)).first() is not None

    def find(
        self,
        *,
        subject: Subject,
        fingerprint: str,
        references: tuple[SchemaReference, ...],
        include_deleted: bool,
    ) -> RegisteredSchema | None:
        """The version of `subject` holding the schema of this identity (`fingerprint`, see
        `registry.avro`; `references` are the schema's, part of the identity)."""
        query = (
            select(
                SubjectVersionRow.version,
                SubjectVersionRow.deleted,
                SchemaRow.id,
                SchemaRow.schema_text,
            )
            .join(SchemaRow, SchemaRow.id == SubjectVersionRow.schema_id)
            .where(
                SubjectVersionRow.subject == subject,
                SchemaRow.fingerprint == fingerprint,
            )
            .order_by(SubjectVersionRow.deleted, SubjectVersionRow.version.desc())
            .limit(1)
        )
        if not include_deleted:
            query = query.where(SubjectVersionRow.deleted.is_(False))
        with transaction(self._sessions) as session:
            found = session.execute(query).first()
        if found is None:
            return None
        version, deleted, schema_id, text = found
        # The identity covers the references, so the stored schema has the candidate's.
        return RegisteredSchema(
            subject=subject,
            version=Version(version),
            schema_id=SchemaId(schema_id),
            schema=text,
            references=references,
            deleted=deleted,
        )

    def versions(
        self, *, subject: Subject, include_deleted: bool = False
    ) -> list[RegisteredSchema]:
        """The versions of `subject`, oldest first."""
        with transaction(self._sessions) as session:
            query = (
                _joined()
                .where(SubjectVersionRow.subject == subject)
                .order_by(SubjectVersionRow.version)
            )
            if not include_deleted:
                query = query.where(SubjectVersionRow.deleted.is_(False))
            return _with_references(session, session.execute(query).all())

    def get_version(
        self, *, subject: Subject, version: Version | None, include_deleted: bool = False
    ) -> RegisteredSchema:
        """A version of `subject`; `version=None` means the latest live one."""
        with transaction(self._sessions) as session:
            query = _joined().where(SubjectVersionRow.subject == subject)
            if version is None:
                query = query.where(SubjectVersionRow.deleted.is_(False))
                query = query.order_by(SubjectVersionRow.version.desc())
            else:
                query = query.where(SubjectVersionRow.version == version)
                if not include_deleted:
                    query = query.where(SubjectVersionRow.deleted.is_(False))
            found = session.execute(query.limit(1)).all()
            if found:
                return _with_references(session, found)[0]
        if not self.subject_exists(subject=subject, include_deleted=include_deleted):
            raise SubjectNotFound(subject)
        raise VersionNotFound(subject, version if version is not None else "latest")

    def list_schemas(
        self, *, prefix: str = "", include_deleted: bool = False
    ) -> list[RegisteredSchema]:
        """Every subject version, by subject then version."""
        with transaction(self._sessions) as session:
            query = _joined().order_by(SubjectVersionRow.subject, SubjectVersionRow.version)
            if prefix:
                query = query.where(SubjectVersionRow.subject.startswith(prefix, autoescape=True))
            if not include_deleted:
                query = query.where(SubjectVersionRow.deleted.is_(False))
            return _with_references(session, session.execute(query).all())

    def usages(
        self, *, schema_id: SchemaId, include_deleted: bool = False
    ) -> list[RegisteredSchema]:
        """The subject versions that point at `schema_id`."""
        with transaction(self._sessions) as session:
            query = (
                _joined()
                .where(SubjectVersionRow.schema_id == schema_id)
                .order_by(SubjectVersionRow.subject, SubjectVersionRow.version)
            )
            if not include_deleted:
                query = query.where(SubjectVersionRow.deleted.is_(False))
            return [_registered(v, s, ()) for v, s in session.execute(query)]

    def referenced_by(self, *, subject: Subject, version: Version) -> list[SchemaId]:
        """Ids of schemas, still registered under a live version, that reference this version."""
        with transaction(self._sessions) as session:
            query = (
                select(SchemaReferenceRow.schema_id)
                .join(
                    SubjectVersionRow, SubjectVersionRow.schema_id == SchemaReferenceRow.schema_id
                )
                .where(
                    SchemaReferenceRow.subject == subject,
                    SchemaReferenceRow.version == version,
                    SubjectVersionRow.deleted.is_(False),
                )
                .distinct()
                .order_by(SchemaReferenceRow.schema_id)
            )
            return [SchemaId(i) for i in session.scalars(query)]

    def set_deleted(self, *, subject: Subject, versions: Sequence[Version]) -> None:
        """Soft-delete these versions of `subject`."""
        with transaction(self._sessions) as session:
            session.execute(
                update(SubjectVersionRow)
                .where(
                    SubjectVersionRow.subject == subject, SubjectVersionRow.version.in_(versions)
                )
                .values(deleted=True)
            )
            self.changes.written(session.connection())
        self.changes.changed_here()

    def purge(self, *, subject: Subject, versions: Sequence[Version]) -> None:
        """Permanently remove these versions of `subject`; the schemas keep their ids."""
        with transaction(self._sessions) as session:
            session.execute(
                delete(SubjectVersionRow).where(
                    SubjectVersionRow.subject == subject, SubjectVersionRow.version.in_(versions)
                )
            )
            self.changes.written(session.connection())
        self.changes.changed_here()

    def is_empty(self, *, subject: Subject | None = None) -> bool:
        """Whether no version (of `subject`, or at all) is stored, deleted or not."""
        with transaction(self._sessions) as session:
            query = select(SubjectVersionRow.id).limit(1)
            if subject is not None:
                query = query.where(SubjectVersionRow.subject == subject)
            return session.scalar(query) is None

    # Last in the class, so that `list` below means the builtin in the annotations above.
    def list(self, *, prefix: str = "", include_deleted: bool = False) -> list[Subject]:
        """Subjects (with a live version unless `include_deleted`), sorted."""
        with transaction(self._sessions) as session:
            query = select(SubjectVersionRow.subject).distinct().order_by(SubjectVersionRow.subject)
            if prefix:
                query = query.where(SubjectVersionRow.subject.startswith(prefix, autoescape=True))
            if not include_deleted:
                query = query.where(SubjectVersionRow.deleted.is_(False))
            return [Subject(s) for s in session.scalars(query)]


def _advance_id_sequence(session: Session) -> None:
    """After an imported id, keep PostgreSQL's sequence ahead of every id in the table.

    SQLite's AUTOINCREMENT does this by itself.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text(
                "SELECT setval(pg_get_serial_sequence('schemas', 'id'), "
                "GREATEST((SELECT max(id) FROM schemas), "
                "(SELECT last_value FROM schemas_id_seq)))"
            )
        )


def _references(
    session: Session, schema_ids: Sequence[int]
) -> dict[int, tuple[SchemaReference, ...]]:
    """The references of several schemas, in one query; schemas without any are left out."""
    if not schema_ids:
        return {}
    rows = session.scalars(
        select(SchemaReferenceRow)
        .where(SchemaReferenceRow.schema_id.in_(set(schema_ids)))
        .order_by(SchemaReferenceRow.schema_id, SchemaReferenceRow.position)
    )
    found: dict[int, list[SchemaReference]] = {}
    for r in rows:
        found.setdefault(r.schema_id, []).append(
            SchemaReference(name=r.name, subject=Subject(r.subject), version=Version(r.version))
        )
    return {schema_id: tuple(refs) for schema_id, refs in found.items()}


def _joined() -> Select[SubjectVersionRow, SchemaRow]:
    """Subject versions with their schemas."""
    return select(SubjectVersionRow, SchemaRow).join(
        SchemaRow, SchemaRow.id == SubjectVersionRow.schema_id
    )


def _with_references(
    session: Session, rows: Sequence[tuple[SubjectVersionRow, SchemaRow]]
) -> list[RegisteredSchema]:
    references = _references(session, [s.id for _, s in rows])
    return [_registered(v, s, references.get(s.id, ())) for v, s in rows]


def _registered(
    row: SubjectVersionRow, schema_row: SchemaRow, references: tuple[SchemaReference, ...]
) -> RegisteredSchema:
    return RegisteredSchema(
        subject=Subject(row.subject),
        version=Version(row.version),
        schema_id=SchemaId(schema_row.id),
        schema=schema_row.schema_text,
        schema_type=SchemaType(schema_row.schema_type),
        references=references,
        deleted=row.deleted,
    )
