"""A command some tests run: its path where installed; skipped where missing, failed under CI."""

from __future__ import annotations

import shutil

import pytest

from agentstream_testing.commands import command_path

MISSING = "agentstream-no-such-command"


def test_the_first_command_found_is_used() -> None:
    assert command_path(MISSING, "sh", installed_by="the system") == shutil.which("sh")


def test_a_missing_command_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"{MISSING} not installed \\(a package\\)"):
        command_path(MISSING, installed_by="a package")


def test_a_missing_command_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must have it"):
        command_path(MISSING, installed_by="a package")
