"""Lineage by table id: which location's versions a silver or gold commit read.

A bronze table rebuilt by reprocessing moves to a new location whose versions are numbered
from 0 again. Ledger entries now name the Delta table id of each table they read
(`lineage_reads.source_id`), and the index keeps each table's id (`lineage_tables.table_id`,
from the commit that set its metadata), so that a forward query from a rebuilt table's
version follows only the commits that read that location. The index is a copy of the tables'
Delta logs: it is emptied here and built again by the API's next sync, which reads every
table's log from its first commit and so learns each id.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEX = (
    "lineage_reads",
    "lineage_requests",
    "lineage_offsets",
    "lineage_commits",
    "lineage_tables",
)


def _empty() -> None:
    for table in _INDEX:
        op.execute(sa.text(f"DELETE FROM {table}"))


def upgrade() -> None:
    _empty()
    with op.batch_alter_table("lineage_tables") as batch:
        batch.add_column(sa.Column("table_id", sa.String(64), nullable=True))
    with op.batch_alter_table("lineage_reads") as batch:
        batch.add_column(sa.Column("source_id", sa.String(64), nullable=True))


def downgrade() -> None:
    _empty()
    with op.batch_alter_table("lineage_reads") as batch:
        batch.drop_column("source_id")
    with op.batch_alter_table("lineage_tables") as batch:
        batch.drop_column("table_id")
