"""Alembic environment: synchronous driver, works for SQLite and PostgreSQL."""

from alembic import context
from sqlalchemy import create_engine, pool

from agentstream.db.models import Base
from agentstream.db.session import SQLITE_LOCK_WAIT_S

config = context.config
MIGRATION_LOCK_ID = 0x61676E74  # "agnt"
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url") or ""
    # SQLite: wait for the write lock as long as a service's start may take (see session.py).
    connect_args = {"timeout": SQLITE_LOCK_WAIT_S} if url.startswith("sqlite") else {}
    engine = create_engine(url, poolclass=pool.NullPool, connect_args=connect_args)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            if connection.dialect.name == "postgresql":
                # Several services migrate on start; the first one migrates, the others wait
                # and then find the database at head. Released at commit.
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_ID})")
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
