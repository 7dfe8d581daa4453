"""Which tool calls may run: the rule the runner decides and the executor verifies (docs/tools.md § Which calls run).

The runner decides: a call names a tool of its assistant's `tools` list (`offers`), and a tool that
requires approval ran through the approval gate. It writes what it decided into the `tool-calls`
record (`offered`, `approval_id`) and signs the record with a secret only runners and executors hold
(`sign`). Anyone who can produce to `tool-calls` can write any field, so the fields alone prove
nothing: the executor checks the signature first, then the same rule against the signed fields
(`refusal`). Everything here is pure; the services read the secret and act on the answer.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
from collections.abc import Iterable

from agentstream.config import ConfigError
from agentstream.config.tools import ToolsSettings
from agentstream.contracts import ToolCallRefusal, ToolCallRequest
from agentstream.tools_catalog import selects

SIGNATURE_VERSION = "v1"
MIN_SECRET_BYTES = 32  # an HMAC key shorter than its hash is the weak part

# What the model reads for a call the executor refused: the reason, never the secret's state.
REFUSAL_ERRORS = {
    ToolCallRefusal.NOT_OFFERED: "tool call refused: {tool} is not one of this assistant's tools",
    ToolCallRefusal.NOT_APPROVED: "tool call refused: {tool} requires approval and the call carries none",
    ToolCallRefusal.UNSIGNED: "tool call refused: the call is not signed by a runner",
    ToolCallRefusal.BAD_SIGNATURE: "tool call refused: the call's signature does not match it",
}


def offers(offered: Iterable[str], tool: str) -> bool:
    """Whether an assistant's `tools` list (`offered`) allows a call of `tool`."""
    return any(selects(selector, tool) for selector in offered)


def call_secret(tools: ToolsSettings) -> bytes | None:
    """The signing secret from the environment; None only where unsigned calls are accepted.

    Raises `ConfigError` when it is missing or too short: a runner would publish calls no
    executor runs, an executor would refuse every call."""
    secret = tools.call_secret()
    if secret is None:
        if tools.accept_unsigned_calls:
            return None
        raise ConfigError(
            f"tools.call_secret_env: the env var {tools.call_secret_env} is not set. Runners sign tool calls with "
            "it and executors refuse unsigned ones: set the same secret (at least 32 bytes, e.g. "
            "`openssl rand -hex 32`) on every runner and executor, or set tools.accept_unsigned_calls: true"
        )
    raw = secret.encode()
    if len(raw) < MIN_SECRET_BYTES:
        raise ConfigError(f"tools.call_secret_env: {tools.call_secret_env} holds under {MIN_SECRET_BYTES} bytes")
    return raw


def _signed_bytes(request: ToolCallRequest) -> bytes:
    """The fields the signature covers, as canonical JSON. The conversation key is in: the
    workspace tools work in the conversation's directory, so a signed call cannot be moved."""
    deadline = request.deadline.timestamp() if request.deadline is not None else None
    fields = [
        SIGNATURE_VERSION,
        request.run_id,
        request.root_run_id,
        request.conversation_key,
        request.call_id,
        request.tool,
        hashlib.sha256(request.arguments.encode()).hexdigest(),
        deadline,
        sorted(request.offered) if request.offered is not None else None,
        request.approval_id,
    ]
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=True).encode()


@functools.lru_cache(maxsize=8)
def _keyed(secret: bytes) -> hmac.HMAC:
    """The HMAC with its key already mixed in, copied for each signature (a process holds one secret)."""
    return hmac.new(secret, digestmod=hashlib.sha256)


def signature_of(request: ToolCallRequest, secret: bytes) -> str:
    mac = _keyed(secret).copy()
    mac.update(_signed_bytes(request))
    digest = mac.hexdigest()
    return f"{SIGNATURE_VERSION}:{digest}"


def sign(request: ToolCallRequest, secret: bytes) -> ToolCallRequest:
    """`request` with its signature (what the runner publishes)."""
    return request.model_copy(update={"signature": signature_of(request, secret)})


def refusal(
    request: ToolCallRequest, *, secret: bytes | None, accept_unsigned: bool, requires_approval: bool
) -> ToolCallRefusal | None:
    """Why the executor must not run `request`, or None: it may run.

    `requires_approval`: the executor's own word on the tool (what it publishes on `tool-catalog`)."""
    if request.signature is None:
        return None if accept_unsigned else ToolCallRefusal.UNSIGNED
    if secret is None or not hmac.compare_digest(request.signature, signature_of(request, secret)):
        return ToolCallRefusal.BAD_SIGNATURE
    if request.offered is None or not offers(request.offered, request.tool):
        return ToolCallRefusal.NOT_OFFERED
    if requires_approval and request.approval_id is None:
        return ToolCallRefusal.NOT_APPROVED
    return None


def refusal_error(reason: ToolCallRefusal, tool: str) -> str:
    return REFUSAL_ERRORS[reason].format(tool=repr(tool)[:66])
