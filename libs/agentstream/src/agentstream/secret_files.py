"""A secret kept in a file of its own: made on first use, read back on every later start.

The file is created at mode 0600 from its first byte (never readable by others, even for a moment),
never followed through a link, and must be a regular file of this process's user; a wider mode left
by hand is narrowed. Used for the embedded stack's web session and tool-call secrets and the
sandbox's workspace-name key.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path


def read_or_make(path: Path, make: Callable[[], str], usable: Callable[[str], bool], what: str) -> str:
    """The text kept in `path`, or `make()` written there on first use. A file whose text is not
    `usable` is refused with a message naming it and `what` it should hold (delete it to start over)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            raise ValueError(f"{path} is not a regular file of this user: delete it") from None
        if stat.S_IMODE(info.st_mode) != 0o600:
            os.chmod(path, 0o600)
        text = path.read_text().strip()
        if not usable(text):
            raise ValueError(f"{path} holds no usable {what}: delete it") from None
        return text
    text = make()
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    return text
