"""Slash commands as pure decisions."""

import pytest

from agentstream.config import load_settings
from agentstream.contracts import (
    AnswerApproval,
    ApprovalDecision,
    InboundMessage,
    InterruptRun,
    ResetConversation,
    ResumeRun,
)
from agentstream_ingress.commands import (
    Command,
    ConversationFacts,
    RoleDecision,
    RunSummary,
    handle,
    parse_command,
)
from agentstream_ingress.decisions import CommandDecision, NoticeDecision, StartDecision
from agentstream_ingress.routing import route
from agentstream_ingress.starting import build_start

SETTINGS = load_settings(roles={"smart": "demo"})
MSG = InboundMessage(id="m", platform="web", chat_id="c", user={"id": "u"}, text="/x")
ROUTED = route(MSG, SETTINGS)


def run(text: str, facts: ConversationFacts | None = None):  # type: ignore[no-untyped-def]
    cmd = parse_command(text)
    assert cmd is not None
    return handle(cmd, MSG, ROUTED, facts or ConversationFacts(), SETTINGS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/stop", Command("stop", "")),
        ("/stop@my_bot", Command("stop", "")),
        ("  /Model smart ", Command("model", "smart")),
        ("/queue do it later", Command("queue", "do it later")),
        ("hello", None),
        ("/", None),
        ("/ x", None),
    ],
)
def test_parse_command(text, expected):
    assert parse_command(text) == expected


def test_new_and_reset_reset_the_conversation():
    for text in ("/new", "/reset"):
        d = run(text)
        assert isinstance(d, CommandDecision) and d.commands == (
            ResetConversation(conversation_key="web:c", id=d.commands[0].id, ts=d.commands[0].ts),
        )


def test_stop_interrupts():
    d = run("/stop")
    assert isinstance(d, CommandDecision) and isinstance(d.commands[0], InterruptRun)


def test_resume_needs_a_failed_or_interrupted_run():
    d = run("/resume")
    assert isinstance(d, NoticeDecision) and "no failed or interrupted" in d.text
    d = run("/resume", ConversationFacts(resumable=RunSummary("r-1", "interrupted")))
    assert isinstance(d, CommandDecision) and isinstance(d.commands[0], ResumeRun)
    assert d.commands[0].run_id == "r-1" and "interrupted" in (d.notice or "")


def test_retry_runs_the_last_message_again():
    assert isinstance(run("/retry"), NoticeDecision)
    last = MSG.model_copy(update={"text": "what is 6*7"})
    d = run("/retry", ConversationFacts(last_message=last, role_override="smart"))
    assert isinstance(d, StartDecision) and d.start.text == "what is 6*7"
    assert d.start.options.connector == "use::smart"
    # a run of its own: its ids derive from the /retry message, not from the message it repeats
    last = last.model_copy(update={"id": "earlier"})
    again = run("/retry", ConversationFacts(last_message=last))
    assert isinstance(again, StartDecision)
    assert again.start.run_id == d.start.run_id  # both derive from the /retry message "m"
    assert again.start.run_id != build_start(last, ROUTED, None, SETTINGS).start.run_id


def test_queue_enqueues_explicitly():
    d = run("/queue later please")
    assert isinstance(d, StartDecision) and d.start.text == "later please"
    assert d.start.options.double_texting == "enqueue"
    assert isinstance(run("/queue"), NoticeDecision)


def test_model_sets_clears_and_refuses_unknown_roles():
    d = run("/model smart")
    assert isinstance(d, RoleDecision) and d.role == "smart"
    d = run("/model default")
    assert isinstance(d, RoleDecision) and d.role is None
    d = run("/model nonsense")
    assert isinstance(d, NoticeDecision) and "Unknown role" in d.text and "smart" in d.text


