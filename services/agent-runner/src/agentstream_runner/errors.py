"""Errors that end a run as `failed` with a message meant for the user.

Anything else raised inside a run is a bug: it is also recorded as `failed`, but
then re-raised so its traceback is logged.
"""

from __future__ import annotations


class RunFailure(Exception):
    """An expected failure; `str(err)` becomes `RunFinished.error`."""


class ConnectorError(RunFailure):
    """No usable connector for the run."""


class UnknownAssistant(RunFailure):
    def __init__(self, assistant_id: str) -> None:
        super().__init__(f"assistant {assistant_id!r} not found")
