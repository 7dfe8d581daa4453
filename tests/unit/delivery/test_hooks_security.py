"""The security filter: secrets masked in finals and previews, split keys never shown, fail closed."""

from __future__ import annotations

import pytest
import structlog

from agentstream.redaction import Redactor
from agentstream_delivery.hooks.base import TransformContext
from agentstream_delivery.hooks.metrics import HookMetrics
from agentstream_delivery.hooks.security import WITHHELD, SecurityFilter, fail_closed
from agentstream_delivery.hooks.transforms import TransformChain
from agentstream_delivery.render import CURSOR

KEY = "sk-proj-" + "Zx81Qw72Er63Ty54Ui45Op36"
MASK = "[REDACTED]"


@pytest.mark.parametrize(
    "secret",
    [
        KEY,
        "ghp_" + "a1" * 18,
        "xoxb-1234567890-abcdefghij",
        "AKIA" + "ABCDEFGHIJKLMNOP",
        "AIza" + "B" * 35,
        "123456789:AA" + "c" * 33,
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    ],
)
def test_known_secret_shapes_are_masked(secret: str) -> None:
    out = SecurityFilter().redact(f"before {secret} after", final=True)
    assert secret not in out
    assert out == f"before {MASK} after"


def test_labelled_values_keep_their_label() -> None:
    out = SecurityFilter().redact("api_key = abcdefgh12345 and password: hunter2222", final=True)
    assert out == f"api_key = {MASK} and password: {MASK}"


def test_configured_patterns_and_env_literals() -> None:
    f = SecurityFilter(Redactor(extra_patterns=[r"ACME-\d{6}"], literals=["correct-horse-battery"]))
    out = f.redact("id ACME-123456 pw correct-horse-battery.", final=True)
    assert out == f"id {MASK} pw {MASK}."


def test_every_prefix_of_a_streamed_key_is_hidden_from_previews() -> None:
    """Frame by frame, as the key arrives one character at a time: no preview shows 4+ chars of it."""
    f = SecurityFilter()
    text = f"The key is {KEY} — keep it safe."
    for end in range(1, len(text) + 1):
        preview = f.redact(text[:end] + CURSOR, final=False)
        assert preview.endswith(CURSOR)
        shown = preview[: -len(CURSOR)]
        assert KEY[3:8] not in shown, (end, preview)  # nothing past the generic "sk-" start
    assert f.redact(text, final=True) == f"The key is {MASK} — keep it safe."


def test_open_private_key_block_is_masked_until_closed() -> None:
    f = SecurityFilter()
    assert f.redact("see -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI", final=False) == f"see {MASK}"
    assert f.redact("see -----BEGIN EC PRI", final=False) == "see "
    assert f.redact("see -----BEGIN EC PRIVATE KEY-----\nMHcC", final=True) == f"see {MASK}"


def test_harmless_words_are_not_held_back() -> None:
    f = SecurityFilter()
    assert f.redact("I like to ski" + CURSOR, final=False) == "I like to ski" + CURSOR
    assert f.redact("ask me anything", final=True) == "ask me anything"


def test_fail_closed_masks_long_tokens() -> None:
    assert fail_closed(f"a {KEY} b short") == f"a {MASK} b short"
    assert fail_closed(None) == WITHHELD  # type: ignore[arg-type] - even garbage does not leak


class Boom(SecurityFilter):
    def redact(self, text: str, *, final: bool) -> str:
        raise RuntimeError("filter bug")


async def test_chain_fails_closed_when_the_security_filter_raises() -> None:
    metrics = HookMetrics(None)
    chain = TransformChain([], Boom(), metrics, structlog.get_logger())
    out = await chain(f"here: {KEY}", TransformContext("memory", "c", final=True))
    assert out == f"here: {MASK}"
    assert metrics.fail_closed.labels("redacted")._value.get() == 1
