"""ingress_outbox: messages accepted while the broker keeps its records in memory, until their run ends

Revision ID: 0014_ingress_outbox
Revises: 0010
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_ingress_outbox"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ingress_outbox",
        sa.Column("source", sa.String(256), nullable=False),
        sa.Column("platform", sa.String(64), nullable=False),
        sa.Column("message_id", sa.String(256), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("partition", sa.Integer, nullable=True),
        sa.Column("offset", sa.BigInteger, nullable=True),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("source", "platform", "message_id", name="pk_ingress_outbox"),
    )
    op.create_index("ix_ingress_outbox_run_id", "ingress_outbox", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_ingress_outbox_run_id", "ingress_outbox")
    op.drop_table("ingress_outbox")
