from agentstream.db.models import Base, Conversation, Message, Run
from agentstream.db.session import create_engine, session_factory, upgrade, upgrade_sync

__all__ = ["Base", "Conversation", "Message", "Run", "create_engine", "session_factory", "upgrade", "upgrade_sync"]
