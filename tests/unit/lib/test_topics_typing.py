"""`Topic[R]` (agentstream.kafka.topics) makes `publish(topic, record)` (the `Publisher` part, and
`Runtime.publish` over it) type-check only with a record of the topic's own type: mypy refuses a
record published to the wrong topic."""

import re
from pathlib import Path

import pytest

from tests.unit.lib.test_contracts_typing import mypy

ROOT = Path(__file__).resolve().parents[3]
PUBLISHES = ROOT / "tests" / "typing" / "topic_publish.py"
IGNORE = "  # type: ignore[misc]"


@pytest.mark.timeout(120)  # runs mypy, slow on a cold cache
def test_right_records_type_check_and_every_wrong_one_is_refused():
    out, status = mypy(PUBLISHES)
    assert status == 0, out  # the wrong ones are each refused (an unneeded ignore would be an error)


@pytest.mark.timeout(120)
def test_without_the_ignores_mypy_names_each_wrong_publish(tmp_path: Path):
    source = PUBLISHES.read_text(encoding="utf-8")
    wrong_lines = [i + 1 for i, line in enumerate(source.splitlines()) if line.endswith(IGNORE)]
    assert len(wrong_lines) == 5  # three through a service's runtime, two through the publisher part
    bare = tmp_path / "topic_publish_bare.py"
    bare.write_text(source.replace(IGNORE, ""), encoding="utf-8")
    out, status = mypy(bare)
    assert status == 1
    refused = {
        int(n)
        for n in re.findall(
            r'topic_publish_bare\.py:(\d+): error: Cannot infer value of type parameter "R" of "publish', out
        )
    }
    assert refused == set(wrong_lines), out


@pytest.mark.timeout(120)
def test_a_right_record_marked_wrong_fails_lint(tmp_path: Path):
    source = PUBLISHES.read_text(encoding="utf-8")
    swapped = tmp_path / "topic_publish_swapped.py"
    # The first wrong publish made right: its `type: ignore` is now unused, which --strict refuses.
    swapped.write_text(
        source.replace("publish(EVENTS, message)" + IGNORE, "publish(INBOUND, message)" + IGNORE), encoding="utf-8"
    )
    out, status = mypy(swapped)
    assert status == 1 and 'Unused "type: ignore" comment' in out, out
