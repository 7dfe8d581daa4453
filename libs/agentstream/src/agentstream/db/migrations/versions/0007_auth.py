"""auth: api_keys; runs.tenant_id (tenant isolation of the read API)

Revision ID: 0007
Revises: 0001
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0001"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(32), primary_key=True),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("tenant_id", sa.String(256), nullable=False, index=True),
        sa.Column("scopes", sa.JSON, nullable=False),
        sa.Column("platform", sa.String(64)),
        sa.Column("user_id", sa.String(256)),
        sa.Column("gateway_platforms", sa.JSON, nullable=False),
        sa.Column("profiles", sa.JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("expires_at", TS),
        sa.Column("revoked_at", TS),
    )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("tenant_id", sa.String(256)))
    op.create_index("ix_runs_tenant_id", "runs", ["tenant_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_tenant_id", "runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("tenant_id")
    op.drop_table("api_keys")
