"""The client programs of examples/clients/ (docs/clients.md): what each needs, how it is built and
how it is run.

A build goes to ~/.cache/agentstream/clients/<language>-<hash of its sources and lock file>, made
once: a later run with the same sources only runs it (Maven's ~/.m2, Go's module and build caches
and npm's cache make a build of changed sources quick too)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "clients"
CACHE = Path.home() / ".cache" / "agentstream" / "clients"
BUILD_TIMEOUT_S = 600
# What a build leaves in the source folder (examples/clients/.gitignore): not part of the hash.
BUILD_OUTPUTS = frozenset({"target", "node_modules", "client"})


@dataclass(frozen=True)
class ClientProgram:
    name: str  # the folder under examples/clients/
    client: str  # the Kafka client library, as docs/clients.md names it
    tools: tuple[str, ...]  # commands that must be on PATH
    build: Callable[[Path], None] | None  # builds a copy of the sources in the given folder
    command: Callable[[Path], list[str]]  # runs it from the folder it was built in

    @property
    def sources(self) -> Path:
        return EXAMPLES / self.name

    def missing_tools(self) -> list[str]:
        return [tool for tool in self.tools if shutil.which(tool) is None]


def sources_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_file() and not BUILD_OUTPUTS.intersection(relative.parts):
            digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _run(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )


def built(program: ClientProgram) -> Path:
    """The folder the program runs from: its cached build, made now when there is none."""
    if program.build is None:
        return program.sources
    target = CACHE / f"{program.name}-{sources_hash(program.sources)}"
    if target.is_dir():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{program.name}-", dir=CACHE))
    try:
        shutil.copytree(program.sources, work, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*BUILD_OUTPUTS))
        program.build(work)
        try:
            work.rename(target)  # whole or not at all: a build cut short is never taken for a cached one
        except OSError:
            if not target.is_dir():  # else another process built the same sources first
                raise
        for older in CACHE.glob(f"{program.name}-*"):  # builds of sources that changed since
            if older != target:
                shutil.rmtree(older, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


PROGRAMS: tuple[ClientProgram, ...] = (
    ClientProgram(
        "java",
        "kafka-clients (Java)",
        ("java", "mvn"),
        lambda folder: _run(["mvn", "-q", "-B", "package"], folder),
        lambda folder: ["java", "-jar", str(folder / "target" / "agentstream-client.jar")],
    ),
    ClientProgram(
        "go",
        "franz-go",
        ("go",),
        lambda folder: _run(["go", "build", "-mod=readonly", "-o", "client", "."], folder),
        lambda folder: [str(folder / "client")],
    ),
    ClientProgram(
        "node",
        "kafkajs",
        ("node", "npm"),
        lambda folder: _run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], folder),
        lambda folder: ["node", str(folder / "client.js")],
    ),
    ClientProgram(
        "python",
        "confluent-kafka",
        (),
        None,  # confluent-kafka is in the workspace's dev group (uv.lock)
        lambda folder: [sys.executable, str(folder / "client.py")],
    ),
    ClientProgram(
        "kcat",
        "kcat (Debian)",
        ("kcat", "jq", "bash"),
        None,
        lambda folder: ["bash", str(folder / "client.sh")],
    ),
)


def program_env(
    bootstrap: str, prefix: str, group: str, chat_id: str, user_id: str, timeout_s: float
) -> dict[str, str]:
    return {
        **os.environ,
        "BOOTSTRAP_SERVERS": bootstrap,
        "TOPIC_PREFIX": prefix,
        "GROUP_ID": group,
        "PLATFORM": "memory",
        "CHAT_ID": chat_id,
        "USER_ID": user_id,
        "TEXT": "calculate 6*7",
        "TIMEOUT_S": str(timeout_s),
    }
