"""`kill -9` of agent-runner mid-answer: the user sees where the answer broke off, and the resumed
answer below a marked partial attempt.

The runner is a child process; persistence, tool-executor and delivery (against a fake Telegram,
a real HTTP server) run in this process (tests/chaos/runner_rig.py). With `resume.auto` on, persistence's watchdog ends each
run `failed(runner_lost)`, delivery finalises the partial preview with the runner_lost marker, a
restarted runner resumes the run, and delivery re-marks the partial message ("resumed below")
before the full answer streams into a message of its own. Asserted per chat: exactly two platform
messages (the marked partial, the exact answer), no cursor, nothing posted twice, no ledger row
left `pending`/`sending`, no stream left open.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentstream.contracts import FinishReason, ReplyTarget, RunStatus, StartRun, User
from agentstream_delivery.render import ENDING_SEPARATOR, ENDING_TEXTS, RESUMED_MARKER
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fake_platforms import FakeTelegram
from agentstream_testing.kafka import read_until
from tests.chaos.runner_rig import WITH_DELIVERY, RunnerRig, endings, partial_of, shown, until

pytestmark = pytest.mark.chaos

RUNS = 3
WORDS = 24
TOKEN_DELAY_S = 0.2  # each answer streams for ~5 s: the kill lands mid-answer
LOST_MARKER = ENDING_SEPARATOR + ENDING_TEXTS[FinishReason.RUNNER_LOST]


def chat(i: int) -> str:
    return f"-{7100 + i}"  # a group chat: previews are edited messages


def question(i: int) -> str:
    return f"chat {i} says " + " ".join(f"w{i}.{k}" for k in range(WORDS))  # echoed back as the answer


def ledger_states(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT state FROM delivery_ledger")]


async def test_runner_lost_mid_answer_is_shown_then_the_resumed_answer_below_a_marked_partial(
    kafka_bootstrap, topic_prefix, tmp_path
):
    async with FakeOpenAI(echo_token_delay_s=TOKEN_DELAY_S) as fake, FakeTelegram() as tg:
        # resume.auto set explicitly: this test is about what the user sees across the resume.
        resume = {"auto": True, "stale_after_s": 2.0, "watchdog_interval_s": 0.2, "max_attempts": 1}
        async with RunnerRig(
            kafka_bootstrap, topic_prefix, tmp_path, fake, resume=resume, tg=tg, in_process=WITH_DELIVERY
        ) as rig:
            first, second = rig.runner("first"), rig.runner("second")
            starts = [
                StartRun(
                    run_id=f"lost-{i}",
                    conversation_key=f"telegram:{chat(i)}",
                    assistant_id="default",
                    user=User(id="u1"),
                    text=question(i),
                    reply_target=ReplyTarget(platform="telegram", chat_id=chat(i)),
                )
                for i in range(RUNS)
            ]
            chats = [chat(i) for i in range(RUNS)]
            await rig.start(first)
            for s in starts:
                await rig.send(s)
            # Mid-answer: every chat shows a preview that was edited at least once.
            await until(
                lambda: all(tg.messages(c) and tg.messages(c)[0].edits >= 1 for c in chats),
                60,
                "a streaming preview in every chat",
            )
            first.kill9()

            # The watchdog ends each run `failed(runner_lost)`; delivery shows it in the partial message.
            records = await read_until(rig.bootstrap, rig.events_topic, lambda rs: len(endings(rs)) >= RUNS, timeout=30)
            lost = {e.root_run_id: e for e in endings(records)}
            assert {(e.status, e.reason) for e in lost.values()} == {(RunStatus.FAILED, FinishReason.RUNNER_LOST)}
            partials = {s.run_id: partial_of(records, s.run_id, lost[s.run_id].seq) for s in starts}
            assert all(0 < len(p) < len(question(i)) for i, p in enumerate(partials.values())), partials
            await until(
                lambda: all(
                    tg.texts(chat(i)) == [shown(partials[s.run_id] + LOST_MARKER)] for i, s in enumerate(starts)
                ),
                20,
                "the runner_lost marker in every chat",
            )

            # resume.auto: a restarted runner resumes each run; the partial is re-marked, the answer follows.
            await second.start()
            records = await read_until(
                rig.bootstrap, rig.events_topic, lambda rs: len(endings(rs)) >= 2 * RUNS, timeout=90
            )
            done = {e.root_run_id: e for e in endings(records) if e.status is RunStatus.COMPLETED}
            assert {e.text for e in done.values()} == {question(i) for i in range(RUNS)}
            expected = {
                chat(i): [partials[s.run_id] + RESUMED_MARKER, done[s.run_id].text] for i, s in enumerate(starts)
            }
            await until(
                lambda: (
                    all(tg.texts(c) == [shown(t) for t in texts] for c, texts in expected.items())
                    and not rig.delivery.streams.all()
                ),
                60,
                "the marked partial and the answer in every chat",
            )

    exact = duplicates = missing = 0
    for c, texts in expected.items():
        on_platform = tg.texts(c)
        sends = tg.calls_to(c, "sendMessage")
        exact += on_platform == [shown(t) for t in texts]
        duplicates += max(0, sum(call.status == 200 for call in sends) - len(texts))
        missing += shown(texts[-1]) not in on_platform
        # The user saw why the answer broke off before the resume re-marked it.
        assert tg.messages(c)[0].history[-2:] == [
            shown(texts[0].removesuffix(RESUMED_MARKER) + LOST_MARKER),
            shown(texts[0]),
        ]
        assert not any("▉" in t for t in on_platform) and not any(m.deleted for m in tg.messages(c))
    print(
        "\n| fault | runs | exact finals | duplicates | lost |\n|---|---|---|---|---|\n"
        f"| agent-runner kill -9 mid-answer, resume.auto | {RUNS} | {exact} | {duplicates} | {missing} |"
    )
    assert (exact, duplicates, missing) == (RUNS, 0, 0)
    states = ledger_states(rig.db_path)
    assert "pending" not in states and "sending" not in states, states
