"""The closed vocabularies of the topic records (`agentstream.contracts`): every `StrEnum` is
pinned to its wire spelling and round-trips through JSON unchanged (docs/topics.md)."""

import importlib
import inspect
import json
import pkgutil
from enum import StrEnum
from typing import Any, get_args

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

import agentstream.contracts
from agentstream.contracts import (
    AnswerApproval,
    AnyRunEvent,
    ApprovalDecision,
    ApprovalOutcome,
    ChatMessage,
    DeadLetter,
    DeliveryReceipt,
    DeltaKind,
    DoubleTexting,
    FinishReason,
    HookPoint,
    InboundMessage,
    InterruptRun,
    KnownPlatform,
    LedgerState,
    MessageDelta,
    MessageRole,
    Notice,
    NoticeLevel,
    Record,
    RecordType,
    ReplyTarget,
    ResetConversation,
    ResumeRun,
    RunCommandAdapter,
    RunEventAdapter,
    RunFinished,
    RunStatus,
    StartRun,
    StepStarted,
    StepType,
    ToolCallRefusal,
    ToolCallRequest,
    ToolCallResult,
    ToolCatalogEntry,
    ToolKind,
    WebEnding,
    WebFrameKind,
    WebFrameOp,
)

# The public spelling of every value. Changing one breaks every producer and consumer
# outside this repository: add values, never rename them.
WIRE: dict[type[StrEnum], set[str]] = {
    RecordType: {
        "inbound.message",
        "run.start",
        "run.interrupt",
        "run.resume",
        "conversation.reset",
        "run.approval",
        "run.queued",
        "run.started",
        "message.started",
        "message.delta",
        "message.completed",
        "tool.call",
        "tool.result",
        "segment.break",
        "step.started",
        "step.completed",
        "step.failed",
        "run.heartbeat",
        "tool.heartbeat",
        "notice",
        "run.finished",
        "tool.call_request",
        "tool.call_result",
        "tool.catalog_entry",
        "delivery.receipt",
        "web.frame",
        "dead_letter",
    },
    MessageRole: {"system", "user", "assistant", "tool"},
    DeltaKind: {"text", "thinking"},
    StepType: {"hook_create", "llm", "tool", "hook_next", "delegate", "approval"},
    ApprovalDecision: {"approve", "deny"},
    ApprovalOutcome: {"approved", "denied", "expired"},
    ToolCallRefusal: {"not_offered", "not_approved", "unsigned", "bad_signature"},
    NoticeLevel: {"info", "warning", "error"},
    RunStatus: {"completed", "failed", "interrupted"},
    FinishReason: {
        "user",
        "reset",
        "double_texting",
        "shutdown",
        "error",
        "rebalanced",
        "runner_lost",
        "aborted",
        "rejected",
        "merged",
    },
    DoubleTexting: {"enqueue", "interrupt", "reject", "collect"},
    ToolKind: {"builtin", "workspace", "function", "mcp"},
    LedgerState: {"pending", "sending", "sent", "unknown", "failed"},
    KnownPlatform: {"telegram", "slack", "discord", "signal", "webhook", "web", "console", "memory"},
    WebFrameOp: {"send", "edit"},
    HookPoint: {
        "agent:start",
        "agent:step",
        "agent:end",
        "delivery:sent",
        "session:start",
        "session:end",
        "session:reset",
        "command:*",
    },
    WebFrameKind: {"text", "tool"},
    WebEnding: {"stopped", "paused", "failed", "resumed"},
}

IDENTITY = {"run_id": "r1", "root_run_id": "r1", "conversation_key": "web:c1", "seq": 1}
TARGET = ReplyTarget(platform="web", chat_id="c1")


def contract_enums() -> set[type[StrEnum]]:
    """Every `StrEnum` defined in a module of `agentstream.contracts`."""
    found: set[type[StrEnum]] = set()
    for info in pkgutil.iter_modules(agentstream.contracts.__path__):
        module = importlib.import_module(f"agentstream.contracts.{info.name}")
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, StrEnum) and value is not StrEnum and value.__module__ == module.__name__:
                found.add(value)
    return found


def test_every_contract_enum_is_pinned_and_exported():
    assert contract_enums() == set(WIRE)
    assert {e.__name__ for e in WIRE} <= set(agentstream.contracts.__all__)


@pytest.mark.parametrize("enum", list(WIRE), ids=lambda e: e.__name__)
def test_enum_values_are_the_wire_spelling(enum: type[StrEnum]):
    assert {m.value for m in enum} == WIRE[enum]


@pytest.mark.parametrize("member", [m for e in WIRE for m in e], ids=lambda m: f"{type(m).__name__}.{m.name}")
def test_member_round_trips_through_json(member: StrEnum):
    adapter: TypeAdapter[Any] = TypeAdapter(type(member))
    assert adapter.dump_json(member) == json.dumps(member.value).encode()
    back = adapter.validate_json(json.dumps(member.value))
    assert back is member


