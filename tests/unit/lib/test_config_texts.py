"""`Texts`: a key declared with `Placeholders(...)` is a template; every other key is shown as written."""

from __future__ import annotations

import string

import pytest

from agentstream.config import IngressTexts, RunnerTexts
from agentstream.config.texts import Texts


def _used(text: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}


@pytest.mark.parametrize("texts", [IngressTexts, RunnerTexts], ids=lambda t: t.__name__)
def test_a_built_in_text_uses_placeholders_exactly_when_declared_a_template_with_those_names(
    texts: type[Texts],
) -> None:
    built_in = texts()
    templates = texts.templates()
    for name in type(built_in).model_fields:
        used = _used(getattr(built_in, name))
        if name in templates:
            assert used == set(templates[name]), name
        else:
            assert not used, f"{name} uses {sorted(used)} but is not declared with Placeholders(...)"


def test_the_templates_are_the_keys_declared_with_placeholders() -> None:
    assert RunnerTexts.templates()["approved"] == {"user", "tools"}
    assert IngressTexts.templates()["pairing_code"] == {"code", "minutes"}
    assert "busy" not in RunnerTexts.templates()
    assert "refused" not in IngressTexts.templates()
