"""delivery ledger: reapply_at, when a message's final text is re-applied after a call of unknown outcome

Revision ID: 0011
Revises: 0004
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("delivery_ledger") as batch:
        batch.add_column(sa.Column("reapply_at", sa.Float))


def downgrade() -> None:
    with op.batch_alter_table("delivery_ledger") as batch:
        batch.drop_column("reapply_at")
