"""delivery hooks: usage (billing), audit_log

Revision ID: 0005
Revises: 0001
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0001"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "usage",
        sa.Column("root_run_id", sa.String(64), primary_key=True),
        sa.Column("conversation_key", sa.String(512), nullable=False, index=True),
        sa.Column("tenant_id", sa.String(256), index=True),
        sa.Column("user_id", sa.String(256), index=True),
        sa.Column("assistant_id", sa.String(128), index=True),
        sa.Column("connector_id", sa.String(128)),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("llm_calls", sa.Integer, nullable=False),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("finished_at", TS, nullable=False),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("point", sa.String(64), nullable=False, index=True),
        sa.Column("conversation_key", sa.String(512), nullable=False, index=True),
        sa.Column("root_run_id", sa.String(64), index=True),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.UniqueConstraint("event_id", "point", name="uq_audit_log_event_point"),
    )


def downgrade() -> None:
    op.drop_table("audit_log")
    op.drop_table("usage")
