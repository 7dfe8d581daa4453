"""Every pipeline step on the real broker, in one running ingress: the decision, and nothing else.

One service start (a consumer-group join costs seconds), many scenarios, each on its own
chat so records can be told apart; at the end the `runs` and `events` topics are
compared against exactly what should be there.
"""

from __future__ import annotations

import json
import re
import time

import httpx

from agentstream.contracts import (
    InterruptRun,
    Notice,
    ResetConversation,
    RunCommandAdapter,
    RunEventAdapter,
    StartRun,
)
from agentstream.db import create_engine, session_factory
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress
from agentstream_ingress.pairing import ApproveOutcome
from agentstream_ingress.pairing_store import PairingStore
from agentstream_ingress.webhooks import slack
from agentstream_testing.fixtures import ADMIN_HEADERS
from agentstream_testing.kafka import produce_raw, read_until

SETTLE_S = 1.5  # after the expected records arrived, wait this long to see that nothing else does


def message(
    mid: str,
    chat: str,
    user: str | None = None,
    text: str = "hello",
    platform: str = "web",  # type: ignore[no-untyped-def]
    team: str | None = None,
    **extra,
) -> bytes:
    body = {
        "id": mid,
        "platform": platform,
        "chat_id": chat,
        "user": {"id": user or f"u-{chat}", "team_id": team},
        "text": text,
        **extra,
    }
    return json.dumps(body).encode()


def settled(enough, quiet_s: float = SETTLE_S):  # type: ignore[no-untyped-def]
    """A `read_until` condition: `enough(records)` and then no new record for `quiet_s`."""
    state = {"n": -1, "since": time.monotonic()}

    def done(records) -> bool:  # type: ignore[no-untyped-def]
        now = time.monotonic()
        if len(records) != state["n"]:
            state["n"], state["since"] = len(records), now
        return enough(records) and now - state["since"] >= quiet_s

    return done


def config(monkeypatch) -> dict:  # type: ignore[no-untyped-def,type-arg]
    monkeypatch.setenv("T_TG_SECRET", "tg-secret")
    monkeypatch.setenv("T_SLACK_SECRET", "slack-secret")
    return {
        "authz": {
            "platforms": {"locked": {"users": ["alice"]}, "tg": {}},
            "rate_limit": {"capacity": 3, "refill_per_s": 0.001},
            "bot_user_ids": {"web": ["our-bot"]},
        },
        "profiles": {
            "p-platform": {"assistant": "a-platform"},
            "p-team": {"assistant": "a-team"},
            "p-chat": {"assistant": "a-chat"},
            "p-thread": {"assistant": "a-thread"},
        },
        "routes": [
            {"platform": "routed", "profile": "p-platform"},
            {"platform": "routed", "team": "T1", "profile": "p-team"},
            {"platform": "routed", "chat": "X", "profile": "p-chat"},
            {"platform": "routed", "chat": "X", "thread": "T", "profile": "p-thread"},
        ],
        "ingress": {
            "hooks": {"message_received": ["tests.unit.ingress.hookfns:receive"]},
            "webhooks": {
                "telegram": {"main": {"secret_env": "T_TG_SECRET"}},
                "slack": {"signing_secret_env": "T_SLACK_SECRET"},
            },
        },
    }


def slack_post(client: httpx.AsyncClient, payload: dict, secret: str = "slack-secret", age: int = 0):  # type: ignore[no-untyped-def,type-arg]
    body = json.dumps(payload).encode()
    ts = str(int(time.time()) - age)
    return client.post(
        "/webhooks/slack",
        content=body,
        headers={
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": slack.sign(secret, ts, body),
            "Content-Type": "application/json",
        },
    )


