"""ingress service: carries out the pipeline's decision for each inbound record."""

from __future__ import annotations

from faststream.kafka.annotations import KafkaMessage
from prometheus_client import Counter

from agentstream.contracts import Notice, conversation_key, new_id
from agentstream.service import Service
from agentstream_ingress.pipeline import DeadLetterDecision, StartDecision, decide


class IngressService(Service):
    name = "ingress"

    def setup(self) -> None:
        self.decisions = Counter(
            "agentstream_ingress_decisions_total", "Inbound records by decision", ["decision"],
            registry=self.registry,
        )
        self.broker.subscriber(self.topics.inbound, **self.subscriber_options())(self.on_inbound)

    async def on_inbound(self, msg: KafkaMessage) -> None:
        decision = decide(bytes(msg.body), self.settings)
        match decision:
            case DeadLetterDecision(error=error, notify=target):
                await self.dead_letter(msg, error)
                if target is not None:
                    key = conversation_key(target.platform, target.chat_id, target.thread_id)
                    notice_run = new_id()
                    await self.publish(self.topics.events, Notice(
                        run_id=notice_run, root_run_id=notice_run, conversation_key=key, seq=0, level="error",
                        text=f"Your message could not be processed: {error}", reply_target=target,
                    ), key)
                self.decisions.labels("dead_letter").inc()
            case StartDecision(start=start, queued=queued):
                key = start.conversation_key
                await self.publish(self.topics.events, queued, key)
                await self.publish(self.topics.runs, start, key)
                self.decisions.labels("start").inc()
                self.log.info("run queued", run_id=start.run_id, conversation=key)
