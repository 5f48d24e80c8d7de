"""Read grants of feeds: a feed readable by every team, or by its owner and the teams named.

`feeds.read_public` is true for every existing feed, as every feed was readable by every team
before; `feed_readers` lists the teams granted reads of a restricted feed. Both are read by the
API (records, dead letters, lineage) and by the analysts' server (tables).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("feeds") as feeds:
        feeds.add_column(
            sa.Column("read_public", sa.Boolean(), nullable=False, server_default=sa.true())
        )
    op.create_table(
        "feed_readers",
        sa.Column(
            "topic",
            sa.String(249),
            sa.ForeignKey("feeds.topic", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "team",
            sa.String(64),
            sa.ForeignKey("teams.name", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_feed_readers_team", "feed_readers", ["team"])


def downgrade() -> None:
    op.drop_index("ix_feed_readers_team", table_name="feed_readers")
    op.drop_table("feed_readers")
    with op.batch_alter_table("feeds") as feeds:
        feeds.drop_column("read_public")
