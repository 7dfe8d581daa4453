"""retention: indexes on the timestamps the periodic purge selects by

One index per purged table's age column (`agentstream.db.models_retention`), so a purge
reads only the rows it deletes. It follows every migration that creates those tables (runs and
messages come with 0001), and 0008, which rebuilds `inbound_dedupe` (an index made before
that would go with the old table): alembic cannot order a branch of 0001 after its siblings.

Revision ID: 0010
Revises: 0003, 0004, 0008
Create Date: 2026-12-12
"""

from alembic import op

revision = "0010"
down_revision = ("0003", "0004", "0008")  # the tables: resume state, ledger, ingress (rebuilt)
branch_labels = None
depends_on = None

# Spelled out, not imported: a migration must not change when the models do.
INDEXES = (
    ("inbound_dedupe", "received_at"),
    ("pairing_codes", "expires_at"),
    ("ingress_conversations", "updated_at"),
    ("delivery_ledger", "updated_at"),
    ("messages", "created_at"),
    ("runs", "finished_at"),
    ("resume_steps", "created_at"),
    ("run_checkpoints", "updated_at"),
)


def upgrade() -> None:
    for table, column in INDEXES:
        op.create_index(f"ix_{table}_{column}", table, [column])


def downgrade() -> None:
    for table, column in reversed(INDEXES):
        op.drop_index(f"ix_{table}_{column}", table_name=table)
