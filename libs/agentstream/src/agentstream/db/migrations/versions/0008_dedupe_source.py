"""ingress: inbound_dedupe keyed by (source, platform, message_id)

Existing rows get source `kafka` (before this, every id counted once, whatever its
entrance). The table is rebuilt — create, copy, drop, rename — the same way on SQLite
(which cannot change a primary key in place) and PostgreSQL; the new primary key has an
explicit name so it never collides with the old table's `inbound_dedupe_pkey`.

Revision ID: 0008
Revises: 0006
Create Date: 2026-12-10
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0006"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)
TABLE = "inbound_dedupe"


def _rebuild(columns: list[sa.Column[Any]], primary_key: sa.PrimaryKeyConstraint, copy: str) -> None:
    staging = f"{TABLE}_rebuild"
    op.create_table(staging, *columns, primary_key)
    op.execute(copy.format(new=staging, old=TABLE))
    op.drop_table(TABLE)
    op.rename_table(staging, TABLE)


def upgrade() -> None:
    _rebuild(
        [
            sa.Column("source", sa.String(256), nullable=False),
            sa.Column("platform", sa.String(64), nullable=False),
            sa.Column("message_id", sa.String(256), nullable=False),
            sa.Column("received_at", TS, nullable=False),
        ],
        sa.PrimaryKeyConstraint("source", "platform", "message_id", name="pk_inbound_dedupe"),
        "INSERT INTO {new} (source, platform, message_id, received_at)"
        " SELECT 'kafka', platform, message_id, received_at FROM {old}",
    )


def downgrade() -> None:
    # Ids seen from several sources collapse into one row (the earliest sighting).
    _rebuild(
        [
            sa.Column("platform", sa.String(64), nullable=False),
            sa.Column("message_id", sa.String(256), nullable=False),
            sa.Column("received_at", TS, nullable=False),
        ],
        sa.PrimaryKeyConstraint("platform", "message_id", name="inbound_dedupe_pkey"),
        "INSERT INTO {new} (platform, message_id, received_at)"
        " SELECT platform, message_id, MIN(received_at) FROM {old} GROUP BY platform, message_id",
    )
