"""`read_or_make`: a secret file made 0600 on first use and read back; links, other files and
unusable text refused with the file named."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from agentstream.secret_files import read_or_make


def _long(text: str) -> bool:
    return len(text) >= 8


def test_made_once_at_0600_then_read_back_and_a_wider_mode_narrowed(tmp_path: Path) -> None:
    path = tmp_path / "state" / "secret"
    first = read_or_make(path, lambda: "s3cret-value", _long, "secret")
    assert first == "s3cret-value" and stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    assert read_or_make(path, lambda: "another-value", _long, "secret") == "s3cret-value"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_link_or_unusable_text_is_refused_naming_the_file(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("s3cret-value\n")
    link = tmp_path / "secret"
    link.symlink_to(target)
    with pytest.raises(ValueError, match="is not a regular file of this user"):
        read_or_make(link, lambda: "x" * 8, _long, "secret")
    short = tmp_path / "short"
    short.write_text("abc\n")
    with pytest.raises(ValueError, match=r"short holds no usable secret \(8 characters\): delete it"):
        read_or_make(short, lambda: "x" * 8, _long, "secret (8 characters)")
