"""Hooks without Kafka: lifecycle mapping, observer isolation, transform budgets, registry loading."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path

import pytest
import structlog

from agentstream.contracts import (
    DeliveryReceipt,
    Notice,
    ReplyTarget,
    RunFinished,
    RunStarted,
    StepCompleted,
    StepFailed,
    Usage,
)
from agentstream.contracts.hook_events import AgentEndData, AgentStepFailedData, SessionData
from agentstream_delivery.hooks import (
    HookEvent,
    HookLoadError,
    HookRegistry,
    LifecycleMapper,
    ObserverHook,
    TransformContext,
    TransformHook,
    matches,
)
from agentstream_delivery.hooks.metrics import HookMetrics
from agentstream_delivery.hooks.observers import ObserverPool
from agentstream_delivery.hooks.transforms import TransformChain

LOG = structlog.get_logger()
KEY = "web:c1"
TARGET = ReplyTarget(platform="web", chat_id="c1")


def ids(run: str = "r1", seq: int = 1) -> dict[str, object]:
    return {"run_id": run, "root_run_id": run, "conversation_key": KEY, "seq": seq}


def started(run: str, session: str | None) -> RunStarted:
    return RunStarted(
        **ids(run),
        assistant_id="a",
        connector_id="c",
        reply_target=TARGET,
        user_id="u1",
        tenant_id="t1",
        session_id=session,
    )


# -- lifecycle mapping ------------------------------------------------------------------
def test_run_events_map_to_agent_points() -> None:
    m = LifecycleMapper()
    step = StepCompleted(**ids(seq=2), step_id="s1", step_type="llm")
    failed = StepFailed(**ids(seq=3), step_id="s2", step_type="tool", error="boom")
    end = RunFinished(**ids(seq=4), status="completed", usage=Usage(prompt_tokens=3, completion_tokens=4))
    points = [e.point for rec in (started("r1", None), step, failed, end) for e in m.map(rec)]
    assert points == ["agent:start", "agent:step", "agent:step", "agent:end"]
    assert m.map(failed)[0].data.error == "boom"
    assert m.map(end)[0].data.usage.completion_tokens == 4
    child = RunStarted(
        run_id="child",
        root_run_id="r1",
        conversation_key=KEY,
        seq=5,
        assistant_id="b",
        connector_id="c",
        reply_target=TARGET,
    )
    assert m.map(child) == []  # only the root run starts an agent


def test_sessions_start_end_and_reset() -> None:
    m = LifecycleMapper()
    assert [e.point for e in m.map(started("r1", "s1"))] == ["session:start", "agent:start"]
    assert [e.point for e in m.map(started("r2", "s1"))] == ["agent:start"]
    reset = Notice(**ids("n1", 0), text="New session.", command="/new")
    out = m.map(reset)
    assert [e.point for e in out] == ["command:new", "session:reset"]
    assert out[1].data.session_id == "s1"
    assert [e.point for e in m.map(started("r3", "s2"))] == ["session:start", "agent:start"]
    assert [e.point for e in m.map(started("r4", "s3"))] == ["session:end", "session:start", "agent:start"]


def test_receipts_map_to_delivery_sent_only_when_sent() -> None:
    m = LifecycleMapper()
    base = {"conversation_key": KEY, "root_run_id": "r1", "platform": "web", "chat_id": "c1", "segment": 0}
    assert m.map(DeliveryReceipt(**base, state="sending")) == []
    (ev,) = m.map(DeliveryReceipt(**base, state="sent", platform_message_id="w1", final=True))
    assert ev.point == "delivery:sent" and ev.data.platform_message_id == "w1"


def test_point_globs() -> None:
    assert matches(["*"], "agent:end")
    assert matches(["agent:*"], "agent:step") and not matches(["agent:*"], "session:start")
    assert matches(["command:new"], "command:new") and not matches(["command:new"], "command:stop")


# -- observers ----------------------------------------------------------------------------
def event(point: str = "agent:end", n: int = 0) -> HookEvent:
    return HookEvent(
        point=point,
        event_id=f"e{n}",
        conversation_key=KEY,
        ts=RunFinished(**ids(), status="completed").ts,
        data=SessionData(session_id=None),
    )


async def test_a_raising_or_slow_observer_does_not_block_the_others() -> None:
    seen: list[str] = []
    release = asyncio.Event()

    async def slow(ev: HookEvent) -> None:
        await release.wait()

    def broken(ev: HookEvent) -> None:
        raise RuntimeError("hook bug")

    metrics = HookMetrics(None)
    pool = ObserverPool(
        [
            ObserverHook("slow", slow),
            ObserverHook("broken", broken),
            ObserverHook("ok", lambda ev: seen.append(ev.event_id), points=("agent:*",)),
        ],
        metrics,
        LOG,
        queue_size=2,
    )
    pool.start()
    broken_calls = metrics.calls.labels("broken", "observer", "error")
    try:
        events = [*(event(n=n) for n in range(5)), event("session:start", 9)]  # "ok" skips session:*
        for submitted, ev in enumerate(events, start=1):
            # Never waits for a non-durable hook: "slow" blocks until released, so a submit that waited
            # for it would never return (a bound, not a timing: the machine may be slow).
            await asyncio.wait_for(pool.submit(ev), timeout=5.0)
            # "ok" and "broken" keep up (given the time a loaded machine needs); "slow" never does.
            async with asyncio.timeout(10):
                while broken_calls._value.get() < submitted:  # noqa: ASYNC110 - the pool's tasks count
                    await asyncio.sleep(0.01)
                while len(seen) < min(submitted, 5):  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
        assert seen == ["e0", "e1", "e2", "e3", "e4"]
        assert broken_calls._value.get() == 6
        assert metrics.dropped.labels("slow")._value.get() >= 3  # its queue of 2 overflowed
    finally:
        release.set()
        await pool.stop()


async def test_observer_timeout_is_counted() -> None:
    metrics = HookMetrics(None)

    async def hangs(ev: HookEvent) -> None:
        await asyncio.sleep(10)

    pool = ObserverPool([ObserverHook("hangs", hangs)], metrics, LOG, timeout_s=0.05)
    pool.start()
    await pool.submit(event())
    await pool.drain(2)
    await pool.stop()
    assert metrics.calls.labels("hangs", "observer", "timeout")._value.get() == 1


async def test_durable_observer_applies_back_pressure_instead_of_dropping() -> None:
    got: list[str] = []

    async def durable(ev: HookEvent) -> None:
        await asyncio.sleep(0.01)
        got.append(ev.event_id)

    metrics = HookMetrics(None)
    pool = ObserverPool([ObserverHook("billing", durable, durable=True)], metrics, LOG, queue_size=1)
    pool.start()
    for n in range(5):
        await pool.submit(event(n=n))
    await pool.drain(2)
    await pool.stop()
    assert got == [f"e{n}" for n in range(5)]
    assert metrics.dropped.labels("billing")._value.get() == 0


# -- transforms ---------------------------------------------------------------------------
CTX = TransformContext("memory", "c1", "r1", 0, final=False)


async def test_transforms_run_in_order_and_failures_pass_text_through() -> None:
    def shout(text: str, ctx: TransformContext) -> str:
        return text.upper()

    def broken(text: str, ctx: TransformContext) -> str:
        raise ValueError("bug")

    async def too_slow(text: str, ctx: TransformContext) -> str:
        await asyncio.sleep(5)
        return "never"

    blocked, release, returned = threading.Event(), threading.Event(), threading.Event()

    def blocking(text: str, ctx: TransformContext) -> str:
        blocked.set()
        release.wait(30)
        returned.set()
        return "never"

    def not_text(text: str, ctx: TransformContext) -> str:
        return 42  # type: ignore[return-value]

    async def suffix(text: str, ctx: TransformContext) -> str:
        return text + ("!" if ctx.final else "…")

    metrics = HookMetrics(None)
    hooks = [
        TransformHook(n, f)
        for n, f in [
            ("shout", shout),
            ("broken", broken),
            ("too_slow", too_slow),
            ("blocking", blocking),
            ("not_text", not_text),
            ("suffix", suffix),
        ]
    ]
    chain = TransformChain(hooks, None, metrics, LOG, budget_s=0.05)
    try:
        assert await chain("hi", CTX) == "HI…"
        # The chain went on while the blocking hook was still blocked: its budget held, not the hook.
        assert blocked.is_set() and not returned.is_set()
    finally:
        release.set()
    for name, outcome in [
        ("broken", "error"),
        ("too_slow", "timeout"),
        ("blocking", "timeout"),
        ("not_text", "error"),
        ("shout", "ok"),
    ]:
        assert metrics.calls.labels(name, "transform", outcome)._value.get() == 1, name


# -- registry -----------------------------------------------------------------------------
HOOK_MODULE = """
from agentstream_delivery.hooks import observer, transform

