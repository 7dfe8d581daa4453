"""`runs` topic: commands for the agent-runner. Key: conversation key."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from agentstream.contracts.approvals import ApprovalDecision
from agentstream.contracts.base import Record, Value
from agentstream.contracts.common import ChatMessage, ReplyTarget
from agentstream.contracts.endings import FinishReason
from agentstream.contracts.inbound import User
from agentstream.contracts.limits import ConversationKey, Name, RunId, SessionId, Subject


class DoubleTexting(StrEnum):
    """What a new message does while a run of its conversation is active (docs/decisions.md)."""

    ENQUEUE = "enqueue"  # waits, then runs, in order
    INTERRUPT = "interrupt"  # stops the active run, then runs
    REJECT = "reject"  # refused with a notice; the active run goes on
    COLLECT = "collect"  # waits with the others that arrive meanwhile; they run as one turn


HISTORY = "history"  # the one thing `skip` can name today


class RunOptions(BaseModel):
    """Per-request options of a run, parsed once when the record is read; they win over the
    assistant's `options`.

    On the wire a JSON object. The keys below are typed; any other key (the model's sampling
    options such as `temperature` or `max_tokens`, `skip.history`) is kept as given and passed
    on with the rest. A typed key whose value does not fit is ignored, as if it were absent:
    a request is never refused for a malformed option. Serialized, only the keys that were
    given appear.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    connector: str | None = Field(
        default=None, min_length=1, strict=True, description="Connector id or `use::<role>`; wins over the assistant's."
    )
    double_texting: DoubleTexting | None = Field(
        default=None, description="Policy while a run is active; None = the assistant's."
    )
    messages: list[ChatMessage] | None = Field(
        default=None, description="The conversation a client sends instead of `text`; empty or None = `text`."
    )
    history_size: int | None = Field(
        default=None, ge=0, strict=True, description="History messages to load; None = the assistant's, else 20."
    )
    skip: str | list[Any] | None = Field(default=None, description="`history` (or a list naming it): no history.")
    delivery: dict[str, Any] | None = Field(default=None, description="Delivery settings of the routing profile.")

    @model_validator(mode="wrap")
    @classmethod
    def _ignore_malformed(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(data)
        except ValidationError as err:
            malformed = {e["loc"][0] for e in err.errors() if e["loc"]}
            if not isinstance(data, Mapping) or not malformed:
                raise
            return handler({k: v for k, v in data.items() if k not in malformed})

    @model_serializer(mode="wrap")
    def _given_keys_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        given = self.model_fields_set  # the extra keys given are in it too
        if not given:  # most runs' options: nothing to serialize (a fifth of a StartRun's serializing)
            return {}
        dumped: dict[str, Any] = handler(self)
        return {k: v for k, v in dumped.items() if k in given}

    def as_dict(self) -> dict[str, Any]:
        """The options as given, in JSON types (what hooks and the model call see)."""
        return self.model_dump(mode="json")

    def over(self, base: Mapping[str, Any]) -> RunOptions:
        """These options merged over `base` (the assistant's options, or an earlier request's)."""
        return RunOptions.model_validate({**base, **self.as_dict()})

    @property
    def skips_history(self) -> bool:
        """`skip: history`, `skip: [history]` or `skip.history: true`."""
        listed = self.skip == HISTORY or (isinstance(self.skip, list) and HISTORY in self.skip)
        return listed or (self.model_extra or {}).get(f"skip.{HISTORY}") is True


class Arrival(Value):
    """When a run's message passed each hop before the runner, in seconds since the epoch (one
    clock per host: compare across hosts only as far as their clocks agree). Ingress sets the
    first two on the `StartRun`, the runner the last two and copies them onto `run.started`;
    they give the time from a message to its model request per hop (docs/topics.md)."""

    produced_at: float | None = Field(default=None, description="The inbound record's timestamp (ms).")
    ingress_read_at: float | None = Field(default=None, description="Ingress read the inbound record.")
    runs_produced_at: float | None = Field(default=None, description="The `runs` record's timestamp (ms).")
    runner_read_at: float | None = Field(default=None, description="The runner read the `runs` record.")


class StartRun(Record):
    """Start a root run for one user message."""

    type: Literal["run.start"] = "run.start"
    run_id: RunId
    conversation_key: ConversationKey
    session_id: SessionId | None = Field(
        default=None, description="History session; None = the conversation's current."
    )
    assistant_id: Name
    user: User | None = Field(default=None, description="The identity; None is refused by permission.")
    text: str
    inbound_id: Subject | None = Field(default=None, description="The InboundMessage id that caused this run.")
    reply_target: ReplyTarget
    options: RunOptions = Field(
        default_factory=RunOptions, description="Per-request options (win over the assistant's)."
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    arrival: Arrival | None = Field(default=None, description="When its message passed each hop so far.")


class InterruptRun(Record):
    """Stop the conversation's current run (or a given run)."""

    type: Literal["run.interrupt"] = "run.interrupt"
    conversation_key: ConversationKey
    run_id: RunId | None = Field(
        default=None,
        description="Stop only this run (ignored when another one is active); None = whichever run is active.",
    )
    reason: FinishReason = Field(default=FinishReason.USER, description="The stopped run's `run.finished` reason.")


class ResumeRun(Record):
    """Resume a failed or interrupted run from its checkpoint."""

    type: Literal["run.resume"] = "run.resume"
    conversation_key: ConversationKey
    run_id: RunId = Field(
        description="The root run to go on from its checkpoint, under the same id; ignored when it has none."
    )


class ResetConversation(Record):
    """Start a new session: empty history, current run stopped."""

    type: Literal["conversation.reset"] = "conversation.reset"
    conversation_key: ConversationKey


class AnswerApproval(Record):
    """`/approve` or `/deny`: the answer to the conversation's pending tool approval.

    The runner decides whether it counts: from the run's own user (of the run's tenant), or from an admin
    of the run's tenant."""

    type: Literal["run.approval"] = "run.approval"
    conversation_key: ConversationKey
    decision: ApprovalDecision
    user_id: Subject = Field(description="Who answered.")
    tenant_id: Subject | None = Field(default=None, description="The answerer's tenant (none: `default`).")
    admin: bool = Field(default=False, description="Ingress found the answerer in `authz.*.admins`.")
    reply_target: ReplyTarget = Field(description="Where to say that no call waits, when none does.")


RunCommand = Annotated[
    StartRun | InterruptRun | ResumeRun | ResetConversation | AnswerApproval, Field(discriminator="type")
]
RunCommandAdapter: TypeAdapter[RunCommand] = TypeAdapter(RunCommand)
