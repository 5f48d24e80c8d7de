"""A large registry for the benchmark, written straight into its database before the server
starts: 10,000 subjects x 5 versions take minutes over HTTP, one compatibility check each.

The rows are what `SchemaStore.register` would write (the same tables, canonical text and
fingerprint from `registry.avro.parse`), in a few large transactions; each subject's versions
are BACKWARD compatible, as registering them over HTTP would require.
"""

import json
from datetime import UTC, datetime

from sqlalchemy import insert, text

from bench.dataset import Registered, record_schema, schema_body
from hub_core.database import create_database_engine
from migrations import migrate
from registry.avro import parse
from registry.tables import SchemaRow, SubjectVersionRow
from registry.types import SchemaType

_BATCH = 2_000  # rows per INSERT of many rows


def large_subject(index: int) -> str:
    return f"bench.large-{index:05d}-value"


def large_schema(index: int, version: int) -> str:
    """Version `version` (1-based) of subject `index`: the first three as in the small set,
    then one more optional field each."""
    schema = record_schema(index, version=min(version, 3), extra_fields=max(0, version - 3))
    return json.dumps(schema)


def seed_registry(database_url: str, *, subjects: int, versions: int) -> list[Registered]:
    """Migrate `database_url` and store `subjects` x `versions` subject versions; returns them
    with their ids and the lookup body a client would send."""
    migrate.upgrade(database_url)
    now = datetime.now(UTC)
    registered: list[Registered] = []
    schema_rows: list[dict[str, object]] = []
    version_rows: list[dict[str, object]] = []
    for index in range(subjects):
        subject = large_subject(index)
        for version in range(1, versions + 1):
            schema_text = large_schema(index, version)
            parsed = parse(schema_text)
            schema_id = len(schema_rows) + 1
            schema_rows.append(
                {
                    "id": schema_id,
                    "schema_type": SchemaType.AVRO.value,
                    "schema_text": parsed.canonical,
                    "fingerprint": parsed.fingerprint,
                    "created_at": now,
                }
            )
            version_rows.append(
                {
                    "subject": subject,
                    "version": version,
                    "schema_id": schema_id,
                    "deleted": False,
                    "created_at": now,
                }
            )
            body = schema_body(json.loads(schema_text))
            registered.append(Registered(subject, version, schema_id, body))
    engine = create_database_engine(database_url)
    try:
        with engine.begin() as connection:
            for start in range(0, len(schema_rows), _BATCH):
                connection.execute(insert(SchemaRow), schema_rows[start : start + _BATCH])
            for start in range(0, len(version_rows), _BATCH):
                connection.execute(insert(SubjectVersionRow), version_rows[start : start + _BATCH])
            if engine.dialect.name == "postgresql":
                # Explicit ids leave the sequence behind: registrations must continue after them.
                connection.execute(
                    text(
                        "SELECT setval(pg_get_serial_sequence('schemas', 'id'), max(id)) "
                        "FROM schemas"
                    )
                )
    finally:
        engine.dispose()
    return registered
