"""Slash commands (docs/ingress.md), as pure decisions over what is known about the conversation."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentstream.config import Settings
from agentstream.contracts import (
    AnswerApproval,
    ApprovalDecision,
    FinishReason,
    InboundMessage,
    InterruptRun,
    ResetConversation,
    ResumeRun,
)
from agentstream.contracts.runs import DoubleTexting
from agentstream_ingress.decisions import (
    CommandDecision,
    Decision,
    NoticeDecision,
    NoticeReason,
    target_of,
)
from agentstream_ingress.routing import Routed
from agentstream_ingress.starting import Cause, build_start

HELP = {
    "new": "start a new conversation (empty history; stops the current run)",
    "reset": "same as /new",
    "stop": "stop the current run",
    "resume": "resume the last failed or interrupted run",
    "retry": "run your last message again",
    "status": "current run, queue, assistant and connector",
    "model": "/model <role>: use this connector role here (/model default: back to the profile's)",
    "queue": "/queue <text>: queue a message behind the current run",
    "approve": "run the tool call waiting for your approval",
    "deny": "refuse the tool call waiting for your approval",
    "help": "this list",
}
CLEAR_ROLE = frozenset({"default", "reset", "clear"})


@dataclass(frozen=True)
class Command:
    """A slash command: its name, lowercased and without a `@bot` suffix, and the rest of the text."""

    name: str
    args: str


@dataclass(frozen=True)
class RunSummary:
    """A finished root run of the conversation, as `/status` and `/resume` tell it."""

    run_id: str
    status: str  # its `runs` row's: completed | failed | interrupted


@dataclass(frozen=True)
class ConversationFacts:
    """What ingress knows about a conversation when it handles a command."""

    role_override: str | None = None
    last_message: InboundMessage | None = None
    unfinished: tuple[str, ...] = ()  # runs ingress started that have not finished, oldest first
    resumable: RunSummary | None = None  # the newest failed or interrupted root run
    last_finished: RunSummary | None = None


@dataclass(frozen=True)
class RoleDecision:
    """`/model`: store the conversation's role override (None clears it), then tell the user."""

    role: str | None
    notice: NoticeDecision = field(compare=False)


def parse_command(text: str) -> Command | None:
    """`/name args` → Command; `/stop@mybot` (Telegram's addressed form) is `/stop`."""
    stripped = text.strip()
    if not stripped.startswith("/") or len(stripped) < 2 or stripped[1].isspace():
        return None
    head, _, rest = stripped[1:].partition(" ")
    return Command(head.split("@", 1)[0].lower(), rest.strip())


def help_text(prefix: str = "") -> str:
    return prefix + "Commands:\n" + "\n".join(f"/{name} — {text}" for name, text in HELP.items())


def handle(
    cmd: Command,
    msg: InboundMessage,
    routed: Routed,
    facts: ConversationFacts,
    settings: Settings,
    cause: Cause | None = None,
) -> Decision | RoleDecision:
    """`cause` is the command's inbound record: a run the command starts answers it."""
    key, target = msg.conversation_key, target_of(msg)
    cause = cause or Cause(msg.dedupe_key)
    texts = settings.ingress.texts_for(msg.platform)

    def say(text: str) -> NoticeDecision:
        return NoticeDecision(NoticeReason.COMMAND, text, target, command=cmd.name)

    match cmd.name:
        case "new" | "reset":
            return CommandDecision(
                (ResetConversation(conversation_key=key),), target, texts.new_conversation, command=cmd.name
            )
        case "stop":
            # Always sent: the runner knows best whether something runs (a no-op if not).
            return CommandDecision(
                (InterruptRun(conversation_key=key, reason=FinishReason.USER),), target, command=cmd.name
            )
        case "resume":
            if facts.resumable is None:
                return say(texts.nothing_to_resume)
            run_id = facts.resumable.run_id
            return CommandDecision(
                (ResumeRun(conversation_key=key, run_id=run_id),),
                target,
                texts.fill("resuming", status=facts.resumable.status, run=run_id[:8]),
                command=cmd.name,
            )
        case "retry":
            if facts.last_message is None:
                return say(texts.nothing_to_retry)
            # A new run under ids of the /retry message: the repeated message's ids are its first run's.
            return build_start(facts.last_message, routed, facts.role_override, settings, cause=cause)
        case "status":
            return say(status_text(msg, routed, facts, settings))
        case "model":
            return model(cmd.args, facts, settings, say)
        case "queue":
            if not cmd.args:
                return say(texts.queue_usage)
            queued = msg.model_copy(update={"text": cmd.args})
            return build_start(queued, routed, facts.role_override, settings, DoubleTexting.ENQUEUE, cause)
        case "approve" | "deny":
            return answer_approval(ApprovalDecision(cmd.name), msg, settings)
        case "help":
            return say(help_text())
        case _:
            return say(help_text(texts.fill("unknown_command", command=cmd.name) + "\n"))


def is_admin(msg: InboundMessage, settings: Settings) -> bool:
    """An admin of the message's platform (`authz.platforms.<p>.admins`, else `authz.default.admins`)."""
    rule = settings.authz.platforms.get(msg.platform, settings.authz.default)
    return msg.user.id in rule.admins


def answer_approval(
    decision: ApprovalDecision,
    msg: InboundMessage,
    settings: Settings,
) -> Decision:
    """`/approve`, `/deny`: always sent, like `/stop`: the runner knows whether a call waits and
    whose it is (and says so in the chat)."""
    answer = AnswerApproval(
        conversation_key=msg.conversation_key,
        decision=decision,
        user_id=msg.user.id,
        tenant_id=msg.user.tenant_id,
        admin=is_admin(msg, settings),
        reply_target=target_of(msg),
    )
    return CommandDecision((answer,), target_of(msg), command=decision.value)


def model(args: str, facts: ConversationFacts, settings: Settings, say) -> Decision | RoleDecision:  # type: ignore[no-untyped-def]
    role = args.strip()
    known = ", ".join(sorted(settings.roles)) or "(none configured)"
    if not role:
        return say(f"Connector role: {facts.role_override or 'profile default'}. Roles: {known}")
    if role.lower() in CLEAR_ROLE:
        return RoleDecision(None, say("Back to the profile's connector."))
    if role not in settings.roles:
        return say(f"Unknown role {role!r}. Roles: {known}")
    return RoleDecision(role, say(f"This conversation now uses role {role} ({settings.roles[role]})."))


def status_text(msg: InboundMessage, routed: Routed, facts: ConversationFacts, settings: Settings) -> str:
    assistant = msg.assistant_id or routed.profile.assistant or settings.default_assistant
    role = facts.role_override or routed.profile.connector_role
    connector = settings.roles.get(role, role) if role else (settings.default_connector or "assistant default")
    current = facts.unfinished[0][:8] if facts.unfinished else "none"
    lines = [
        f"Current run: {current}",
        f"Queued: {max(0, len(facts.unfinished) - 1)}",
        f"Assistant: {assistant} (profile {routed.name})",
        f"Connector: {connector}" + (f" (role {role})" if role else ""),
    ]
    if facts.last_finished is not None:
        lines.append(f"Last run: {facts.last_finished.run_id[:8]} {facts.last_finished.status}")
    return "\n".join(lines)
