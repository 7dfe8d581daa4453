"""Topic records: one module per topic, one discriminated union per topic.

These pydantic models are the public contract; `docs/asyncapi.json` is generated from them.
"""

from agentstream.contracts.base import SCHEMA_VERSION, Record, new_id, utcnow
from agentstream.contracts.common import ChatMessage, ReplyTarget, ToolCallSpec, Usage
from agentstream.contracts.deliveries import DeliveryReceipt, LedgerState
from agentstream.contracts.dlq import DeadLetter
from agentstream.contracts.endings import NOT_RUN_REASONS, RESUMABLE_REASONS, FinishReason, RunStatus
from agentstream.contracts.events import (
    EventBase,
    MessageCompleted,
    MessageDelta,
    MessageStarted,
    Notice,
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
    ToolCall,
    ToolResult,
)
from agentstream.contracts.inbound import Attachment, InboundMessage, User, conversation_key
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
from agentstream.contracts.tools import ToolCallRequest, ToolCallResult

__all__ = [
    "NOT_RUN_REASONS",
    "RESUMABLE_REASONS",
    "SCHEMA_VERSION",
    "Attachment",
    "ChatMessage",
    "DeadLetter",
    "DeliveryReceipt",
    "DoubleTexting",
    "EventBase",
    "FinishReason",
    "InboundMessage",
    "InterruptRun",
    "LedgerState",
    "MessageCompleted",
    "MessageDelta",
    "MessageStarted",
    "Notice",
    "Record",
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
    "ToolCall",
    "ToolCallRequest",
    "ToolCallResult",
    "ToolCallSpec",
    "ToolResult",
    "Usage",
    "User",
    "conversation_key",
    "new_id",
    "utcnow",
]
