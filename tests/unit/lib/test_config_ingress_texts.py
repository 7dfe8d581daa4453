"""`ingress.texts`: the words ingress answers with, per platform over `default` over the built-in ones."""

from __future__ import annotations

import pytest

from agentstream.config import ConfigError, IngressTexts, load_settings


def test_a_platform_sets_some_keys_default_others_and_the_rest_stay_built_in() -> None:
    settings = load_settings(
        ingress={
            "texts": {
                "default": {"refused": "Nein.", "rate_limited": "Langsam."},
                "telegram": {"refused": "Nope.", "pairing_code": "Code {code}, {minutes} min"},
            }
        }
    )
    telegram, slack = settings.ingress.texts_for("telegram"), settings.ingress.texts_for("slack")
    assert (telegram.refused, telegram.rate_limited) == ("Nope.", "Langsam.")
    assert (slack.refused, slack.rate_limited) == ("Nein.", "Langsam.")
    assert telegram.fill("pairing_code", code="ABC", minutes=60) == "Code ABC, 60 min"
    assert slack.pairing_code == IngressTexts().pairing_code
    assert settings.ingress.texts_for("default").refused == "Nein."
    assert load_settings().ingress.texts_for("web") == IngressTexts()


def test_the_built_in_texts_fill_their_placeholders() -> None:
    texts = IngressTexts()
    assert texts.fill("pairing_code", code="K7", minutes=60).startswith("You are not authorized yet. Your pairing code")
    assert texts.fill("invalid_message", error="user: bad") == "Your message could not be processed: user: bad"
    assert texts.fill("resuming", status="failed", run="r-1") == "Resuming the failed run r-1."
    assert texts.fill("unknown_command", command="x") == "Unknown command /x."


@pytest.mark.parametrize(
    ("key", "text", "message"),
    [
        ("resuming", "Run {run_id}", "unknown placeholder {run_id} (this text has {run}, {status})"),
        ("invalid_message", "Bad {", "invalid_message: Single '{' encountered"),
        ("pairing_code", "Code {0}", "unknown placeholder {0}"),
        ("refused", "", "at least 1 character"),
    ],
)
def test_a_text_with_an_unknown_placeholder_or_none_at_all_is_a_config_error(key: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match="ingress.texts") as err:
        load_settings(ingress={"texts": {"web": {key: text}}})
    assert message in str(err.value)


def test_braces_are_literal_in_texts_without_placeholders() -> None:
    texts = load_settings(ingress={"texts": {"web": {"refused": "No {access}."}}}).ingress.texts_for("web")
    assert texts.refused == "No {access}."
    assert texts.fill("resuming", status="s", run="r") == "Resuming the s run r."
