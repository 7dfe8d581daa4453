"""Secure by default: neither the runner nor the executor starts without the tool-call secret
(the error names the key to set), and the embedded stack makes one once, kept in its state folder
(mode 0600) across restarts, gone from the environment when the stack stops."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentstream.config import ConfigError, load_settings
from agentstream.config.tools import DEFAULT_CALL_SECRET_ENV
from agentstream.db import upgrade
from agentstream_runner.bootstrap import bootstrap as bootstrap_runner
from agentstream_stack.embedded_auth import TOOL_CALL_SECRET_FILE, forgotten_on_exit, prepare_credentials
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor


@pytest.mark.parametrize("bootstrap", [bootstrap_runner, bootstrap_tool_executor], ids=["runner", "executor"])
def test_runner_and_executor_refuse_to_start_without_the_secret(bootstrap, monkeypatch, sqlite_url):  # type: ignore[no-untyped-def]
    monkeypatch.delenv(DEFAULT_CALL_SECRET_ENV)
    settings = load_settings(database={"url": sqlite_url})
    with pytest.raises(ConfigError, match=f"tools.call_secret_env: the env var {DEFAULT_CALL_SECRET_ENV} is not set"):
        bootstrap(settings)
    # The documented opt-out starts them (the executor then runs unsigned records unchecked).
    bootstrap(load_settings(database={"url": sqlite_url}, tools={"accept_unsigned_calls": True}))


async def test_the_embedded_stack_keeps_one_secret_in_its_state_folder(monkeypatch, sqlite_url, tmp_path: Path):
    monkeypatch.delenv(DEFAULT_CALL_SECRET_ENV)
    await upgrade(sqlite_url)
    settings = load_settings(database={"url": sqlite_url})
    state = tmp_path / ".agentstream"

    first = await prepare_credentials(settings, state_dir=state)
    with forgotten_on_exit(first):
        secret_env = first.settings.tools.call_secret_env
        secret = first.settings.tools.call_secret()
        assert secret is not None and len(secret) >= 32
        bootstrap_tool_executor(first.settings)  # starts with what the stack made
    assert os.environ.get(secret_env) is None  # taken out of the environment on stop
    secret_file = state / TOOL_CALL_SECRET_FILE
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert secret_file.read_text().strip() == secret

    again = await prepare_credentials(settings, state_dir=state)  # a restart signs with the same secret
    with forgotten_on_exit(again):
        assert again.settings.tools.call_secret() == secret
