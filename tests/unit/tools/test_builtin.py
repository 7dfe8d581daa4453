"""The model sees exactly the schema the tool-executor validates against."""

from agentstream.tools_catalog import BUILTIN_TOOL_SPECS
from agentstream_tools.builtin import builtin_tools


def test_every_builtin_tool_matches_its_catalog_spec():
    tools = {t.name: t for t in builtin_tools()}
    assert set(tools) == set(BUILTIN_TOOL_SPECS)
    for name, tool in tools.items():
        assert tool.spec() == BUILTIN_TOOL_SPECS[name].model_dump()
