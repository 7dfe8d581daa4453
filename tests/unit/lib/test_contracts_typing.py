"""`AnyRunEvent` / `RunEvent` (agentstream.contracts) let mypy check a `match` over run events
for exhaustiveness: one that forgets an event type fails type checking at its `assert_never`."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXHAUSTIVE = ROOT / "tests" / "typing" / "run_event_match.py"
NOTICE_CASE = '        case ev.Notice():\n            return "notice"\n'


def mypy(path: Path) -> tuple[str, int]:
    # In a child process: mypy raises the interpreter's recursion limit, which would change how
    # later tests in this process see deeply nested JSON.
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--strict", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    return done.stdout + done.stderr, done.returncode


@pytest.mark.timeout(120)  # runs mypy, slow on a cold cache
def test_an_exhaustive_match_type_checks():
    out, status = mypy(EXHAUSTIVE)
    assert status == 0, out


def test_a_match_missing_an_event_type_names_it(tmp_path: Path):
    source = EXHAUSTIVE.read_text(encoding="utf-8")
    assert NOTICE_CASE in source
    forgetful = tmp_path / "forgetful_match.py"
    forgetful.write_text(source.replace(NOTICE_CASE, ""), encoding="utf-8")
    out, status = mypy(forgetful)
    assert status == 1
    assert 'Argument 1 to "assert_never" has incompatible type "Notice"' in out
