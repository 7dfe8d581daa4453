"""Tool calls as a runner publishes them, for tests that produce to `tool-calls` themselves."""

from __future__ import annotations

import os

from agentstream.config.tools import DEFAULT_CALL_SECRET_ENV
from agentstream.contracts import ToolCallRequest
from agentstream.tool_call_signing import sign


def signed(
    request: ToolCallRequest, *, offered: list[str] | None = None, approval_id: str | None = None
) -> ToolCallRequest:
    """`request` offered its own tool (unless `offered` says otherwise), signed with the tests' secret
    (`testing.fixtures` sets it; every test stack reads it from the same variable)."""
    secret = os.environ[DEFAULT_CALL_SECRET_ENV].encode()
    update = {"offered": offered if offered is not None else [request.tool], "approval_id": approval_id}
    return sign(request.model_copy(update=update), secret)
