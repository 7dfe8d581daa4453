"""Near-JSON arguments repaired where unambiguous (and said so); schema errors name the field."""

import pytest

from agentstream.contracts import ToolCallRequest
from agentstream_tools.arguments import parse_arguments, repair
from agentstream_tools.executor import execute
from agentstream_tools.registry import Tool, ToolRegistry
from agentstream_tools.validation import ArgumentError

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1},
        "flags": {"type": "object", "properties": {"metric": {"type": "boolean"}}, "additionalProperties": False},
    },
    "required": ["city"],
    "additionalProperties": False,
}


async def _echo(args):
    return repr(sorted(args.items()))


TOOL = Tool("forecast", "weather", SCHEMA, _echo)


@pytest.mark.parametrize(
    ("raw", "values", "said"),
    [
        ('{"city": "Oslo", "days": 2,}', {"city": "Oslo", "days": 2}, "trailing comma"),
        ("{'city': 'Oslo'}", {"city": "Oslo"}, "single quotes"),
        ("{'city': 'say \"hi\"'}", {"city": 'say "hi"'}, "single quotes"),
        ("{'city': 'it\\'s'}", {"city": "it's"}, "single quotes"),
        ('{"city": "Oslo", "flags": {"metric": True,},}', {"city": "Oslo", "flags": {"metric": True}}, "True/False"),
        ('```json\n{"city": "Oslo"}\n```', {"city": "Oslo"}, "code fence"),
    ],
)
def test_near_json_is_repaired_and_the_repair_is_named(raw, values, said):
    args = parse_arguments(TOOL, raw)
    assert args.values == values
    assert any(said in r for r in args.repairs)


def test_valid_json_is_not_touched():
    args = parse_arguments(TOOL, '{"city": "a, }", "days": 1}')
    assert (args.values, args.repairs) == ({"city": "a, }", "days": 1}, ())


def test_commas_and_quotes_inside_strings_are_kept():
    fixed, repairs = repair('{"city": "x,]", \'days\': 1,}')
    assert fixed == '{"city": "x,]", "days": 1}'
    assert len(repairs) == 2


@pytest.mark.parametrize("raw", ['{"city": "Oslo"', "{city: Oslo}", "{'city': 'it's'}", '{"city": "a",, }'])
def test_what_cannot_be_read_one_way_stays_an_error(raw):
    with pytest.raises(ArgumentError, match="not valid JSON"):
        parse_arguments(TOOL, raw)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("{}", "field 'city' is required"),
        ('{"city": 3}', "field 'city' 3 is not of type 'string'"),
        ('{"city": "a", "days": 0}', "field 'days' 0 is less than the minimum of 1"),
        ('{"city": "a", "hours": 1}', "field 'hours' is not a parameter of forecast (parameters: city, days, flags)"),
        ('{"city": "a", "flags": {"metric": 1}}', "field 'flags.metric' 1 is not of type 'boolean'"),
    ],
)
def test_schema_errors_name_the_field(raw, says):
    with pytest.raises(ArgumentError) as caught:
        parse_arguments(TOOL, raw)
    assert says in str(caught.value)
    assert ArgumentError.retryable


def request(arguments: str) -> ToolCallRequest:
    return ToolCallRequest(
        run_id="r1", root_run_id="r1", conversation_key="web:c", call_id="c1", tool="forecast", arguments=arguments
    )


async def test_the_result_says_the_arguments_were_repaired():
    result = await execute(ToolRegistry([TOOL]), request("{'city': 'Oslo',}"), default_timeout_s=5)
    assert result.ok
    assert result.content.startswith("[('city', 'Oslo')]")
    assert "arguments were not valid JSON and were repaired" in result.content
    assert result.data["argument_repairs"] == ["replaced single quotes with double quotes", "removed a trailing comma"]


async def test_a_schema_error_is_a_retryable_result_naming_the_field():
    result = await execute(ToolRegistry([TOOL]), request('{"city": "Oslo", "days": "two"}'), default_timeout_s=5)
    assert not result.ok and result.retryable
    assert "field 'days'" in result.error


@pytest.mark.parametrize("raw", ["{}", "", "  "])
def test_a_call_without_arguments_is_checked_against_the_schema_once_per_tool(raw):
    optional = Tool("now", "the time", {"type": "object", "properties": {}, "additionalProperties": False}, _echo)
    demanding = Tool("pick", "one of", {"type": "object", "minProperties": 1}, _echo)
    for _ in range(2):  # the second call takes the remembered answer: it must be the same one
        assert parse_arguments(optional, raw).values == {}
        with pytest.raises(ArgumentError, match="invalid arguments for pick"):
            parse_arguments(demanding, raw)
    assert optional.accepts_no_arguments and not demanding.accepts_no_arguments