def round_trip(record: BaseModel) -> dict[str, Any]:
    """The record as JSON on the wire, checked to decode back to an equal record."""
    wire = record.model_dump_json()
    assert type(record).model_validate_json(wire) == record
    return json.loads(wire)


@pytest.mark.parametrize("level", list(NoticeLevel))
def test_notice_level_on_the_wire(level: NoticeLevel):
    assert round_trip(Notice(**IDENTITY, level=level, text="hi"))["level"] == level.value


@pytest.mark.parametrize("kind", list(DeltaKind))
def test_delta_kind_on_the_wire(kind: DeltaKind):
    assert round_trip(MessageDelta(**IDENTITY, message_id="m", text="t", kind=kind))["kind"] == kind.value


@pytest.mark.parametrize("step_type", list(StepType))
def test_step_type_on_the_wire(step_type: StepType):
    assert round_trip(StepStarted(**IDENTITY, step_id="s", step_type=step_type))["step_type"] == step_type.value


@pytest.mark.parametrize("role", list(MessageRole))
def test_message_role_on_the_wire(role: MessageRole):
    assert round_trip(ChatMessage(role=role, content="x"))["role"] == role.value


@pytest.mark.parametrize("status", list(RunStatus))
@pytest.mark.parametrize("reason", [None, *FinishReason])
def test_run_ending_on_the_wire(status: RunStatus, reason: FinishReason | None):
    data = round_trip(RunFinished(**IDENTITY, status=status, reason=reason))
    assert (data["status"], data["reason"]) == (status.value, reason.value if reason else None)


@pytest.mark.parametrize("state", list(LedgerState))
def test_ledger_state_on_the_wire(state: LedgerState):
    receipt = DeliveryReceipt(
        conversation_key="web:c1", root_run_id="r1", platform="web", chat_id="c1", segment=0, state=state
    )
    assert round_trip(receipt)["state"] == state.value


RECORDS: list[BaseModel] = [
    InboundMessage(id="m1", platform=KnownPlatform.WEB, chat_id="c1", user={"id": "u1"}, text="hi"),
    StartRun(run_id="r1", conversation_key="web:c1", assistant_id="a", text="hi", reply_target=TARGET),
    InterruptRun(conversation_key="web:c1"),
    ResumeRun(conversation_key="web:c1", run_id="r1"),
    ResetConversation(conversation_key="web:c1"),
    AnswerApproval(conversation_key="web:c1", decision=ApprovalDecision.DENY, user_id="u1", reply_target=TARGET),
    ToolCallRequest(run_id="r1", root_run_id="r1", conversation_key="web:c1", call_id="c", tool="t", arguments="{}"),
    ToolCallResult(run_id="r1", root_run_id="r1", conversation_key="web:c1", call_id="c", tool="t", ok=True),
    ToolCatalogEntry(tool="clock", kind=ToolKind.BUILTIN, executor_id="e1", available=True, heartbeat_s=5),
    DeliveryReceipt(
        conversation_key="web:c1", root_run_id="r1", platform="web", chat_id="c1", segment=0, state=LedgerState.SENT
    ),
    DeadLetter(source_topic="events", raw_value="[", error="not JSON", service="delivery"),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_record_type_on_the_wire(record: BaseModel):
    assert round_trip(record)["type"] in WIRE[RecordType]


def record_classes() -> set[type[Record]]:
    """Every record class of a topic: a `Record` with a `type` of its own."""
    found: set[type[Record]] = set()
    for info in pkgutil.iter_modules(agentstream.contracts.__path__):
        module = importlib.import_module(f"agentstream.contracts.{info.name}")
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, Record) and "type" in value.model_fields:
                found.add(value)
    return found


def test_record_type_lists_every_record_class_type():
    spelled = [cls.model_fields["type"].default for cls in record_classes()]
    assert sorted(spelled) == sorted(RecordType)  # each once: no two classes share a type


def test_the_type_alone_picks_the_event_class():
    for cls in get_args(AnyRunEvent):
        tag = RecordType(cls.model_fields["type"].default)
        try:
            decoded = RunEventAdapter.validate_json(json.dumps({**IDENTITY, "type": tag.value}))
        except ValidationError as err:  # fields of that class missing: the errors name its tag
            assert {e["loc"][0] for e in err.errors()} == {tag.value}
        else:
            assert type(decoded) is cls


def test_run_commands_decode_by_type():
    decoded = RunCommandAdapter.validate_json(json.dumps({"type": "run.interrupt", "conversation_key": "web:c1"}))
    assert isinstance(decoded, InterruptRun) and decoded.type == RecordType.RUN_INTERRUPT
    assert decoded.reason is FinishReason.USER


def test_a_record_produced_by_a_foreign_producer_keeps_its_spelling():
    raw = {**IDENTITY, "type": "notice", "level": "warning", "text": "x"}
    decoded = RunEventAdapter.validate_json(json.dumps(raw))
    assert isinstance(decoded, Notice) and decoded.level is NoticeLevel.WARNING
    assert raw.items() <= json.loads(decoded.model_dump_json()).items()
