"""delivery ledger: one row per platform message of a run at a target

Revision ID: 0004
Revises: 0001
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "delivery_ledger",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("platform", sa.String(64), nullable=False),
        sa.Column("chat_id", sa.String(256), nullable=False),
        sa.Column("root_run_id", sa.String(64), nullable=False, index=True),
        sa.Column("segment", sa.Integer, nullable=False),
        sa.Column("conversation_key", sa.String(512), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("platform_message_id", sa.String(128)),
        sa.Column("text_length", sa.Integer, nullable=False),
        sa.Column("text_sha256", sa.String(64)),
        sa.Column("final", sa.Boolean, nullable=False),
        sa.Column("error", sa.String(512)),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("platform", "chat_id", "root_run_id", "segment", name="uq_delivery_ledger_target_segment"),
    )


def downgrade() -> None:
    op.drop_table("delivery_ledger")
