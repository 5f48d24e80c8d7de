"""One schema identity; an index for "which versions use this schema".

A schema's fingerprint now ignores spelling (attribute order, namespace form), so the separate
normalized fingerprint is gone. Looking up whether a schema id is still in use, on every read by
id, gets an index.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    _recompute_fingerprints()
    with op.batch_alter_table("schemas") as batch:
        batch.drop_index("ix_schemas_normalized_fingerprint")
        batch.drop_column("normalized_fingerprint")
    op.create_index("ix_subject_versions_schema_id", "subject_versions", ["schema_id"])


def downgrade() -> None:
    op.drop_index("ix_subject_versions_schema_id", table_name="subject_versions")
    with op.batch_alter_table("schemas") as batch:
        batch.add_column(sa.Column("normalized_fingerprint", sa.String(64), nullable=True))
        batch.create_index("ix_schemas_normalized_fingerprint", ["normalized_fingerprint"])


def _recompute_fingerprints() -> None:
    """Give stored schemas the new identity, so registering one again finds it.

    Two stored schemas that differ only in spelling get the same new identity; the older keeps
    it and the newer keeps its old one (its id and versions stay as they are).
    """
    # The identity is the registry's own definition, so the migration uses it rather than a copy.
    from registry.avro import fingerprint
    from registry.types import SchemaReference, Subject, Version

    connection = op.get_bind()
    references: dict[int, list[SchemaReference]] = {}
    for schema_id, name, subject, version in connection.execute(
        sa.text(
            "SELECT schema_id, name, subject, version FROM schema_references "
            "ORDER BY schema_id, position"
        )
    ):
        references.setdefault(schema_id, []).append(
            SchemaReference(name=name, subject=Subject(subject), version=Version(version))
        )
    rows = connection.execute(
        sa.text("SELECT id, schema_text, fingerprint FROM schemas ORDER BY id")
    ).all()
    identities = {
        schema_id: fingerprint(json.loads(text), tuple(references.get(schema_id, ())))
        for schema_id, text, _old in rows
    }
    final: dict[int, str] = {}
    used: set[str] = set()
    for schema_id, _text, old in rows:
        chosen = identities[schema_id]
        if chosen in used:  # a spelling variant of an older schema keeps an identity of its own
            chosen = (
                old if old not in used and old not in identities.values() else f"legacy-{schema_id}"
            )
        used.add(chosen)
        final[schema_id] = chosen
    # Through unique placeholders, so no intermediate state collides on the unique index.
    for schema_id in final:
        connection.execute(
            sa.text("UPDATE schemas SET fingerprint = :fp WHERE id = :id"),
            {"fp": f"migrating-{schema_id}", "id": schema_id},
        )
    for schema_id, value in final.items():
        connection.execute(
            sa.text("UPDATE schemas SET fingerprint = :fp WHERE id = :id"),
            {"fp": value, "id": schema_id},
        )
