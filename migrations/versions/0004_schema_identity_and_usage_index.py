"""One schema identity; an index for "which versions use this schema".

A schema's fingerprint now ignores spelling (attribute order, namespace form), so the separate
normalized fingerprint is gone. Looking up whether a schema id is still in use, on every read by
id, gets an index.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("schemas") as batch:
        batch.drop_index("ix_schemas_normalized_fingerprint")
        batch.drop_column("normalized_fingerprint")
    op.create_index("ix_subject_versions_schema_id", "subject_versions", ["schema_id"])


def downgrade() -> None:
    op.drop_index("ix_subject_versions_schema_id", table_name="subject_versions")
    with op.batch_alter_table("schemas") as batch:
        batch.add_column(sa.Column("normalized_fingerprint", sa.String(64), nullable=True))
        batch.create_index("ix_schemas_normalized_fingerprint", ["normalized_fingerprint"])
