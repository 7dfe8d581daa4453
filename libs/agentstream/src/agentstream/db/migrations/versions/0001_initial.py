"""initial: conversations, runs, messages

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("key", sa.String(512), primary_key=True),
        sa.Column("platform", sa.String(64), nullable=False),
        sa.Column("chat_id", sa.String(256), nullable=False),
        sa.Column("thread_id", sa.String(256)),
        sa.Column("session_id", sa.String(64)),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("root_run_id", sa.String(64), nullable=False, index=True),
        sa.Column("parent_run_id", sa.String(64)),
        sa.Column("conversation_key", sa.String(512), nullable=False, index=True),
        sa.Column("session_id", sa.String(64)),
        sa.Column("assistant_id", sa.String(128)),
        sa.Column("connector_id", sa.String(128)),
        sa.Column("user_id", sa.String(256)),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("reason", sa.String(64)),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("llm_calls", sa.Integer, nullable=False),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("started_at", TS),
        sa.Column("finished_at", TS),
    )
    op.create_table(
        "messages",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("conversation_key", sa.String(512), nullable=False, index=True),
        sa.Column("session_id", sa.String(64)),
        sa.Column("root_run_id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("part", sa.Integer, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("name", sa.String(128)),
        sa.Column("tool_call_id", sa.String(128)),
        sa.Column("created_at", TS, nullable=False),
        sa.UniqueConstraint("root_run_id", "seq", "part", name="uq_messages_root_seq_part"),
    )


def downgrade() -> None:
    op.drop_table("messages")
    op.drop_table("runs")
    op.drop_table("conversations")
