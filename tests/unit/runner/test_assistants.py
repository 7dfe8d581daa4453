"""Assistants from YAML: fields, problems reported per file and field, hooks, prompts."""

from __future__ import annotations

from pathlib import Path

from agentstream.config import load_settings
from agentstream.contracts import ReplyTarget, StartRun, User
from agentstream_runner.assistant_files import load_assistants_dir
from agentstream_runner.assistants import Assistants, system_messages

EXAMPLES = Path(__file__).parents[3] / "examples" / "assistants"


def test_the_example_directory_loads_cleanly():
    loaded = load_assistants_dir(EXAMPLES)
    assert loaded.problems == []
    helper = {a.id: a for a in loaded.assistants}["helper"]
    assert (helper.connector, helper.tool_loop.max_turns, helper.fallback) == ("use::default", 5, "summarizer")
    assert helper.options == {"temperature": 0.3, "max_tokens": 512}
    assert loaded.hooks["helper"].create is not None and loaded.hooks["helper"].next is not None
    assert loaded.hooks["summarizer"].create is None


def test_bad_files_are_reported_with_file_and_field_and_others_load(tmp_path):
    (tmp_path / "good.yaml").write_text("id: good\nname: Good\nsystem: hi\n")
    (tmp_path / "bad_field.yaml").write_text("id: bad\nname: Bad\ntool_loop: {max_turns: 0}\n")
    (tmp_path / "bad_tool.yml").write_text("id: bad2\nname: Bad\ntools: [hammer]\n")
    (tmp_path / "extra.yaml").write_text("id: x\nname: X\ncolour: red\n")
    (tmp_path / "broken.yaml").write_text("id: [unclosed\n")
    (tmp_path / "hooks.yaml").write_text("id: h\nname: H\nhooks: no_such_module_anywhere\n")
    # sorted after good.yaml: the later file is the duplicate
    (tmp_path / "zz_dup.yaml").write_text("id: good\nname: Again\n")
    (tmp_path / "fallback.yaml").write_text("id: f\nname: F\nfallback: ghost\n")
    loaded = load_assistants_dir(tmp_path)
    assert sorted(a.id for a in loaded.assistants) == ["f", "good"]
    problems = {(Path(p.file).name, p.field) for p in loaded.problems}
    assert problems == {
        ("bad_field.yaml", "tool_loop.max_turns"),
        ("bad_tool.yml", "tools"),
        ("extra.yaml", "colour"),
        ("broken.yaml", "(file)"),
        ("hooks.yaml", "hooks"),
        ("zz_dup.yaml", "id"),
        ("fallback.yaml", "fallback"),
    }
    assert any("hammer" in p.message for p in loaded.problems)


def test_hooks_module_without_functions_is_skipped(tmp_path):
    (tmp_path / "empty_hooks.py").write_text("VALUE = 1\n")
    (tmp_path / "a.yaml").write_text("id: a\nname: A\nhooks: empty_hooks.py\n")
    loaded = load_assistants_dir(tmp_path)
    assert loaded.problems == [] and loaded.hooks["a"].create is None and loaded.hooks["a"].next is None


def test_yaml_assistants_join_the_built_in_default():
    loaded = load_assistants_dir(EXAMPLES)
    assistants = Assistants(load_settings(), loaded.assistants, loaded.hooks)
    assert assistants.ids() == ["default", "helper", "summarizer"]
    assert assistants.hooks("default").create is None


def test_system_prompts_fill_ctx_variables():
    helper = {a.id: a for a in load_assistants_dir(EXAMPLES).assistants}["helper"]
    start = StartRun(
        run_id="r",
        conversation_key="web:c9",
        assistant_id="helper",
        user=User(id="u1", name="Ann", team_id="t1"),
        text="hi",
        reply_target=ReplyTarget(platform="web", chat_id="c9"),
    )
    prompts = [m.content for m in system_messages(helper, start, {"locale": "fr", "tenant": "acme"})]
    assert prompts == ["You are Helper, talking to Ann in chat c9. Answer in the locale 'fr'.", "Tenant: acme"]
    assert system_messages(helper, start, {})[1].content == "Tenant: "  # unknown variables vanish
