"""Permission: who may start a run. Today the inbound user is the identity.

Later issues add authorization rules (allow lists, pairing) behind this function.
"""

from __future__ import annotations

from typing import TypeGuard

from agentstream.contracts import User

NOT_AUTHORIZED = "not authorized"


def is_authorized(user: User | None) -> TypeGuard[User]:
    return user is not None and bool(user.id.strip())
