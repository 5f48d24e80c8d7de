"""The lineage index: ledger entries of the loader's Delta commits, copied by `LineageSync`.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "lineage_tables",
        sa.Column("table_name", sa.String(300), primary_key=True),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("synced_version", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "lineage_commits",
        sa.Column("table_name", sa.String(300), primary_key=True),
        sa.Column("version", sa.BigInteger(), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("topic", sa.String(249), nullable=True),
        sa.Column("batch_id", sa.BigInteger(), nullable=True),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("entry", sa.Text(), nullable=False),
    )
    op.create_index("ix_lineage_commits_topic", "lineage_commits", ["topic"])
    op.create_table(
        "lineage_offsets",
        sa.Column("table_name", sa.String(300), primary_key=True),
        sa.Column("version", sa.BigInteger(), primary_key=True),
        sa.Column("partition", sa.Integer(), primary_key=True),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("first_offset", sa.BigInteger(), nullable=False),
        sa.Column("last_offset", sa.BigInteger(), nullable=False),
        sa.Column("lsn_min", sa.BigInteger(), nullable=True),
        sa.Column("lsn_max", sa.BigInteger(), nullable=True),
        sa.Column("tx_min", sa.BigInteger(), nullable=True),
        sa.Column("tx_max", sa.BigInteger(), nullable=True),
    )
    op.create_index("ix_lineage_offsets_topic", "lineage_offsets", ["topic"])
    op.create_index("ix_lineage_offsets_lsn_min", "lineage_offsets", ["lsn_min"])
    op.create_table(
        "lineage_requests",
        sa.Column("request_id", sa.String(64), primary_key=True),
        sa.Column("table_name", sa.String(300), primary_key=True),
        sa.Column("version", sa.BigInteger(), primary_key=True),
        sa.Column("partition", sa.Integer(), primary_key=True),
        sa.Column("first_offset", sa.BigInteger(), nullable=False),
        sa.Column("last_offset", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "lineage_reads",
        sa.Column("table_name", sa.String(300), primary_key=True),
        sa.Column("version", sa.BigInteger(), primary_key=True),
        sa.Column("source_table", sa.String(300), primary_key=True),
        sa.Column("first_version", sa.BigInteger(), nullable=False),
        sa.Column("last_version", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_lineage_reads_source_table", "lineage_reads", ["source_table"])


def downgrade() -> None:
    for table in (
        "lineage_reads",
        "lineage_requests",
        "lineage_offsets",
        "lineage_commits",
        "lineage_tables",
    ):
        op.drop_table(table)
