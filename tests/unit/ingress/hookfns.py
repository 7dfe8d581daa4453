"""Hooks named by the pipeline tests' config (`tests.unit.ingress.hookfns:<name>`)."""

from agentstream_ingress.hooks import Deny, Handled, Rewrite


def receive(msg):  # type: ignore[no-untyped-def]
    return {
        "please deny": Deny("denied by hook"),
        "please rewrite": Rewrite("rewritten"),
        "please handle": Handled(),
        "please answer": Handled("answered by hook"),
    }.get(msg.text)


def broken(msg):  # type: ignore[no-untyped-def]
    raise RuntimeError("a broken hook is skipped")


async def no_stop(msg, command):  # type: ignore[no-untyped-def]
    return Deny("stopping is not allowed here")


def to_text(msg, command):  # type: ignore[no-untyped-def]
    return Rewrite("not a command any more")


def answer_nothing(msg):  # type: ignore[no-untyped-def]
    return Handled("")


def name_the_command(msg, command):  # type: ignore[no-untyped-def]
    return Deny(f"no /{command.name} for you")
