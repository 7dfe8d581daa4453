"""Commands some tests run (promtool, prometheus, kubectl): skipped where missing, failed in CI.

A developer's machine may lack one, and its tests are skipped there. CI (``CI`` set) must have
every command its tests use: a missing one fails the test, so a green CI never hides a check
that did not run.
"""

from __future__ import annotations

import os
import shutil

import pytest


def command_path(*names: str, installed_by: str) -> str:
    """The path of the first of `names` on PATH; else the test is skipped, or fails under CI."""
    for name in names:
        path = shutil.which(name)
        if path is not None:
            return path
    reason = f"{' or '.join(names)} not installed ({installed_by})"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI must have it")
    pytest.skip(reason)
