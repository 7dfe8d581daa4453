"""`runner.texts`: the words the runner tells a chat, per platform over `default` over the built-in ones."""

from __future__ import annotations

import pytest

from agentstream.config import ConfigError, RunnerTexts, load_settings


def test_a_platform_sets_some_keys_default_others_and_the_rest_stay_built_in() -> None:
    texts = {"default": {"busy": "Beschäftigt.", "denied": "Nein."}, "slack": {"busy": "Busy, sorry."}}
    runner = load_settings(runner={"texts": texts}).runner
    slack, web = runner.texts_for("slack"), runner.texts_for("web")
    assert (slack.busy, slack.denied) == ("Busy, sorry.", "Nein.")
    assert (web.busy, web.denied) == ("Beschäftigt.", "Nein.")
    assert web.approved == RunnerTexts().approved
    assert load_settings().runner.texts_for("telegram") == RunnerTexts()


def test_the_built_in_texts_fill_their_placeholders() -> None:
    texts = RunnerTexts()
    assert texts.fill("approval_call", tool="sh", arguments='{"cmd": "ls"}') == '• sh {"cmd": "ls"}'
    assert texts.fill("approval_answer", expires="10 min") == "Answer /approve or /deny (expires in 10 min)."
    assert texts.fill("approval_not_yours", user="u1", command="deny") == (
        "Only the user who asked (u1) or an admin can /deny this; it is still waiting."
    )
    assert texts.fill("approved", user="u1", tools="sh, fetch") == "Approved by u1: running sh, fetch."
    assert texts.fill("expired", tools="sh", expires="30 s") == "The approval of sh expired after 30 s: not run."


@pytest.mark.parametrize(
    ("key", "text", "message"),
    [
        ("approved", "OK {who}", "unknown placeholder {who} (this text has {tools}, {user})"),
        ("approval_answer", "until {", "approval_answer: Single '{' encountered"),
        ("busy", "", "at least 1 character"),
    ],
)
def test_a_bad_text_is_a_config_error_with_its_key_path(key: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match="runner.texts") as err:
        load_settings(runner={"texts": {"web": {key: text}}})
    assert message in str(err.value)


def test_braces_are_literal_in_texts_without_placeholders() -> None:
    texts = load_settings(runner={"texts": {"web": {"busy": "Busy {still}."}}}).runner.texts_for("web")
    assert texts.busy == "Busy {still}."
