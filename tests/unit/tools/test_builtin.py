"""The model sees exactly the schema the tool-executor validates against."""

from agentstream.tools_catalog import BUILTIN_TOOL_SPECS
from agentstream_tools.builtin import builtin_tools


def test_every_builtin_tool_matches_its_catalog_spec():
    tools = {t.name: t for t in builtin_tools()}
    assert set(tools) == set(BUILTIN_TOOL_SPECS)
    for name, tool in tools.items():
        assert tool.spec() == BUILTIN_TOOL_SPECS[name].model_dump()


def test_assistants_select_source_tools_by_name_or_whole_source():
    from agentstream.tools_catalog import is_tool_selector, selects, source_tool_name, split_source_tool_name

    assert source_tool_name("github", "create_issue") == "github__create_issue"
    assert split_source_tool_name("github__create_issue") == ("github", "create_issue")
    assert split_source_tool_name("read_file") is None
    assert all(is_tool_selector(s) for s in ("clock", "shell", "github__create_issue", "github__*"))
    assert not any(is_tool_selector(s) for s in ("calculater", "__x", "github__"))
    assert selects("github__*", "github__create_issue") and selects("clock", "clock")
    assert not selects("github__*", "gitlab__create_issue") and not selects("github__*", "clock")
