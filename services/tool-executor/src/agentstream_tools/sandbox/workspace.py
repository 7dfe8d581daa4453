"""Per-conversation workspace directories, and file access that cannot leave them.

A path is relative to the workspace; `..`, absolute paths and symbolic links (at any
component) are refused. The path is walked one component at a time from the workspace's
directory descriptor with `O_NOFOLLOW`, so a link swapped in while a call runs is not
followed either. Only regular files with a single link are read or replaced (a hard link
could point outside; a FIFO would block the executor).

A workspace's directory is named by an HMAC of the conversation key with a secret kept in
`<root_dir>/.name-key` (mode 0600, made on first start): knowing a conversation key is not
enough to find its directory.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path, PurePosixPath

from agentstream.config.tools import SandboxSettings
from agentstream.secret_files import read_or_make
from agentstream_tools.validation import ArgumentError, ToolError, shown

NAME_KEY_FILE = ".name-key"
NAME_KEY_BYTES = 32


def truncated(text: str, limit: int, total: str) -> str:
    """`text` cut to `limit` characters with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[output truncated: {total} in all, the first {limit} characters shown]"


def name_key(path: Path) -> bytes:
    """The secret in `path`, made on first use; the file is kept at mode 0600, owned by the executor."""

    def usable(text: str) -> bool:
        try:
            return len(bytes.fromhex(text)) >= NAME_KEY_BYTES
        except ValueError:
            return False

    text = read_or_make(
        path, lambda: secrets.token_bytes(NAME_KEY_BYTES).hex(), usable, f"key (at least {NAME_KEY_BYTES} bytes in hex)"
    )
    return bytes.fromhex(text)


class Workspaces:
    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self.root = settings.root_dir
        # Commands run as `run_as_uid` when the executor is root: their files must be theirs.
        self.owner = settings.run_as_uid if os.geteuid() == 0 else None
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o711)  # others may enter a directory they can name, not list them
        self.name_key = name_key(self.root / NAME_KEY_FILE)

    def name(self, conversation_key: str) -> str:
        """HMAC-SHA256 of the key, 128 bits in hex: two keys never share a directory."""
        return hmac.new(self.name_key, conversation_key.encode(), hashlib.sha256).hexdigest()[:32]

    def path(self, conversation_key: str) -> Path:
        """The conversation's directory (created on first use)."""
        directory = self.root / self.name(conversation_key)
        if not directory.is_dir():
            directory.mkdir(mode=0o700, exist_ok=True)
            if self.owner is not None:
                os.chown(directory, self.owner, self.owner)
        return directory

    def _open(self, workspace: Path, relative: str, flags: int, create_dirs: bool = False) -> int:
        pure = PurePosixPath(relative)
        if pure.is_absolute() or "\0" in relative:
            raise ArgumentError(f"path {shown(relative)} must be relative to the workspace")
        parts = [p for p in pure.parts if p != "."]
        if ".." in parts:
            raise ArgumentError(f"path {shown(relative)}: '..' is not allowed")
        if not parts:
            raise ArgumentError("path names no file")
        dir_fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for part in parts[:-1]:
                try:
                    fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
                except FileNotFoundError:
                    if not create_dirs:
                        raise ToolError(f"no such directory in the workspace: {shown(part)}") from None
                    os.mkdir(part, 0o755, dir_fd=dir_fd)
                    if self.owner is not None:
                        os.chown(part, self.owner, self.owner, dir_fd=dir_fd, follow_symlinks=False)
                    fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
                except OSError as err:  # ELOOP: a symbolic link; ENOTDIR: a file
                    raise ToolError(f"{shown(part)} is a symbolic link or not a directory: not followed") from err
                os.close(dir_fd)
                dir_fd = fd
            try:
                return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644, dir_fd=dir_fd)
            except FileNotFoundError:
                raise ToolError(f"no such file in the workspace: {shown(relative)}") from None
            except OSError as err:
                if err.errno == errno.ELOOP:
                    raise ToolError(f"{shown(relative)} is a symbolic link: not followed") from None
                if err.errno in (errno.EISDIR, errno.ENXIO):
                    raise ToolError(f"{shown(relative)} is not a regular file") from None
                raise
        finally:
            os.close(dir_fd)

    @staticmethod
    def _regular(fd: int, relative: str) -> os.stat_result:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            raise ToolError(f"{shown(relative)} is not a regular file with a single link")
        return info

    def read(self, conversation_key: str, relative: str) -> str:
        limit = self.settings.output_max_chars
        fd = self._open(self.path(conversation_key), relative, os.O_RDONLY)
        try:
            size = self._regular(fd, relative).st_size
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read(limit * 4 + 4)  # a UTF-8 character is at most 4 bytes
        finally:
            os.close(fd)
        return truncated(data.decode("utf-8", errors="replace"), limit, f"{size} bytes")

    def write(self, conversation_key: str, relative: str, content: str) -> str:
        data = content.encode()
        if len(data) > self.settings.file_size_mb * 1024 * 1024:
            raise ArgumentError(f"content is {len(data)} bytes, more than the {self.settings.file_size_mb} MB limit")
        fd = self._open(self.path(conversation_key), relative, os.O_WRONLY | os.O_CREAT, create_dirs=True)
        try:
            self._regular(fd, relative)
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if self.owner is not None:
                os.fchown(fd, self.owner, self.owner)
        finally:
            os.close(fd)
        return f"wrote {len(data)} bytes to {relative}"
