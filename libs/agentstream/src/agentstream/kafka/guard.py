"""The guard around every Kafka handler of every service (a FastStream middleware).

A handler that raises an exception it did not expect would otherwise lose the record
without a trace: FastStream swallows handler exceptions, and the consumer reads on. The
guard catches it, hands the record(s) and the error to the service (which logs them with
topic, partition and offset and sends each record to `dlq`), and lets the subscriber go
on with the next record. A batch handler's failure dead-letters the whole batch: which
record broke it is unknown, and every one of them is on `dlq` to replay.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from faststream.exceptions import IgnoredException
from faststream.message import StreamMessage
from faststream.middlewares import BaseMiddleware

OnFailure = Callable[[StreamMessage[Any], Exception], Awaitable[None]]
CallNext = Callable[..., Awaitable[Any]]  # what FastStream hands a middleware's `consume_scope`
REASON_LIMIT = 300


def failure_reason(err: BaseException, limit: int = REASON_LIMIT) -> str:
    """`RecursionError: maximum recursion depth exceeded`: the type and the first line of the
    message, shortened. Never a traceback (no file paths, no locals) in a dead letter."""
    lines = str(err).strip().splitlines()
    first = lines[0].strip() if lines else ""
    text = f"{type(err).__name__}: {first}" if first else type(err).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def records_of(msg: StreamMessage[Any]) -> list[Any]:
    """The aiokafka `ConsumerRecord`s behind a message: one, or all of a batch."""
    raw = msg.raw_message
    return list(raw) if isinstance(raw, tuple | list) else [raw]


def handler_guard(on_failure: OnFailure) -> Callable[..., BaseMiddleware[Any, Any]]:
    """The middleware factory to add to a broker: every handler's unexpected exception
    goes to `on_failure` instead of up into FastStream."""

    class HandlerGuard(BaseMiddleware[Any, Any]):
        async def consume_scope(self, call_next: CallNext, msg: StreamMessage[Any]) -> Any:
            try:
                return await call_next(msg)
            except IgnoredException:  # FastStream's own control flow (ack/nack/stop)
                raise
            except Exception as err:
                await on_failure(msg, err)
                return None

    return HandlerGuard
