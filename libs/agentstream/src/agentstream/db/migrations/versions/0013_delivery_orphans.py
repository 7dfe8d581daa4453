"""delivery_orphans: sends of unknown outcome whose message is still to be found and deleted

Revision ID: 0013_delivery_orphans
Revises: 0011
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_delivery_orphans"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "delivery_orphans",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("platform", sa.String(64), nullable=False),
        sa.Column("chat_id", sa.String(256), nullable=False),
        sa.Column("root_run_id", sa.String(64), nullable=False),
        sa.Column("segment", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("markup", sa.String(32), nullable=False),
        sa.Column("floor", sa.BigInteger, nullable=True),
        sa.Column("lands_by", sa.Float, nullable=False),
    )
    op.create_index("ix_delivery_orphans_root_run_id", "delivery_orphans", ["root_run_id"])


def downgrade() -> None:
    op.drop_index("ix_delivery_orphans_root_run_id", "delivery_orphans")
    op.drop_table("delivery_orphans")
