"""First sends that land late leave no orphan stub: delivery as a process, Kafka, a fake Telegram.

In half the chats the first `sendMessage` is applied at once but its answer comes after the
client gave up; in the other half it is applied only after the client gave up (after the
segment's next send). Either way the chat ends showing exactly its final, once: the stub the
first send posted is found by its exact text and deleted once the late-landing window passed.
"""

from __future__ import annotations

import asyncio

import pytest

from agentstream_testing.fake_platforms import FakeTelegram
from tests.chaos.delivery_rig import TELEGRAM, DeliveryRig, answer, tally

pytestmark = pytest.mark.chaos

CHATS = 8


async def test_late_landing_first_sends_leave_no_stub(kafka_bootstrap, topic_prefix, tmp_path):
    hold = TELEGRAM["timeout_s"] + 1.0  # past the client's timeout, well inside the late-landing window
    # The window is the product's promise that nothing lands later; this fake keeps it by a margin
    # a loaded machine (this process starved for seconds) cannot eat up.
    window = hold + 5.0
    async with (
        FakeTelegram() as tg,
        DeliveryRig(kafka_bootstrap, topic_prefix, tmp_path, tg, late_landing_s=window) as rig,
    ):
        chats = [f"-{500 + i}" for i in range(CHATS)]
        lost, late = chats[: CHATS // 2], chats[CHATS // 2 :]
        for chat in lost:
            tg.lose_answer("sendMessage", hold, chat_id=chat)  # posted at once, the answer too late
        for chat in late:
            tg.land_late("sendMessage", hold, chat_id=chat)  # posted only after the client gave up
        await asyncio.gather(*(rig.run(f"r{i}", c, answer(i, 20), pause=0.05) for i, c in enumerate(chats)))
        finals = {c: answer(i, 20) for i, c in enumerate(chats)}
        await rig.until(lambda: all(len(tg.chats[c]) >= 2 for c in chats), 20, "every stub and its final")
        await rig.until(lambda: all(tg.texts(c) == [f] for c, f in finals.items()), 30, "every stub deleted")
        await asyncio.sleep(1.0)  # nothing further lands
        await tally(rig, "first send lands late (4 answer lost, 4 applied late)", finals)
    for chat in chats:
        first = tg.calls_to(chat, "sendMessage")[0]
        stub = next(m for m in tg.chats[chat] if m.text == first.body["text"])
        assert stub.text == first.body["text"] and stub.deleted and stub.history == [stub.text]
        assert len(tg.calls_to(chat, "deleteMessage")) == 1
    assert rig.log().count("orphan stub deleted") == CHATS
