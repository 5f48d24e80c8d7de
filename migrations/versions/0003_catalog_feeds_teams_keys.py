"""The catalog: teams, API keys, feeds, and stored answers for idempotent publishing.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "teams",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True)),
    )
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(32), primary_key=True),
        sa.Column("team", sa.String(64), sa.ForeignKey("teams.name"), nullable=True),
        sa.Column("is_admin", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("secret_sha256", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True)),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "feeds",
        sa.Column("topic", sa.String(249), primary_key=True),
        sa.Column("owner", sa.String(64), sa.ForeignKey("teams.name"), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("partitions", sa.Integer(), nullable=False),
        sa.Column("key_fields", sa.Text(), nullable=False, server_default="[]"),
        sa.Column("retention_ms", sa.BigInteger(), nullable=True),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True)),
    )
    op.create_index("ix_feeds_owner", "feeds", ["owner"])
    op.create_table(
        "idempotency_keys",
        sa.Column("scope", sa.String(300), primary_key=True),
        sa.Column("idempotency_key", sa.String(255), primary_key=True),
        sa.Column("request_sha256", sa.String(64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("response", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True)),
    )


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    op.drop_index("ix_feeds_owner", table_name="feeds")
    op.drop_table("feeds")
    op.drop_table("api_keys")
    op.drop_table("teams")
