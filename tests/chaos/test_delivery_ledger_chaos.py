"""The delivery ledger under faults: one test per loss path, each with a `kill -9` of delivery.

1. a send waiting behind a 429 (`pending`) when delivery dies is sent after the restart;
2. an edit that times out and lands after the final is overwritten by the final again
   once the late-landing window has passed, also when delivery dies inside the window;
3. a first send that times out (it did post a message) still gets its segment's final,
   as a new message, and the stub it posted is found and deleted by the restarted delivery;
4. notices go through the ledger: exactly once across a restart.

Each prints its row of the table (fault, runs, exact finals, duplicates, lost).
"""

from __future__ import annotations

import asyncio

import pytest

from agentstream.contracts import LedgerState, Notice, ReplyTarget
from agentstream_testing.fake_platforms import FakeTelegram
from tests.chaos.delivery_rig import CURSOR, TELEGRAM, DeliveryRig, answer, tally

pytestmark = pytest.mark.chaos

CHATS = 5


async def test_send_waiting_behind_429_survives_kill9(kafka_bootstrap, topic_prefix, tmp_path):
    # No call here is meant to time out: at load ~9 the fake's answer (in this process) once came after
    # the rig's 0.5 s and the call was rightly "unknown" — not what this test is about.
    async with (
        FakeTelegram() as tg,
        DeliveryRig(kafka_bootstrap, topic_prefix, tmp_path, tg, timeout_s=10.0) as rig,
    ):
        chats = [f"-{100 + i}" for i in range(CHATS)]
        for chat in chats:
            tg.throttle(chat, retry_after=4)
        await asyncio.gather(*(rig.run(f"r{i}", chat, answer(i)) for i, chat in enumerate(chats)))
        await rig.until(lambda: all(tg.calls_to(c) for c in chats), 20, "a 429 for every chat")
        # Each row is written back to `pending` after its 429; killed while every answer waits for its slot.
        await rig.until(lambda: rig.ledger_states() == ["pending"] * CHATS, 3, "every row pending")
        await rig.kill9_and_restart()
        await rig.until(lambda: all(tg.texts(c) == [answer(i)] for i, c in enumerate(chats)), 30, "every final")
        await asyncio.sleep(0.5)
        await tally(rig, "send behind a 429 (retry_after 4 s), kill -9", {c: answer(i) for i, c in enumerate(chats)})
        # A call that never left is never reported as "maybe sent".
        assert not [r for r in await rig.receipts() if r.state == LedgerState.UNKNOWN]
    for chat in chats:
        assert len([c for c in tg.calls_to(chat, "sendMessage") if c.status == 200]) == 1


async def test_late_landing_edit_never_outlives_the_final_across_kill9(kafka_bootstrap, topic_prefix, tmp_path):
    hold = TELEGRAM["timeout_s"] + 2.0  # the first preview edit lands 2 s after the client gave up, after the final
    # The kill must fall inside the window, after the late edit landed: 8 s of margin for the test to see
    # it land and kill. With 1.5 s (a 3.5 s window), at load ~9 the first process re-applied before its
    # kill -9, the line it logged was lost with its buffer, and the restarted one had nothing to repair.
    window = hold - TELEGRAM["timeout_s"] + 8.0
    async with (
        FakeTelegram() as tg,
        DeliveryRig(kafka_bootstrap, topic_prefix, tmp_path, tg, late_landing_s=window) as rig,
    ):
        chats = [f"-{200 + i}" for i in range(CHATS)]
        for chat in chats:
            tg.land_late("editMessageText", hold, chat_id=chat)
        await asyncio.gather(*(rig.run(f"r{i}", chat, answer(i, 16), pause=0.1) for i, chat in enumerate(chats)))

        def late_edits_landed() -> bool:
            held = [c for chat in chats for c in tg.calls_to(chat, "editMessageText")[:1]]
            return len(held) == CHATS and all(c.applied_at is not None for c in held)

        await rig.until(late_edits_landed, 20, "the late edits to land")
        stale = [tg.texts(c) for c in chats]
        assert all(len(t) == 1 and t[0].endswith(CURSOR) for t in stale), stale  # the final was overwritten
        await rig.kill9_and_restart()  # inside the window: the restarted delivery must repair it
        await rig.until(lambda: all(tg.texts(c) == [answer(i, 16)] for i, c in enumerate(chats)), 30, "the repair")
        await rig.until(lambda: "pending" not in rig.ledger_states(), 10, "an empty ledger queue")
        await asyncio.sleep(1.0)
        await tally(
            rig,
            "edit lands late, after the final; kill -9 in the window",
            {c: answer(i, 16) for i, c in enumerate(chats)},
        )
    assert "re-applying the text after a call of unknown outcome" in rig.log()


