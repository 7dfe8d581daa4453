"""Workspace directory names: an HMAC of the conversation key with a secret made on first start,
kept in `<root_dir>/.name-key` (0600) and reused by the next start."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from agentstream.config.tools import SandboxSettings
from agentstream_tools.sandbox.workspace import NAME_KEY_FILE, Workspaces


def workspaces(root: Path) -> Workspaces:
    return Workspaces(SandboxSettings(enabled=True, root_dir=root))


def test_names_are_keyed_kept_across_starts_and_private(tmp_path: Path) -> None:
    first = workspaces(tmp_path / "ws")
    key_file = tmp_path / "ws" / NAME_KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and re.fullmatch(r"[0-9a-f]{64}\n", key_file.read_text())
    assert stat.S_IMODE((tmp_path / "ws").stat().st_mode) == 0o711  # enter by name, no listing
    name = first.name("web:alice")
    assert re.fullmatch(r"[0-9a-f]{32}", name) and name != first.name("web:bob")
    assert workspaces(tmp_path / "ws").name("web:alice") == name  # the next start finds the workspace
    assert workspaces(tmp_path / "other").name("web:alice") != name  # another secret, another name


def test_a_loosened_key_file_is_tightened(tmp_path: Path) -> None:
    workspaces(tmp_path)
    os.chmod(tmp_path / NAME_KEY_FILE, 0o644)
    workspaces(tmp_path)
    assert stat.S_IMODE((tmp_path / NAME_KEY_FILE).stat().st_mode) == 0o600


@pytest.mark.parametrize("content", ["", "not hex", "ab" * 8])
def test_an_unusable_key_file_is_a_clear_error(tmp_path: Path, content: str) -> None:
    (tmp_path / NAME_KEY_FILE).write_text(content)
    with pytest.raises(ValueError, match="holds no usable key .*: delete it"):
        workspaces(tmp_path)


def test_a_key_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("ab" * 32)
    (tmp_path / NAME_KEY_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="not a regular file"):
        workspaces(tmp_path)
