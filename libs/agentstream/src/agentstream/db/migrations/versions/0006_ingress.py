"""ingress: inbound_dedupe, pairing_codes, paired_users, pairing_locks, ingress_conversations

Revision ID: 0006
Revises: 0001
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0001"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "inbound_dedupe",
        sa.Column("platform", sa.String(64), primary_key=True),
        sa.Column("message_id", sa.String(256), primary_key=True),
        sa.Column("received_at", TS, nullable=False),
    )
    op.create_table(
        "pairing_codes",
        sa.Column("code_hash", sa.String(64), primary_key=True),
        sa.Column("platform", sa.String(64), nullable=False, index=True),
        sa.Column("user_id", sa.String(256), nullable=False, index=True),
        sa.Column("chat_id", sa.String(256), nullable=False),
        sa.Column("issued_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
        sa.Column("approved_at", TS),
    )
    op.create_table(
        "paired_users",
        sa.Column("platform", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(256), primary_key=True),
        sa.Column("approved_at", TS, nullable=False),
    )
    op.create_table(
        "pairing_locks",
        sa.Column("platform", sa.String(64), primary_key=True),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("locked_until", TS),
    )
    op.create_table(
        "ingress_conversations",
        sa.Column("key", sa.String(512), primary_key=True),
        sa.Column("connector_role", sa.String(128)),
        sa.Column("last_message", sa.JSON),
        sa.Column("pending_runs", sa.JSON),
        sa.Column("updated_at", TS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ingress_conversations")
    op.drop_table("pairing_locks")
    op.drop_table("paired_users")
    op.drop_table("pairing_codes")
    op.drop_table("inbound_dedupe")
