"""runner: role_settings

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "role_settings",
        sa.Column("scope", sa.String(16), primary_key=True),
        sa.Column("subject_id", sa.String(256), primary_key=True),
        sa.Column("role", sa.String(128), primary_key=True),
        sa.Column("connector_id", sa.String(128), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("role_settings")
