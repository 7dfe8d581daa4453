"""persistence: run_checkpoints, resume_steps, sessions

Revision ID: 0003
Revises: 0001
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0001"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "run_checkpoints",
        sa.Column("root_run_id", sa.String(64), primary_key=True),
        sa.Column("conversation_key", sa.String(512), nullable=False, index=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("reason", sa.String(64)),
        sa.Column("error", sa.Text),
        sa.Column("last_seq", sa.Integer, nullable=False),
        sa.Column("usage", sa.JSON, nullable=False),
        sa.Column("start", sa.JSON, nullable=False),
        sa.Column("resume_attempts", sa.Integer, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_table(
        "resume_steps",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("root_run_id", sa.String(64), nullable=False, index=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("step_id", sa.String(128), nullable=False),
        sa.Column("step_type", sa.String(32), nullable=False),
        sa.Column("input", sa.JSON, nullable=False),
        sa.Column("output", sa.JSON, nullable=False),
        sa.Column("memory", sa.JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.UniqueConstraint("root_run_id", "seq", name="uq_resume_steps_root_seq"),
    )
    op.create_table(
        "sessions",
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("conversation_key", sa.String(512), nullable=False, index=True),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("ended_at", TS),
        sa.Column("end_reason", sa.String(64)),
    )


def downgrade() -> None:
    op.drop_table("sessions")
    op.drop_table("resume_steps")
    op.drop_table("run_checkpoints")
