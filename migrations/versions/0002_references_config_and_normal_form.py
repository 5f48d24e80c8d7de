"""Schema references, compatibility and mode configuration, normalized fingerprints.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("schemas") as batch:
        batch.add_column(sa.Column("normalized_fingerprint", sa.String(64), nullable=True))
        batch.create_index("ix_schemas_normalized_fingerprint", ["normalized_fingerprint"])
    op.create_table(
        "schema_references",
        sa.Column("schema_id", sa.Integer(), sa.ForeignKey("schemas.id"), primary_key=True),
        sa.Column("position", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
    )
    op.create_index("ix_schema_references_target", "schema_references", ["subject", "version"])
    op.create_table(
        "registry_config",
        sa.Column("subject", sa.String(255), primary_key=True),
        sa.Column("compatibility", sa.String(32), nullable=True),
        sa.Column("mode", sa.String(16), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("registry_config")
    op.drop_index("ix_schema_references_target", table_name="schema_references")
    op.drop_table("schema_references")
    with op.batch_alter_table("schemas") as batch:
        batch.drop_index("ix_schemas_normalized_fingerprint")
        batch.drop_column("normalized_fingerprint")
