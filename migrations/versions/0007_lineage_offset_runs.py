"""Lineage offsets by range: a bronze commit may hold several ranges of one partition.

A commit of `hub load replay` or of a reprocessing swap's copy lands scattered offsets, one
ledger range per run of consecutive offsets. The primary key of `lineage_offsets` takes the
range's first offset. The index is a copy of the tables' Delta logs: it is emptied here and
built again by the API's next sync, which is simpler and safer than moving rows between keys.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _offsets(*, by_range: bool) -> None:
    op.create_table(
        "lineage_offsets",
        sa.Column("table_name", sa.String(300), primary_key=True),
        sa.Column("version", sa.BigInteger(), primary_key=True),
        sa.Column("partition", sa.Integer(), primary_key=True),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("first_offset", sa.BigInteger(), primary_key=by_range, nullable=False),
        sa.Column("last_offset", sa.BigInteger(), nullable=False),
        sa.Column("lsn_min", sa.BigInteger(), nullable=True),
        sa.Column("lsn_max", sa.BigInteger(), nullable=True),
        sa.Column("tx_min", sa.BigInteger(), nullable=True),
        sa.Column("tx_max", sa.BigInteger(), nullable=True),
    )
    op.create_index("ix_lineage_offsets_topic", "lineage_offsets", ["topic"])
    op.create_index("ix_lineage_offsets_lsn_min", "lineage_offsets", ["lsn_min"])


def _rebuild(*, by_range: bool) -> None:
    op.drop_table("lineage_offsets")
    for table in ("lineage_reads", "lineage_requests", "lineage_commits", "lineage_tables"):
        op.execute(sa.text(f"DELETE FROM {table}"))
    _offsets(by_range=by_range)


def upgrade() -> None:
    _rebuild(by_range=True)


def downgrade() -> None:
    _rebuild(by_range=False)
