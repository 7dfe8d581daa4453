"""Alembic environment: synchronous driver, works for SQLite and PostgreSQL."""

from alembic import context
from sqlalchemy import create_engine, pool

from agentstream.db.models import Base

config = context.config
MIGRATION_LOCK_ID = 0x61676E74  # "agnt"
SQLITE_LOCK_WAIT_S = 60.0
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
    # SQLite: the services that already started may hold the write lock for seconds on a loaded
    # machine while the next one migrates (each in turn, see session.py): wait for it, as long as
    # a service's start may take, instead of failing the start on the driver's 5 s default.
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