def test_status_reports_run_queue_assistant_connector():
    facts = ConversationFacts(
        unfinished=("run-aaaaaaaa", "run-bbbbbbbb"),
        role_override="smart",
        last_finished=RunSummary("old-run-1", "completed"),
    )
    d = run("/status", facts)
    assert isinstance(d, NoticeDecision)
    assert "Current run: run-aaaa" in d.text and "Queued: 1" in d.text
    assert "Assistant: default" in d.text and "demo (role smart)" in d.text and "completed" in d.text


def test_help_and_unknown_list_the_commands():
    assert "/resume" in run("/help").text
    d = run("/frobnicate")
    assert d.text.startswith("Unknown command /frobnicate") and "/model" in d.text


def test_command_replies_name_their_command_for_command_hooks():
    # Delivery fires `command:<name>` hooks from Notice.command: every command reply must carry it.
    reset = run("/new")
    assert isinstance(reset, CommandDecision) and reset.command == "new"
    assert run("/stop").command == "stop"
    resume = run("/resume", ConversationFacts(resumable=RunSummary("r-1", "failed")))
    assert isinstance(resume, CommandDecision) and resume.command == "resume"
    refused = run("/resume")
    assert isinstance(refused, NoticeDecision) and refused.command == "resume"
    assert run("/help").command == "help"


@pytest.mark.parametrize("name", ["approve", "deny"])
def test_approve_and_deny_are_always_sent_to_the_runner(name):
    decision = run(f"/{name}")
    assert isinstance(decision, CommandDecision) and decision.command == name and decision.notice is None
    [answer] = decision.commands
    assert isinstance(answer, AnswerApproval)
    assert (answer.decision, answer.user_id, answer.admin) == (ApprovalDecision(name), "u", False)
    assert (answer.conversation_key, answer.reply_target.chat_id) == (MSG.conversation_key, "c")


def test_an_admin_of_the_platform_or_the_default_rule_answers_as_admin():
    for authz in ({"platforms": {"web": {"allow_all": True, "admins": ["u"]}}}, {"default": {"admins": ["u"]}}):
        settings = load_settings(authz=authz)
        [answer] = handle(Command("approve", ""), MSG, ROUTED, ConversationFacts(), settings).commands  # type: ignore[union-attr]
        assert answer.admin is True
    elsewhere = load_settings(authz={"platforms": {"telegram": {"admins": ["u"]}}, "default": {"admins": []}})
    [answer] = handle(Command("deny", ""), MSG, ROUTED, ConversationFacts(), elsewhere).commands  # type: ignore[union-attr]
    assert answer.admin is False


def test_command_replies_speak_the_platforms_texts():
    texts = {
        "new_conversation": "Neues Gespräch.",
        "nothing_to_resume": "Nichts fortzusetzen.",
        "resuming": "Setze Lauf {run} fort ({status}).",
        "nothing_to_retry": "Nichts zu wiederholen.",
        "queue_usage": "Aufruf: /queue <Text>",
        "unknown_command": "Unbekannt: /{command}.",
    }
    settings = load_settings(ingress={"texts": {"web": texts}})

    def reply(text: str, facts: ConversationFacts | None = None) -> str:
        cmd = parse_command(text)
        assert cmd is not None
        d = handle(cmd, MSG, ROUTED, facts or ConversationFacts(), settings)
        assert isinstance(d, NoticeDecision | CommandDecision)
        return (d.text if isinstance(d, NoticeDecision) else d.notice) or ""

    assert reply("/new") == "Neues Gespräch."
    assert reply("/resume") == "Nichts fortzusetzen."
    assert reply("/resume", ConversationFacts(resumable=RunSummary("r-12345678-x", "failed"))) == (
        "Setze Lauf r-123456 fort (failed)."
    )
    assert reply("/retry") == "Nichts zu wiederholen."
    assert reply("/queue") == "Aufruf: /queue <Text>"
    assert reply("/frobnicate").startswith("Unbekannt: /frobnicate.\nCommands:")
    assert run("/new").notice == "Started a new conversation."  # other platforms keep the defaults