async def test_each_step_decides_and_nothing_else_happens(settings_factory, topics_created, monkeypatch):
    settings = settings_factory(**config(monkeypatch))
    svc = bootstrap_ingress(settings)
    bootstrap, t = settings.kafka.bootstrap_servers, svc.topics
    tg_update = {
        "update_id": 1,
        "message": {
            "message_id": 1,
            "from": {"id": 555, "is_bot": False},
            "chat": {"id": 555, "type": "private"},
            "text": "via telegram",
        },
    }
    slack_event = {
        "type": "event_callback",
        "team_id": "T9",
        "event": {"type": "message", "channel": "C9", "user": "U9", "text": "via slack", "ts": "100.1"},
    }
    host = ServiceHost([svc], "127.0.0.1", {"ingress": free_port()})
    async with host, httpx.AsyncClient(headers=ADMIN_HEADERS, base_url=host.url("ingress"), timeout=10) as client:

        async def send(raw: bytes) -> None:
            await produce_raw(bootstrap, t.inbound, raw, key=b"k")

        await send(message("a1", "ok"))  # accepted
        await send(message("a1", "ok", text="again"))  # duplicate
        await send(message("e1", "echo", metadata={"origin": "agentstream"}))  # self-echo
        await send(message("e2", "echo2", user="our-bot"))  # self-echo
        await send(message("r1", "refused", user="mallory", platform="locked"))  # refused
        for i in range(4):
            await send(message(f"rl{i}", "rate", user="u-rate"))  # 3 runs, then rate limited
        await send(message("h1", "hook", text="please deny"))
        await send(message("h2", "hook", text="please handle"))
        await send(message("h3", "hook", text="please rewrite"))
        await send(message("c1", "cmd", text="/stop"))
        await send(message("c2", "cmd", text="/new"))
        await send(message("c3", "cmd", text="/bogus"))
        await send(message("g1", "X", platform="routed", thread_id="T"))
        await send(message("g2", "X", platform="routed"))
        await send(message("g3", "Y", platform="routed", team="T1"))
        await send(message("g4", "Z", platform="routed"))
        await send(message("p1", "pu", user="pu", platform="tg"))  # unknown user, direct chat → pairing code

        # HTTP front door, telegram and slack webhooks; each posted twice → one run each
        for _ in range(2):
            r = await client.post("/v1/messages", json=json.loads(message("v1", "http", text="via http")))
            assert r.status_code == 202 and r.json() == {"conversation_key": "web:http", "message_id": "v1"}
            ok = await client.post(
                "/webhooks/telegram/main", json=tg_update, headers={"X-Telegram-Bot-Api-Secret-Token": "tg-secret"}
            )
            assert ok.status_code == 202
            assert (await slack_post(client, slack_event)).status_code == 202
        wrong = await client.post(
            "/webhooks/telegram/main",
            json={**tg_update, "update_id": 2},
            headers={"X-Telegram-Bot-Api-Secret-Token": "nope"},
        )
        assert wrong.status_code == 401
        assert (await slack_post(client, {**slack_event, "event_id": "x"}, secret="bad")).status_code == 401
        assert (await slack_post(client, slack_event, age=301)).status_code == 401
        bad_body = await client.post("/v1/messages", json={"id": "v2", "platform": "web"})
        assert bad_body.status_code == 422 and any(e["loc"] == ["body", "text"] for e in bad_body.json()["detail"])

        # pairing: read the code from the notice, approve it, then the user gets through
        def pairing_notice(rs):  # type: ignore[no-untyped-def]
            return [
                e
                for e in (RunEventAdapter.validate_json(r.value) for r in rs)
                if isinstance(e, Notice) and e.reply_target and e.reply_target.chat_id == "pu"
            ]

        events = await read_until(bootstrap, t.events, lambda rs: bool(pairing_notice(rs)))
        code = re.search(r"pairing code is ([A-Z0-9]{8})", pairing_notice(events)[0].text).group(1)
        engine = create_engine(settings.database.url)
        try:
            approval = await PairingStore(session_factory(engine), settings.authz.pairing).approve(code)
        finally:
            await engine.dispose()
        assert approval.outcome is ApproveOutcome.APPROVED and approval.user_id == "pu"
        await send(message("p2", "pu", user="pu", platform="tg", text="paired now"))

        expected_starts = {"a1", "rl0", "rl1", "rl2", "h3", "g1", "g2", "g3", "g4", "v1", "555:1", "C9:100.1", "p2"}
        runs = await read_until(
            bootstrap,
            t.runs,
            settled(
                lambda rs: (
                    sum(isinstance(RunCommandAdapter.validate_json(r.value), StartRun) for r in rs)
                    >= len(expected_starts)
                )
            ),
        )
        events = await read_until(bootstrap, t.events, settled(lambda rs: len(rs) > 0))

    commands = [RunCommandAdapter.validate_json(r.value) for r in runs]
    starts = {c.inbound_id: c for c in commands if isinstance(c, StartRun)}
    assert sorted(starts) == sorted(expected_starts)  # exactly one run per accepted message
    assert len([c for c in commands if isinstance(c, StartRun)]) == len(expected_starts)
    others = [c for c in commands if not isinstance(c, StartRun)]
    assert [type(c) for c in others] == [InterruptRun, ResetConversation]
    assert all(c.conversation_key == "web:cmd" for c in others)
    assert starts["h3"].text == "rewritten"
    assert {i: starts[i].assistant_id for i in ("g1", "g2", "g3", "g4")} == {
        "g1": "a-thread",
        "g2": "a-chat",
        "g3": "a-team",
        "g4": "a-platform",
    }
    assert starts["555:1"].reply_target.chat_id == "555" and starts["C9:100.1"].user.team_id == "T9"

    notices: dict[str, list[str]] = {}
    for e in (RunEventAdapter.validate_json(r.value) for r in events):
        if isinstance(e, Notice):
            notices.setdefault(e.reply_target.chat_id, []).append(e.text)
    assert sorted(notices) == ["cmd", "hook", "pu", "rate", "refused"]  # nobody else was told anything
    assert notices["refused"] == ["You are not authorized to use this assistant."]
    assert len(notices["rate"]) == 1 and "too fast" in notices["rate"][0]
    assert notices["hook"] == ["denied by hook"]
    assert notices["cmd"][0] == "Started a new conversation." and notices["cmd"][1].startswith("Unknown command /bogus")
    assert len(notices["pu"]) == 1 and code in notices["pu"][0]
