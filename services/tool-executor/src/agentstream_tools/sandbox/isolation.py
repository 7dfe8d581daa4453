"""How a sandboxed command is kept from the host, and whether this host can do it.

The command runs as `unshare <NAMESPACES> sh -c <setup> sh <command>` (user, network, mount and
PID namespaces, the uid mapped to root inside). The setup script, root of those namespaces:
- builds a new root on a tmpfs: the `visible_paths` bound read-only, fresh tmpfs on /tmp,
  /var/tmp and /dev/shm, a few device nodes, a fresh /proc of the command's own PID namespace and
  the workspace at /tmp/workspace; it pivots into it and detaches the host's tree, so nothing
  else of the host (other workspaces, /run and every unix socket, state folders) is reachable;
- remounts the new root read-only and runs the command in a nested user and mount namespace
  where its uid is not mapped: the mounts are copied into a less privileged namespace, so the
  kernel locks them (umount fails with EINVAL), the command has no capability anywhere, cannot
  make a user namespace of its own (its uid has no mapping) and runs with no_new_privs.
The setup shell stays PID 1 (not exec): it turns a fatal signal into 128 + its number.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentstream.config.tools import SandboxSettings
from agentstream.observability import get_logger

LOGGER = "agentstream.tool-executor.sandbox"

MOUNTED_WORKSPACE = "/tmp/workspace"
PATH = "/usr/local/bin:/usr/bin:/bin"
NAMESPACES = ["--user", "--map-root-user", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc"]
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
PROBE_TIMEOUT_S = 10

# `R` is the new root: a tmpfs mounted over /tmp of this (private) mount namespace only.
_BUILD_ROOT = """set -eu
R=/tmp
mount -t tmpfs -o size=1m,mode=755 sandbox-root $R
mkdir -p $R/tmp $R/var/tmp $R/dev/shm $R/proc $R/.old
for d in tmp var/tmp dev/shm; do mount -t tmpfs -o size=64m,mode=1777,nosuid,nodev tmpfs $R/$d; done
for n in {devices}; do touch $R/dev/$n; mount --bind /dev/$n $R/dev/$n; done
ln -s /proc/self/fd $R/dev/fd
for i in 0:stdin 1:stdout 2:stderr; do ln -s /proc/self/fd/${{i%%:*}} $R/dev/${{i#*:}}; done
mkdir $R{workspace}
mount --bind --no-canonicalize /proc/self/cwd $R{workspace}
mount -t proc -o nosuid,nodev,noexec proc $R/proc
for p in {visible}; do
  [ -e "$p" ] || [ -L "$p" ] || continue
  mkdir -p "$R$(dirname "$p")"
  if [ -L "$p" ]; then ln -s "$(readlink "$p")" "$R$p"; continue; fi
  if [ -d "$p" ]; then mkdir -p "$R$p"; else touch "$R$p"; fi
  mount --rbind "$p" "$R$p"
  mount -o remount,bind,ro "$R$p"
done
cd $R
PATH=/usr/sbin:/sbin:$PATH pivot_root . .old
umount -l /.old
rmdir /.old
mount -o remount,bind,ro /
cd {workspace}
set +e
unshare --user --mount -- setpriv --no-new-privs --inh-caps=-all -- "$@"; exit $?
"""


def setup_script(visible_paths: Sequence[Path]) -> str:
    return _BUILD_ROOT.format(
        devices=" ".join(DEVICES),
        workspace=MOUNTED_WORKSPACE,
        visible=" ".join(shlex.quote(str(p)) for p in visible_paths) or "''",
    )


def sandbox_uid(settings: SandboxSettings) -> int | None:
    """The uid commands run as: `run_as_uid` when the executor is root (else it cannot change uid)."""
    return settings.run_as_uid if os.geteuid() == 0 else None


def isolated_argv(settings: SandboxSettings, command: list[str]) -> list[str]:
    return ["unshare", *NAMESPACES, "sh", "-c", setup_script(settings.visible_paths), "sh", *command]


class SandboxUnavailable(RuntimeError):
    """The host cannot isolate sandboxed commands and the operator did not accept weaker isolation."""


@dataclass(frozen=True)
class Isolation:
    limits: bool  # prlimit found
    namespaces: bool  # the namespaced, pivoted, locked set-up works here
    own_uid: bool  # commands run under a uid that is not the executor's
    detail: str = ""  # why the namespace set-up failed, as the probe saw it

    def weaknesses(self) -> list[str]:
        found = []
        if not self.limits:
            found.append("no prlimit (util-linux): no CPU, memory, file size or process limits")
        if not self.namespaces:
            why = f": {self.detail}" if self.detail else ""
            found.append(
                "user namespaces not usable (no network, file system or process isolation, and processes "
                f"may outlive the command){why}"
            )
        if not self.own_uid:
            found.append(
                "the executor is not root, so commands run as its own user (they may read its files, "
                "and without namespaces its environment)"
            )
        return found

    def describe(self) -> str:
        return "; ".join(self.weaknesses()) or "rlimits, namespaces, own uid: all on"


def admit(isolation: Isolation, settings: SandboxSettings) -> list[str]:
    """The weaknesses to warn about at start; refuses (SandboxUnavailable) any weakness the
    operator did not accept with `tools.sandbox.allow_weak_isolation`."""
    weaknesses = isolation.weaknesses()
    if weaknesses and not settings.allow_weak_isolation:
        raise SandboxUnavailable(
            "tools.sandbox is enabled but this host cannot isolate its commands: "
            + "; ".join(weaknesses)
            + ". Fix that (run the tool-executor as root where user namespaces are allowed), or set "
            "tools.sandbox.allow_weak_isolation: true to serve the workspace tools anyway (docs/tools.md)."
        )
    return weaknesses


def interpreter_outside(settings: SandboxSettings) -> str | None:
    """Why the `python` tool's interpreter cannot run inside the sandbox's root, if it cannot: it
    must resolve (links followed) into `visible_paths`. None also when it is not installed at all
    (the tool then answers that, as the shell would)."""
    found = shutil.which(settings.python, path=PATH)
    if found is None:
        return None
    real = Path(found).resolve()
    if any(real.is_relative_to(Path(p).resolve()) for p in settings.visible_paths):
        return None
    return (
        f"tools.sandbox.python {settings.python!r} is {real}, outside tools.sandbox.visible_paths: "
        "commands would not find it; add its installation folder to visible_paths"
    )


def probe(settings: SandboxSettings) -> Isolation:
    """What this host allows: runs the real set-up once, as the sandbox's user, in a scratch workspace."""
    uid = sandbox_uid(settings)
    limits = shutil.which("prlimit") is not None
    namespaces, detail = False, ""
    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        detail = "unshare or setpriv (util-linux) not found"
    else:
        with tempfile.TemporaryDirectory(prefix="agentstream-sandbox-probe-") as scratch:
            if uid is not None:
                os.chown(scratch, uid, uid)
            try:
                done = subprocess.run(
                    isolated_argv(settings, ["true"]),
                    capture_output=True,
                    timeout=PROBE_TIMEOUT_S,
                    cwd=scratch,
                    env={"PATH": PATH},
                    user=uid,
                    group=uid,
                    extra_groups=[] if uid is not None else None,
                    check=False,
                )
                namespaces = done.returncode == 0
                errors = done.stderr.decode(errors="replace").strip().splitlines()
                detail = "" if namespaces else (errors[-1] if errors else f"exit status {done.returncode}")
            except (OSError, subprocess.SubprocessError) as err:
                detail = repr(err)
    isolation = Isolation(limits, namespaces, own_uid=uid is not None and uid != os.geteuid(), detail=detail)
    get_logger(LOGGER).info("workspace sandbox", isolation=isolation.describe())
    return isolation
