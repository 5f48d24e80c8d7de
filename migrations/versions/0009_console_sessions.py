"""Sessions of the web console: the console's cookie holds a random session id, never a key.

Only the SHA-256 of each id is stored, with the API key it stands for (id, team, admin) and its
times. A session ends at `expires_at` (its absolute lifetime) or after the idle timeout since
`last_seen_at`, whichever comes first; both are indexed so that expired rows are found and
deleted in bounded batches (docs/adr/0059-console-sessions.md).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("id_sha256", sa.String(64), primary_key=True),
        sa.Column(
            "key_id",
            sa.String(32),
            sa.ForeignKey("api_keys.key_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("team", sa.String(64), nullable=True),
        sa.Column("is_admin", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_console_sessions_key_id", "console_sessions", ["key_id"])
    op.create_index("ix_console_sessions_expires_at", "console_sessions", ["expires_at"])
    op.create_index("ix_console_sessions_last_seen_at", "console_sessions", ["last_seen_at"])


def downgrade() -> None:
    op.drop_index("ix_console_sessions_last_seen_at", table_name="console_sessions")
    op.drop_index("ix_console_sessions_expires_at", table_name="console_sessions")
    op.drop_index("ix_console_sessions_key_id", table_name="console_sessions")
    op.drop_table("console_sessions")