async def test_timed_out_first_send_gets_its_final_and_its_stub_deleted_across_kill9(
    kafka_bootstrap, topic_prefix, tmp_path
):
    async with FakeTelegram() as tg, DeliveryRig(kafka_bootstrap, topic_prefix, tmp_path, tg) as rig:
        chats = [f"-{300 + i}" for i in range(CHATS)]
        for chat in chats:
            tg.lose_answer("sendMessage", 1.5, chat_id=chat)  # posted, but the answer comes too late
        runs = asyncio.gather(*(rig.run(f"r{i}", chat, answer(i, 30), pause=0.1) for i, chat in enumerate(chats)))
        await rig.until(
            lambda: all(len(tg.messages(c)) >= 2 for c in chats) and rig.ledger_states() == ["sent"] * CHATS,
            20,
            "the segment reposted",
        )
        await rig.kill9_and_restart()  # mid-stream, after a send of unknown outcome in every chat
        await runs
        finals = {c: answer(i, 30) for i, c in enumerate(chats)}
        await rig.until(lambda: all(tg.texts(c) == [f] for c, f in finals.items()), 30, "every final, no stub")
        await asyncio.sleep(0.5)
        for chat in chats:  # the orphan was the frame whose answer was lost, deleted unchanged
            first = tg.calls_to(chat, "sendMessage")[0]
            stub = tg.chats[chat][0]
            assert stub.text == first.body["text"] and stub.deleted and stub.history == [stub.text]
        await tally(rig, "first send times out (message created), kill -9", finals)


async def test_notices_exactly_once_across_kill9(kafka_bootstrap, topic_prefix, tmp_path):
    notice_chats = [f"-{400 + i}" for i in range(7)]
    throttled = notice_chats[:2]  # their notice is still `pending` behind a 429 when delivery dies
    async with FakeTelegram() as tg, DeliveryRig(kafka_bootstrap, topic_prefix, tmp_path, tg) as rig:
        # An open run on each partition holds the commit: the restart re-reads every notice.
        holders = {p: f"-{490 + p}" for p in range(rig.settings.kafka.partitions)}
        for p, chat in holders.items():
            await rig.run(f"h{p}", chat, answer(p, 4), finish=False, partition=p)
        for chat in throttled:
            tg.throttle(chat, retry_after=4)
        for i, chat in enumerate(notice_chats):
            await rig.publish(
                Notice(
                    run_id=f"n{i}",
                    root_run_id=f"n{i}",
                    conversation_key=f"telegram:{chat}",
                    seq=0,
                    text="You are sending messages too fast.",
                    reply_target=ReplyTarget(platform="telegram", chat_id=chat),
                ),
                i % len(holders),
            )
        await rig.until(
            lambda: all(tg.messages(c) for c in notice_chats[2:]) and all(tg.calls_to(c) for c in throttled),
            20,
            "the notices",
        )
        await asyncio.sleep(0.6)  # past a commit round: only the holds keep the notices' offsets uncommitted
        await rig.kill9_and_restart()
        for p, chat in holders.items():
            await rig.finish(f"h{p}", chat, answer(p, 4), seq=6, partition=p)
        finals = {c: "You are sending messages too fast." for c in notice_chats}
        await rig.until(
            lambda: (
                all(tg.texts(c) == [f] for c, f in finals.items())
                and all(tg.texts(c) == [answer(p, 4)] for p, c in holders.items())
            ),
            30,
            "every message",
        )
        await asyncio.sleep(1.0)  # a replayed notice would land now
        await tally(
            rig, "notices (2 behind a 429), kill -9", {**finals, **{c: answer(p, 4) for p, c in holders.items()}}
        )
    for chat in notice_chats:
        assert len([c for c in tg.calls_to(chat, "sendMessage") if c.status == 200]) == 1
