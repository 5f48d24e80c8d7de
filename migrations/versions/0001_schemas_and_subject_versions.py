"""Schemas and subject versions.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "schemas",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("schema_type", sa.String(16), nullable=False),
        sa.Column("schema_text", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True)),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "subject_versions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("schema_id", sa.Integer(), sa.ForeignKey("schemas.id"), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("subject", "version", name="uq_subject_version"),
    )
    op.create_index("ix_subject_versions_subject", "subject_versions", ["subject"])


def downgrade() -> None:
    op.drop_index("ix_subject_versions_subject", table_name="subject_versions")
    op.drop_table("subject_versions")
    op.drop_table("schemas")
