"""Topic records: one module per topic, one discriminated union per topic.

These pydantic models are the public contract; `docs/asyncapi.json` is generated from them.
"""

from agentstream.contracts.base import SCHEMA_VERSION, Record, RecordType, new_id, utcnow
from agentstream.contracts.common import ChatMessage, MessageRole, ReplyTarget, ToolCallSpec, Usage
from agentstream.contracts.deliveries import DeliveryReceipt, LedgerState
from agentstream.contracts.dlq import DeadLetter
from agentstream.contracts.endings import NOT_RUN_REASONS, RESUMABLE_REASONS, FinishReason, RunStatus
from agentstream.contracts.events import (
    AnyRunEvent,
    DeltaKind,
    EventBase,
    MessageCompleted,
    MessageDelta,
    MessageStarted,
    Notice,
    NoticeLevel,
    RunEvent,
    RunEventAdapter,
    RunFinished,
    RunHeartbeat,
    RunQueued,
    RunStarted,
    SegmentBreak,
    StepCompleted,
    StepFailed,
    StepStarted,
    StepType,
    ToolCall,
    ToolResult,
)
from agentstream.contracts.inbound import Attachment, InboundMessage, KnownPlatform, User, conversation_key
from agentstream.contracts.runs import (
    DoubleTexting,
    InterruptRun,
    ResetConversation,
    ResumeRun,
    RunCommand,
    RunCommandAdapter,
    RunOptions,
    StartRun,
)
from agentstream.contracts.tool_catalog import ToolCatalogEntry, ToolKind
from agentstream.contracts.tools import ToolCallRequest, ToolCallResult

__all__ = [
    "NOT_RUN_REASONS",
    "RESUMABLE_REASONS",
    "SCHEMA_VERSION",
    "AnyRunEvent",
    "Attachment",
    "ChatMessage",
    "DeadLetter",
    "DeliveryReceipt",
    "DeltaKind",
    "DoubleTexting",
    "EventBase",
    "FinishReason",
    "InboundMessage",
    "InterruptRun",
    "KnownPlatform",
    "LedgerState",
    "MessageCompleted",
    "MessageDelta",
    "MessageRole",
    "MessageStarted",
    "Notice",
    "NoticeLevel",
    "Record",
    "RecordType",
    "ReplyTarget",
    "ResetConversation",
    "ResumeRun",
    "RunCommand",
    "RunCommandAdapter",
    "RunEvent",
    "RunEventAdapter",
    "RunFinished",
    "RunHeartbeat",
    "RunOptions",
    "RunQueued",
    "RunStarted",
    "RunStatus",
    "SegmentBreak",
    "StartRun",
    "StepCompleted",
    "StepFailed",
    "StepStarted",
    "StepType",
    "ToolCall",
    "ToolCallRequest",
    "ToolCallResult",
    "ToolCallSpec",
    "ToolCatalogEntry",
    "ToolKind",
    "ToolResult",
    "Usage",
    "User",
    "conversation_key",
    "new_id",
    "utcnow",
]
