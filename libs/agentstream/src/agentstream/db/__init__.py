"""Database: models (one module per owning area, all on one `Base`), sessions, migrations."""

from agentstream.db import (  # noqa: F401 - register tables
    models_auth,
    models_delivery,
    models_ingress,
    models_persistence,
    models_retention,
    models_runner,
)
from agentstream.db.models import Base, Conversation, Message, Run
from agentstream.db.session import create_engine, session_factory, upgrade, upgrade_sync

__all__ = ["Base", "Conversation", "Message", "Run", "create_engine", "session_factory", "upgrade", "upgrade_sync"]
