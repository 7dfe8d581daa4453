"""Fixed texts a service answers a user with, one set per platform (`<section>.texts.<platform>`).

A section's texts are a `Texts` model: every key has a built-in English default, and a table keyed
by platform name (`default` for every platform without its own) sets some of them. A key declared
with `Placeholders(...)` is a template: `{name}` is filled in (`{{`, `}}` write a brace), and it may use
only the names it declares, which is checked when the configuration loads. The others are shown as written.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Self, TypeVar

from pydantic import Field, model_validator

from agentstream.config.core import Section

DEFAULT_TEXTS = "default"

# A fixed text a user is shown: never empty, so a setting cannot blank out a reply.
ShownText = Annotated[str, Field(min_length=1)]


@dataclass(frozen=True, init=False)
class Placeholders:
    """Marks a text as a template and names the `{placeholders}` it may use:
    `approved: Annotated[ShownText, Placeholders("user", "tools")] = "Approved by {user}: running {tools}."`"""

    names: frozenset[str]

    def __init__(self, *names: str) -> None:
        object.__setattr__(self, "names", frozenset(names))


class Texts(Section):
    @classmethod
    def templates(cls) -> dict[str, frozenset[str]]:
        """Each template's key and the placeholders it may use."""
        return {
            name: meta.names
            for name, field in cls.model_fields.items()
            for meta in field.metadata
            if isinstance(meta, Placeholders)
        }

    @model_validator(mode="after")
    def _known_placeholders(self) -> Self:
        for name, allowed in self.templates().items():
            try:
                used = {field for _, field, _, _ in string.Formatter().parse(getattr(self, name)) if field is not None}
            except ValueError as err:  # a lone `{` or `}`
                raise ValueError(f"{name}: {err} (write {{{{ and }}}} for braces)") from None
            unknown = sorted(used - allowed)
            if unknown:
                known = ", ".join(f"{{{a}}}" for a in sorted(allowed)) or "no placeholders"
                raise ValueError(f"{name}: unknown placeholder {{{unknown[0]}}} (this text has {known})")
        return self

    def fill(self, name: str, **values: object) -> str:
        """The template `name` with its placeholders filled in."""
        template: str = getattr(self, name)
        return template.format(**values)


T = TypeVar("T", bound=Texts)


def texts_for(table: Mapping[str, T], platform: str, built_in: type[T]) -> T:
    """The platform's texts: the keys it sets, over those `default` sets, over the built-in ones."""
    merged = built_in()
    for name in dict.fromkeys((DEFAULT_TEXTS, platform)):
        given = table.get(name)
        if given is not None:
            merged = merged.model_copy(update={k: getattr(given, k) for k in given.model_fields_set})
    return merged
