"""The runner's live tool catalogue: latest entry per (tool, executor), heartbeat expiry, and
what an assistant's tool list offers the model."""

from datetime import UTC, datetime

from agentstream.contracts import ToolCatalogEntry, ToolKind
from agentstream.tools_catalog import CALCULATOR, CLOCK, SHELL
from agentstream_runner.tool_catalog import ToolCatalog

T0 = 1_800_000_000.0  # seconds since the epoch


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def entry(tool: str, executor: str, *, at: float = T0, available: bool = True, **extra) -> ToolCatalogEntry:
    source, _, _ = tool.partition("__")
    return ToolCatalogEntry(
        tool=tool,
        description=extra.pop("description", f"{tool} does things"),
        parameters={"type": "object", "properties": {}},
        kind=ToolKind.MCP if "__" in tool else ToolKind.BUILTIN,
        source=source if "__" in tool else None,
        executor_id=executor,
        available=available,
        requires_approval=extra.pop("requires_approval", False),
        heartbeat_s=5.0,
        ts=datetime.fromtimestamp(at, UTC),
    )


def names(specs) -> list[str]:
    return [s.name for s in specs]


def test_builtins_are_offered_before_any_executor_is_heard_from():
    catalog = ToolCatalog(Clock())
    assert catalog.offered(["clock", "calculator", "demo__*", "shell"]) == (CLOCK, CALCULATOR)


def test_a_tool_is_offered_only_while_live_and_selected():
    catalog = ToolCatalog(Clock())
    for tool in ("demo__add", "demo__sub", "other__x", "shell"):
        catalog.apply(entry(tool, "e1"))
    assert names(catalog.offered(["demo__*", "shell", "clock"])) == ["demo__add", "demo__sub", "shell", "clock"]
    assert names(catalog.offered(["demo__sub"])) == ["demo__sub"]
    assert catalog.offered([]) == ()


def test_a_known_tool_keeps_its_local_spec():
    catalog = ToolCatalog(Clock())
    catalog.apply(entry("shell", "e1", description="something else"))
    assert catalog.offered(["shell"]) == (SHELL,)


def test_an_executors_entries_expire_after_three_missed_heartbeats():
    clock = Clock()
    catalog = ToolCatalog(clock)
    catalog.apply(entry("demo__add", "e1"))
    clock.now = T0 + 14.9
    assert "demo__add" in catalog.live()
    catalog.apply(entry("demo__add", "e1", at=T0 + 14.9))  # a heartbeat renews it
    clock.now = T0 + 29.0
    assert "demo__add" in catalog.live()
    clock.now = T0 + 29.9
    assert catalog.live() == {}
    assert catalog.offered(["demo__*", "clock"]) == (CLOCK,)


def test_an_old_record_read_late_counts_from_when_it_was_written():
    clock = Clock()
    catalog = ToolCatalog(clock)
    clock.now = T0 + 60
    catalog.apply(entry("demo__add", "gone", at=T0))  # a dead executor's last word, read at start
    assert catalog.live() == {}


def test_a_record_stamped_in_the_future_counts_from_when_it_is_read():
    clock = Clock()
    catalog = ToolCatalog(clock)
    catalog.apply(entry("demo__add", "e1", at=T0 + 3600))  # the executor's clock is an hour ahead
    clock.now = T0 + 15.1
    assert catalog.live() == {}


def test_two_executors_serving_different_tools_both_appear():
    catalog = ToolCatalog(Clock())
    catalog.apply(entry("alpha__ping", "e1"))
    catalog.apply(entry("beta__pong", "e2"))
    assert names(catalog.offered(["alpha__*", "beta__*"])) == ["alpha__ping", "beta__pong"]


def test_a_tool_stays_while_another_executor_still_serves_it():
    catalog = ToolCatalog(Clock())
    catalog.apply(entry("calc__add", "e1"))
    catalog.apply(entry("calc__add", "e2"))
    catalog.apply(entry("calc__add", "e1", available=False))
    assert catalog.executors("calc__add") == {"e2"}
    catalog.apply(entry("calc__add", "e2", available=False))
    assert catalog.live() == {}


def test_removal_takes_the_tool_away_at_once():
    catalog = ToolCatalog(Clock())
    catalog.apply(entry("demo__add", "e1"))
    catalog.apply(entry("demo__add", "e1", available=False))
    assert catalog.offered(["demo__add"]) == ()


def test_a_tombstone_drops_the_tool_for_every_executor():
    catalog = ToolCatalog(Clock())
    catalog.apply(entry("demo__add", "e1"))
    catalog.apply(entry("demo__add", "e2"))
    catalog.forget("demo__add")
    assert catalog.live() == {}


def test_a_tool_needs_approval_while_any_executor_entry_says_so_even_a_silent_one():
    clock = Clock()
    catalog = ToolCatalog(clock)
    catalog.apply(entry("files__rm", "ex-1", requires_approval=True))
    catalog.apply(entry("files__rm", "ex-2"))
    catalog.apply(entry("files__ls", "ex-1"))
    assert catalog.requires_approval("files__rm") and not catalog.requires_approval("files__ls")
    assert not catalog.requires_approval("calculator")  # never heard of: as published, none
    clock.now = T0 + 16  # past 3 heartbeats: no longer offered, but its word on approval stands
    assert catalog.offered(["files__*"]) == ()
    assert catalog.requires_approval("files__rm")
    catalog.apply(entry("files__rm", "ex-1", at=clock.now, available=False))
    catalog.apply(entry("files__rm", "ex-2", at=clock.now, available=False))
    assert not catalog.requires_approval("files__rm")
    catalog.apply(entry("files__rm", "ex-1", at=clock.now, requires_approval=True))
    catalog.forget("files__rm")
    assert not catalog.requires_approval("files__rm")


def test_configured_approval_holds_before_any_executor_and_past_its_word():
    catalog = ToolCatalog(Clock(), approval_selectors=("calculator", "files__*"))
    assert catalog.requires_approval("calculator") and catalog.requires_approval("files__delete")
    assert not catalog.requires_approval("clock")
    catalog.apply(entry("calculator", "x1"))  # an executor that publishes no flag lifts nothing
    assert catalog.requires_approval("calculator")
