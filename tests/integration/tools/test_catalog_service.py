"""The live tool catalogue on the real broker: two tool-executors serving different function tools
both appear to a runner; the one that stops takes its tools away."""

import asyncio
import textwrap
from collections.abc import Callable

from agentstream.contracts import ToolCatalogEntry
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_runner.tool_catalog import ToolCatalog
from agentstream_testing.kafka import read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor

SELECTION = ["alpha__*", "beta__*", "clock"]


async def offered_becomes(catalog: ToolCatalog, want: list[str], timeout_s: float = 30.0) -> None:
    async with asyncio.timeout(timeout_s):
        while [s.name for s in catalog.offered(SELECTION)] != want:  # noqa: ASYNC110 - expiry is polled, not signalled
            await asyncio.sleep(0.05)


def executor_settings(settings_factory: Callable[..., object], tmp_path, group: str, function: str):
    return settings_factory(
        db_url=f"sqlite+aiosqlite:///{tmp_path / f'{group}.db'}",
        tools={"functions": {group: [f"catalog_tools.{function}"]}, "catalog_interval_s": 5.0},
    )


async def test_two_executors_tools_appear_and_a_stopped_ones_disappear(
    settings_factory, topics_created, tmp_path, monkeypatch
):
    (tmp_path / "catalog_tools.py").write_text(
        textwrap.dedent('''
        def ping() -> str:
            """Answer pong."""
            return "pong"

        async def echo(text: str) -> str:
            """Repeat the text.

            Args:
                text: What to repeat.
            """
            return text
        ''')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    runner = runner_bootstrap(settings_factory())
    first = bootstrap_tool_executor(executor_settings(settings_factory, tmp_path, "alpha", "ping"))
    second = bootstrap_tool_executor(executor_settings(settings_factory, tmp_path, "beta", "echo"))
    assert runner.tool_catalog.offered(SELECTION)[-1].name == "clock"  # built-ins before any executor spoke

    async with ServiceHost([runner, first], "127.0.0.1", {runner.name: free_port(), first.name: free_port()}):
        async with ServiceHost([second], "127.0.0.1", {second.name: free_port()}):
            await offered_becomes(runner.tool_catalog, ["alpha__ping", "beta__echo", "clock"])
            [echo] = runner.tool_catalog.offered(["beta__echo"])
            assert echo.parameters["required"] == ["text"] and echo.description.startswith("Repeat the text.")
            assert runner.tool_catalog.executors("beta__echo") == {second.catalog.executor_id}
        # The second executor stopped: it said its tools are gone, long before they expire (15 s).
        await offered_becomes(runner.tool_catalog, ["alpha__ping", "clock"], timeout_s=5.0)
        assert runner.tool_catalog.executors("alpha__ping") == {first.catalog.executor_id}

        records = await read_until(
            runner.settings.kafka.bootstrap_servers,
            runner.topics.tool_catalog,
            lambda rs: any(b'"available":false' in r.value for r in rs),
        )
    entries = [ToolCatalogEntry.model_validate_json(r.value) for r in records]
    assert all(r.key == e.tool.encode() for r, e in zip(records, entries, strict=True))
    assert {(e.tool, e.executor_id) for e in entries if not e.available} >= {
        ("beta__echo", second.catalog.executor_id),
        ("clock", second.catalog.executor_id),
    }
