"""Rolling restarts of every service under traffic, and `kill -9` of a runner as the control row.

The five services run as separate processes (tests/chaos/stack_rig.py); 20 conversations come in
through ingress in four waves, each run makes a calculator call (1.5 s in the tool-executor) and
streams its answer into a fake Telegram chat. For a rolling restart the service has two replicas,
each replaced one at a time as a Deployment rolls: the new one starts while a wave is in flight
(a rebalance: hand-over), then the old one gets SIGTERM while the next wave is (a drain, then a
rebalance). Asserted: every answer whole, none cut, none lost, none twice, no model request
repeated, no tool call run twice, every run stored once. `kill -9` of one of two runners mid-answer
is the control: its runs are cut and resumed; asserted there that every run ends (completed, its
whole answer the chat's last message) and no finished model step is requested again. Each test
prints its row of the table (`-s`): docs/deploy.md § Stopping.
"""

from __future__ import annotations

import pytest

from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fake_platforms import FakeTelegram
from tests.chaos.processes import ServiceProcess
from tests.chaos.stack_rig import CONVERSATIONS, GRACE_S, START_S, TOKEN_DELAY_S, UNCUT, WAVES, StackRig, report

pytestmark = [pytest.mark.chaos, pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)]

SIZE = CONVERSATIONS // WAVES
ROLLED = ["delivery", "tool-executor", "ingress", "persistence"]


def wave(n: int) -> range:
    return range(n * SIZE, (n + 1) * SIZE)


def in_flight(rig: StackRig, service: str, conversations: range) -> bool:
    """What the replacement should meet: the service's own work going on for `conversations`."""
    if service == "tool-executor":
        return rig.executing(conversations)  # their calls running (each takes 1.5 s)
    return rig.streaming(conversations)  # their answers streaming through runner, delivery, persistence


async def stopped(replica: ServiceProcess) -> None:
    replica.sigterm()
    assert await replica.exited(timeout=GRACE_S + 60) == 0, replica.log.read_text()[-4000:]


async def finish(rig: StackRig, replicas: list[ServiceProcess]) -> dict[str, int]:
    """Once every chat shows its answer: every service stopped (what it holds flushed), the figures."""
    await rig.until(rig.answered, "every answer whole in its chat", timeout=240)
    for p in replicas:
        if p.proc is not None and p.proc.poll() is None:
            await stopped(p)
    await rig.log.catch_up()
    return await rig.figures()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("service", ROLLED)
async def test_rolling_restart_of_a_service_under_traffic_cuts_nothing(
    service, kafka_bootstrap, topic_prefix, db_url, tmp_path
):
    async with (
        FakeOpenAI(echo_token_delay_s=TOKEN_DELAY_S) as fake,
        FakeTelegram() as tg,
        StackRig(kafka_bootstrap, topic_prefix, db_url, tmp_path, fake, tg) as rig,
    ):
        old = await rig.start(service, replicas=2)
        for n, before in enumerate(old):  # one replica at a time, as a Deployment rolls
            first, second = wave(2 * n), wave(2 * n + 1)
            await rig.send(first)
            await rig.until(lambda w=first: in_flight(rig, service, w), f"wave {2 * n} in flight")
            await rig.replica(service, f"new{n}").start(START_S)  # joins while the wave is in flight: a rebalance
            await rig.send(second)
            if service != "ingress":  # ingress: the wave is still on `inbound` when the old replica stops
                await rig.until(lambda w=second: in_flight(rig, service, w), f"wave {2 * n + 1} in flight")
            await stopped(before)  # a drain, then a rebalance
        figures = await finish(rig, rig.processes)
    report(f"rolling restart of {service} (2 replicas, {CONVERSATIONS} conversations, tools)", figures)
    assert figures == UNCUT


@pytest.mark.timeout(600)
async def test_kill9_of_one_runner_replica_under_traffic_every_run_ends_no_finished_step_asked_twice(
    kafka_bootstrap, topic_prefix, db_url, tmp_path
):
    async with (
        FakeOpenAI(echo_token_delay_s=TOKEN_DELAY_S) as fake,
        FakeTelegram() as tg,
        StackRig(kafka_bootstrap, topic_prefix, db_url, tmp_path, fake, tg) as rig,
    ):
        killed, _ = await rig.start("agent-runner", replicas=2)
        await rig.send([*wave(0), *wave(1)])
        await rig.until(lambda: rig.streaming(wave(0)), "wave 0 streaming")
        rig.kill9(killed)
        await rig.send([*wave(2), *wave(3)])
        figures = await finish(rig, rig.processes)
    report(f"kill -9 of one of 2 agent-runner replicas ({CONVERSATIONS} conversations, tools)", figures)
    assert figures["lost"] == 0  # every run ended, its whole answer the chat's last message
    assert figures["finished LLM steps repeated"] == 0
    assert figures["stored"] == CONVERSATIONS
