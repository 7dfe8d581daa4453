from agentstream.contracts import ToolCallResult
from agentstream_runner.ports import ToolWaiters


def result(run_id: str = "r1", call_id: str = "call_1") -> ToolCallResult:
    return ToolCallResult(
        run_id=run_id, root_run_id=run_id, conversation_key="k", call_id=call_id, tool="clock", ok=True, content="now"
    )


async def test_result_resolves_only_its_own_call():
    waiters = ToolWaiters()
    first, second = waiters.expect("r1", "call_1"), waiters.expect("r1", "call_2")
    assert waiters.resolve(result(call_id="call_2"))
    assert second.result().call_id == "call_2" and not first.done()
    assert not waiters.resolve(result(run_id="other"))  # unknown run: ignored
    assert len(waiters) == 1


async def test_late_and_duplicate_results_are_ignored():
    waiters = ToolWaiters()
    future = waiters.expect("r1", "call_1")
    assert waiters.resolve(result())
    assert not waiters.resolve(result())  # duplicate (redelivery)
    waiters.expect("r1", "call_9")
    waiters.discard("r1", "call_9")  # the run gave up (timeout, interrupt)
    assert not waiters.resolve(result(call_id="call_9"))  # late
    assert future.result().content == "now" and len(waiters) == 0