CALLS = []

@observer("agent:end")
def on_end(event):
    CALLS.append(event.point)

@transform
def polite(text, ctx):
    return text + " please"

def plain(event):
    CALLS.append("plain")
"""
REGISTER_MODULE = """
def register(registry):
    registry.add_observer(lambda ev: None, name="via-register", points=["session:*"])
"""


@pytest.fixture
def hook_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    suffix = tmp_path.name.replace("-", "_")
    (tmp_path / f"marked_{suffix}.py").write_text(HOOK_MODULE)
    (tmp_path / f"reg_{suffix}.py").write_text(REGISTER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield suffix
    for name in (f"marked_{suffix}", f"reg_{suffix}"):
        sys.modules.pop(name, None)


def test_registry_loads_modules_functions_and_register(hook_modules: str) -> None:
    reg = HookRegistry()
    reg.load(f"marked_{hook_modules}")
    reg.load(f"marked_{hook_modules}:plain")
    reg.load(f"reg_{hook_modules}")
    assert [(o.name.rsplit(".", 1)[-1], o.points) for o in reg.observers] == [
        ("on_end", ("agent:end",)),
        ("plain", ("*",)),
        ("via-register", ("session:*",)),
    ]
    assert [t.name.rsplit(".", 1)[-1] for t in reg.transforms] == ["polite"]


def test_registry_reports_missing_hooks() -> None:
    reg = HookRegistry()
    with pytest.raises(HookLoadError, match="cannot be loaded"):
        reg.load("no_such_module_xyz")
    with pytest.raises(HookLoadError, match="no register"):
        reg.load("json")


def test_entry_points_are_loaded_and_a_broken_one_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint

    import agentstream_delivery.hooks.registry as registry_module

    good = EntryPoint("good", "json:dumps", "agentstream.hooks")
    broken = EntryPoint("broken", "no_such_module_xyz:hook", "agentstream.hooks")
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [broken, good])
    reg = HookRegistry()
    reg.load_entry_points()
    assert [o.name for o in reg.observers] == ["json.dumps"]


async def test_runtime_redacts_the_values_of_configured_secret_env_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentstream.config import load_settings
    from agentstream_delivery.hooks import HookRuntime

    monkeypatch.setenv("AS_TEST_LLM_KEY", "plain-looking-secret-value")
    monkeypatch.setenv("AS_TEST_EXTRA", "another-secret-value")
    settings = load_settings(
        connectors=[{"id": "gpt", "type": "openai", "api_key_env": "AS_TEST_LLM_KEY"}],
        hooks={"security": {"env": ["AS_TEST_EXTRA"], "patterns": [r"TICKET-\d+"], "mask": "***"}},
    )
    runtime = HookRuntime(settings, None, LOG, None)
    assert not runtime.observing  # nothing but the security transform: no hooks consumer needed
    out = await runtime.transform(
        "k=plain-looking-secret-value x=another-secret-value TICKET-7", TransformContext("memory", "c", final=True)
    )
    assert out == "k=*** x=*** ***"
    off = HookRuntime(load_settings(hooks={"security": {"enabled": False}}), None, LOG, None)
    assert off.transform.empty


# -- the JSON a hook sees (the webhook's body) ------------------------------------------------
# Each point's `data` keys, as docs/hooks.md lists them: typing them changed no key.
DATA_KEYS = {
    "agent:start": {"assistant_id", "connector_id", "user_id", "tenant_id", "session_id", "reply_target"},
    "agent:step": {"step_id", "step_type", "ok", "depth"},
    "agent:end": {"status", "error", "reason", "usage", "duration_ms"},
    "session:start": {"session_id"},
}


def test_each_point_keeps_its_json_keys() -> None:
    m = LifecycleMapper()
    step = StepCompleted(**ids(seq=2), step_id="s1", step_type="llm")
    failed = StepFailed(**ids(seq=3), step_id="s2", step_type="tool", error="boom")
    end = RunFinished(**ids(seq=4), status="completed", usage=Usage(prompt_tokens=3))
    events = [e for rec in (started("r1", "s1"), step, failed, end) for e in m.map(rec)]
    bodies = [json.loads(e.model_dump_json()) for e in events]
    assert [(b["point"], set(b["data"])) for b in bodies] == [
        ("session:start", DATA_KEYS["session:start"]),
        ("agent:start", DATA_KEYS["agent:start"]),
        ("agent:step", DATA_KEYS["agent:step"]),
        ("agent:step", DATA_KEYS["agent:step"] | {"error"}),  # only a failed step has an error
        ("agent:end", DATA_KEYS["agent:end"]),
    ]


def test_a_body_in_the_old_json_shape_decodes_to_its_point_data() -> None:
    old = {"point": "agent:end", "event_id": "e1", "conversation_key": KEY, "root_run_id": "r1", "run_id": "r1"}
    end = {"status": "failed", "error": "x", "reason": None, "duration_ms": 5.0}
    body = {**old, "ts": "2026-01-01T00:00:00Z", "data": {**end, "usage": {"prompt_tokens": 3}}}
    ev = HookEvent.model_validate_json(json.dumps(body))
    assert isinstance(ev.data, AgentEndData) and ev.data.usage.prompt_tokens == 3 and ev.data.status == "failed"
    failed = {"step_id": "s", "step_type": "tool", "ok": False, "depth": 0, "error": "boom"}
    ev = HookEvent.model_validate_json(json.dumps({**body, "point": "agent:step", "data": failed}))
    assert isinstance(ev.data, AgentStepFailedData) and ev.data.error == "boom"
