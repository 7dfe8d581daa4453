"""tool-executor: tool_calls (each (run_id, call_id) executed at most once)

Revision ID: 0009
Revises: 0001
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0001"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "tool_calls",
        sa.Column("idempotency_key", sa.Text, primary_key=True),
        sa.Column("run_id", sa.Text, nullable=False),
        sa.Column("call_id", sa.Text, nullable=False),
        sa.Column("tool", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("result", sa.JSON),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("finished_at", TS),
    )


def downgrade() -> None:
    op.drop_table("tool_calls")
