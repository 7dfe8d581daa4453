"""The `tools` section: the tool-executor's MCP servers, Python function tools and sandbox.

See docs/tools.md for what each tool source does and docs/configuration.md for every key.
"""

from __future__ import annotations

import os
import re
import tempfile
from enum import StrEnum
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from agentstream.config.core import Section

# A source (MCP server or function-tool group) prefixes its tools as `<source>__<tool>`: the
# source name itself never holds the separator, so the split is unambiguous.
DEFAULT_CALL_SECRET_ENV = "AGENTSTREAM_TOOL_CALL_SECRET"
SOURCE_NAME = re.compile(r"^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$")
# What a sandboxed command sees of the host by default: programs, libraries and /etc (read-only).
SANDBOX_SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Never visible: the sandbox mounts its own there (a host /proc would show every process), or they
# hold the host's unix sockets.
SANDBOX_PRIVATE_PATHS = ("/proc", "/dev", "/sys", "/tmp", "/var/tmp", "/run", "/var/run")
DOTTED_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*([.:][A-Za-z_][A-Za-z0-9_]*)$")


class McpTransport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"  # streamable HTTP


class McpServerSettings(Section):
    """One MCP server: a command run over stdio, or a streamable-HTTP URL (exactly one)."""

    command: str | None = Field(default=None, description="stdio: the executable that runs the server.")
    args: list[str] = Field(default_factory=list, description="stdio: its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="stdio: extra environment variables (not secrets).")
    pass_env: list[str] = Field(
        default_factory=list, description="stdio: names of the executor's environment variables passed on (secrets)."
    )
    cwd: str | None = Field(default=None, description="stdio: working directory of the server process.")
    url: str | None = Field(default=None, description="streamable HTTP: the server's MCP endpoint.")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP: headers sent (not secrets).")
    headers_env: dict[str, str] = Field(
        default_factory=dict, description="HTTP: header → name of the environment variable holding its value."
    )
    call_timeout_s: float = Field(default=30.0, gt=0, description="A call running longer ends as a tool timeout.")
    max_concurrency: int = Field(default=4, ge=1, description="Calls to this server running at once.")
    connect_timeout_s: float = Field(default=10.0, gt=0, description="Connecting and listing its tools, at most.")
    reconnect_min_s: float = Field(default=0.5, gt=0, description="First wait before reconnecting a lost server.")
    reconnect_max_s: float = Field(default=30.0, gt=0, description="Longest wait between reconnection attempts.")
    ping_interval_s: float = Field(default=15.0, gt=0, description="A connected server is pinged this often.")
    requires_approval: bool = Field(
        default=False, description="Every call of this server's tools waits for `/approve` (docs/tools.md)."
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of `command` (stdio) or `url` (streamable HTTP)")
        if self.reconnect_max_s < self.reconnect_min_s:
            raise ValueError("reconnect_max_s must be at least reconnect_min_s")
        return self

    @property
    def transport(self) -> McpTransport:
        return McpTransport.STDIO if self.command is not None else McpTransport.HTTP


class SandboxSettings(Section):
    """The workspace tools (`shell`, `python`, `read_file`, `write_file`); off unless enabled."""

    enabled: bool = Field(default=False, description="Serve the workspace tools.")
    root_dir: Path = Field(
        default_factory=lambda: Path(tempfile.gettempdir()) / "agentstream-workspaces",
        description="One directory per conversation is made under this.",
    )
    cpu_s: int = Field(default=10, ge=1, description="CPU seconds per command (RLIMIT_CPU).")
    memory_mb: int = Field(default=512, ge=16, description="Address space per process (RLIMIT_AS).")
    file_size_mb: int = Field(default=16, ge=1, description="Largest file a command may write (RLIMIT_FSIZE).")
    max_processes: int = Field(default=32, ge=1, description="Processes the sandbox user may run (RLIMIT_NPROC).")
    wall_timeout_s: float = Field(default=30.0, gt=0, description="A command running longer is killed.")
    output_max_chars: int = Field(default=16_000, ge=100, description="Output beyond this is cut with a marker.")
    python: str = Field(default="python3", description="Interpreter of the `python` tool (looked up on PATH).")
    requires_approval: bool = Field(
        default=True, description="Every call of a workspace tool waits for `/approve` (docs/tools.md § Approval)."
    )
    run_as_uid: int = Field(
        default=65534, ge=1, description="When the executor runs as root, commands run as this uid (nobody)."
    )
    visible_paths: list[Path] = Field(
        default_factory=lambda: [Path(p) for p in SANDBOX_SYSTEM_PATHS],
        description="The only host paths a command sees (read-only): the rest of its file system is private.",
    )
    allow_weak_isolation: bool = Field(
        default=False,
        description="Serve the workspace tools even where the host cannot isolate commands (no user namespaces, "
        "or commands would run as the executor's own user); a warning is logged at every start.",
    )

    @field_validator("visible_paths")
    @classmethod
    def _absolute_paths(cls, value: list[Path]) -> list[Path]:
        if bad := [str(p) for p in value if not p.is_absolute() or ".." in p.parts or p == Path("/")]:
            raise ValueError(f"not absolute paths below / without '..': {bad}")
        private = [Path(p) for p in SANDBOX_PRIVATE_PATHS]
        if bad := [str(p) for p in value if any(p.is_relative_to(q) or q.is_relative_to(p) for q in private)]:
            raise ValueError(f"{bad} overlap paths the sandbox keeps private: {list(SANDBOX_PRIVATE_PATHS)}")
        return value

    @model_validator(mode="after")
    def _workspaces_hidden(self) -> SandboxSettings:
        root = self.root_dir.absolute()
        if shown := [str(p) for p in self.visible_paths if root.is_relative_to(p) or p.is_relative_to(root)]:
            raise ValueError(f"visible_paths {shown} would show the workspaces under root_dir {root} to commands")
        return self


class ToolsSettings(Section):
    max_concurrency: int = Field(default=16, ge=1, description="Tool calls running at once.")
    mcp_servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    functions: dict[str, list[str]] = Field(
        default_factory=dict, description="group → dotted paths of Python functions, served as `<group>__<name>`."
    )
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    requires_approval: list[str] = Field(
        default_factory=list,
        description="Tools whose calls wait for `/approve`: a name (`calculator`, `files__write`) or all tools "
        "of an MCP server or function group (`files__*`).",
    )
    catalog_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="The executor republishes its tools on `tool-catalog` this often; runners drop the tools of "
        "an executor not heard from in 3 intervals.",
    )
    call_secret_env: str = Field(
        default=DEFAULT_CALL_SECRET_ENV,
        description="Env var holding the secret (at least 32 bytes) runners sign `tool-calls` records with and "
        "executors verify them with; the same value on every runner and executor (docs/tools.md § Which calls run).",
    )
    accept_unsigned_calls: bool = Field(
        default=False,
        description="Executor: run `tool-calls` records without a signature as they say, unchecked (the behaviour "
        "before signing). A record with a wrong signature is still refused.",
    )
    heartbeat_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="While a call runs, the executor sends `tool.heartbeat` on `events` this often; keep it well "
        "below `resume.stale_after_s` so persistence's watchdog never takes a slow call for a lost run.",
    )

    def call_secret(self) -> str | None:
        return os.environ.get(self.call_secret_env) or None

    @field_validator("mcp_servers", "functions")
    @classmethod
    def _source_names(cls, value: dict[str, object]) -> dict[str, object]:
        bad = [name for name in value if not SOURCE_NAME.fullmatch(name)]
        if bad:
            raise ValueError(f"names {bad}: letters, digits, '-' and single '_' only (tools are `<name>__<tool>`)")
        return value

    @field_validator("functions")
    @classmethod
    def _dotted_paths(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        bad = [path for paths in value.values() for path in paths if not DOTTED_PATH.fullmatch(path)]
        if bad:
            raise ValueError(f"not dotted paths (`package.module.function` or `package.module:function`): {bad}")
        return value

    @model_validator(mode="after")
    def _sources_distinct(self) -> ToolsSettings:
        if both := sorted(set(self.mcp_servers) & set(self.functions)):
            raise ValueError(f"{both} name both an MCP server and a function group")
        return self
