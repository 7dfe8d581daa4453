"""The ordered decisions for one inbound record (the checks of docs/ingress.md), top to bottom.

parse → dedupe → self-echo → authz/pairing → rate limit → receive hooks → commands →
routing → start. Every step either returns a final `Decision` or hands the message on.
The pipeline reads and records state through `IngressPorts` (the database) but never
publishes: the app carries the returned decision out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from agentstream.config import Settings
from agentstream.contracts import Arrival, InboundMessage, NoticeLevel
from agentstream.contracts.inbound import DedupeKey
from agentstream_ingress import commands
from agentstream_ingress.authz import Verdict, authorize, is_direct_chat, is_self_echo
from agentstream_ingress.decisions import (
    DeadLetterDecision,
    Decision,
    DropDecision,
    DropReason,
    NoticeDecision,
    NoticeReason,
    StartDecision,
    target_of,
)
from agentstream_ingress.hooks import Deny, Handled, Hook, Rewrite, call_hook, load_hook, rewritten
from agentstream_ingress.pairing import Issue, notice_text
from agentstream_ingress.parsing import parse
from agentstream_ingress.ratelimit import RateLimiter
from agentstream_ingress.routing import Routed, route
from agentstream_ingress.starting import Cause, Position, build_start

log = structlog.get_logger("agentstream.ingress.hooks")
store_log = structlog.get_logger("agentstream.ingress")

# Batches whose started runs may wait to be remembered while later batches are decided.
MAX_REMEMBERS_BEHIND = 4


@dataclass
class Batch:
    """What one batch of records shares: the `/model` overrides, the runs started so far."""

    roles: dict[str, str | None]
    started: list[tuple[InboundMessage, str]] = field(default_factory=list)


class IngressPorts(Protocol):
    async def first_sightings(self, idents: Sequence[DedupeKey]) -> set[DedupeKey]: ...
    async def is_paired(self, platform: str, user_id: str) -> bool: ...
    async def issue_pairing(self, platform: str, user_id: str, chat_id: str) -> Issue: ...
    async def role_overrides(self, keys: Collection[str]) -> dict[str, str | None]: ...
    async def facts(self, key: str) -> commands.ConversationFacts: ...
    async def set_role(self, key: str, role: str | None) -> None: ...
    async def remember_starts(self, started: Sequence[tuple[InboundMessage, str]]) -> None: ...


class Pipeline:
    def __init__(self, settings: Settings, ports: IngressPorts, limiter: RateLimiter | None = None) -> None:
        unknown = sorted({r.profile for r in settings.routes} - set(settings.profiles))
        if unknown:  # a typo in a route would silently send its chats to the default profile
            raise ValueError(f"routes name unknown profiles: {', '.join(unknown)}")
        self.settings = settings
        self.ports = ports
        self.limiter = limiter or RateLimiter(settings.authz.rate_limit)
        hooks = settings.ingress.hooks
        self.receive_hooks: list[Hook] = [load_hook(p) for p in hooks.message_received]
        self._remembering: asyncio.Task[None] | None = None  # the last batch's; it awaits the one before
        self._behind = 0  # batches whose started runs are not remembered yet
        self.command_hooks: dict[str, list[Hook]] = {
            name.removeprefix("/").lower(): [load_hook(p) for p in paths] for name, paths in hooks.commands.items()
        }

    async def decide(self, raw: bytes) -> Decision:
        """One record, its effects recorded when this returns (`decide_batch` leaves the
        remembering of started runs running; see `settle`)."""
        decision = (await self.decide_batch([raw]))[0]
        await self.settle()
        return decision

    async def decide_batch(
        self,
        raws: Sequence[bytes],
        positions: Sequence[Position | None] | None = None,
        arrivals: Sequence[Arrival | None] | None = None,
    ) -> list[Decision]:
        """One decision per record, in order. The database is asked once per batch for
        dedupe and the `/model` overrides, and told once about the runs started: in the
        background, in batch order, finished before a command reads them (or `settle` returns).
        `positions`: where each record is in `inbound` (the runs' ids derive from it); `arrivals`:
        when each was produced and read (stamped on the runs it starts)."""
        parsed = [parse(raw, self.settings.ingress.max_text_chars) for raw in raws]
        messages = [p for p in parsed if isinstance(p, InboundMessage)]
        idents = [m.dedupe_key for m in messages]
        if self._behind >= MAX_REMEMBERS_BEHIND:  # a slow database: wait rather than queue writes
            await self.settle()
        # Two independent queries on two connections: one wait. Both finish before a failure
        # is raised, so the caller knows which sightings were claimed (see `first_sightings`).
        fresh, roles = await asyncio.gather(
            self.ports.first_sightings(idents),  # dedupe
            self.ports.role_overrides({m.conversation_key for m in messages}),
            return_exceptions=True,
        )
        for result in (fresh, roles):
            if isinstance(result, BaseException):
                raise result
        assert isinstance(fresh, set) and isinstance(roles, dict)
        batch = Batch(roles=roles)
        decisions: list[Decision] = []
        ident_of = iter(idents)  # each message's, in order
        nones = [None] * len(parsed)
        for item, position, arrival in zip(parsed, positions or nones, arrivals or nones, strict=True):
            if isinstance(item, DeadLetterDecision):
                decisions.append(item)
                continue
            ident = next(ident_of)
            if ident not in fresh:  # seen before, or earlier in this batch
                decisions.append(DropDecision(DropReason.DUPLICATE))
                continue
            fresh.discard(ident)
            decision = await self._decide(item, batch, Cause(ident, position, arrival))
            if isinstance(decision, StartDecision):  # what /retry repeats and /status reports
                batch.started.append((decision.message, decision.start.run_id))
            decisions.append(decision)
        if batch.started:
            # Written while the batch's output goes out and the next batches are decided (only a
            # command, which reads them, waits: `command`), one batch's after the other's.
            self._behind += 1
            self._remembering = asyncio.create_task(
                self._remember_quietly(self._remembering, batch.started), name="ingress-remember"
            )
        return decisions

    async def settle(self) -> None:
        """Wait until the runs of the batches decided so far are remembered."""
        task, self._remembering = self._remembering, None
        if task is not None:
            await task

    async def _remember_quietly(
        self, previous: asyncio.Task[None] | None, started: list[tuple[InboundMessage, str]]
    ) -> None:
        try:
            if previous is not None:
                await previous  # the last message of a conversation is the last one remembered
            await self.ports.remember_starts(started)
        except Exception as err:  # the runs are decided and going out: /status and /retry just miss them
            store_log.error("remembering started runs failed", runs=len(started), error=repr(err))
        finally:
            self._behind -= 1

    async def _remember(self, batch: Batch) -> None:
        if batch.started:
            await self.ports.remember_starts(batch.started)
            batch.started = []

    async def _decide(self, msg: InboundMessage, batch: Batch, cause: Cause) -> Decision:
        if is_self_echo(msg, self.settings.authz):
            return DropDecision(DropReason.SELF_ECHO)
        routed = route(msg, self.settings)  # (computed before authz: the profile has allow/deny lists)
        verdict = self.verdict(msg, routed)
        if verdict is not Verdict.ALLOWED:  # an allowed sender (most) awaits nothing here
            refusal = await self.refusal(msg, verdict)
            if refusal is not None:
                return refusal
        if not self.limiter.allow(msg.platform, msg.user.id):
            rate_limited = self.settings.ingress.texts_for(msg.platform).rate_limited
            return NoticeDecision(NoticeReason.RATE_LIMITED, rate_limited, target_of(msg), NoticeLevel.WARNING)
        if self.receive_hooks:
            hooked = await self.run_hooks(self.receive_hooks, msg)
            if not isinstance(hooked, InboundMessage):
                return hooked
            msg = hooked
        command = commands.parse_command(msg.text)
        if command is not None:
            return await self.command(command, msg, routed, batch, cause)
        role = batch.roles.get(msg.conversation_key) if batch.roles else None  # (no /model override: no key)
        return build_start(msg, routed, role, self.settings, cause=cause)

    def verdict(self, msg: InboundMessage, routed: Routed) -> Verdict:
        bypassed = routed.bypassed.authz if routed.bypassed is not None else None
        return authorize(msg, self.settings.authz.rule_for(msg.platform), routed.profile.authz, bypassed)

    async def refusal(self, msg: InboundMessage, verdict: Verdict) -> NoticeDecision | None:
        """None if `msg` may start a run after all (a paired sender), else the notice refusing it
        (or asking to pair)."""
        if verdict is Verdict.ALLOWED:
            return None
        texts = self.settings.ingress.texts_for(msg.platform)
        if verdict is Verdict.UNKNOWN:
            if await self.ports.is_paired(msg.platform, msg.user.id):
                return None
            pairing = self.settings.authz.pairing
            if pairing.enabled and is_direct_chat(msg):
                issue = await self.ports.issue_pairing(msg.platform, msg.user.id, msg.chat_id)
                return NoticeDecision(NoticeReason.PAIRING, notice_text(issue, pairing, texts), target_of(msg))
        return NoticeDecision(NoticeReason.REFUSED, texts.refused, target_of(msg), NoticeLevel.WARNING)

    async def run_hooks(self, hooks: list[Hook], msg: InboundMessage, *extra: object) -> InboundMessage | Decision:
        for hook in hooks:
            try:
                result = await call_hook(hook, msg, *extra)
            except Exception as err:  # a broken hook must not take the front door down
                log.error("hook failed", hook=getattr(hook, "__name__", str(hook)), error=repr(err))
                continue
            match result:
                case Deny(text=text):
                    return NoticeDecision(NoticeReason.HOOK_DENIED, text, target_of(msg), NoticeLevel.WARNING)
                case Handled(reply=None):
                    return DropDecision(DropReason.HANDLED)
                case Handled(reply=reply):
                    return NoticeDecision(NoticeReason.HOOK_HANDLED, reply or "", target_of(msg))
                case Rewrite(text=text):
                    msg = rewritten(msg, text)
        return msg

    async def command(
        self, cmd: commands.Command, msg: InboundMessage, routed: Routed, batch: Batch, cause: Cause
    ) -> Decision:
        hooked = await self.run_hooks(self.command_hooks.get(cmd.name, []), msg, cmd)
        if not isinstance(hooked, InboundMessage):
            return hooked
        key = hooked.conversation_key
        rewritten_cmd = commands.parse_command(hooked.text)
        if rewritten_cmd is None:  # a hook turned the command into an ordinary message
            return build_start(hooked, routed, batch.roles.get(key), self.settings, cause=cause)
        await self.settle()  # /retry and /status must see the runs started by earlier batches
        await self._remember(batch)  # ... and earlier in this one
        facts = await self.ports.facts(key)
        decision = commands.handle(rewritten_cmd, hooked, routed, facts, self.settings, cause)
        if isinstance(decision, commands.RoleDecision):
            await self.ports.set_role(key, decision.role)
            batch.roles[key] = decision.role
            return decision.notice
        return decision
