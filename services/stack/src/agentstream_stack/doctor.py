"""`agentstream doctor`'s checks: is everything this configuration names there and usable.

One `Verdict` per check: Kafka reachable, our topics there with their partitions, the database
reachable and migrated to head, each model connector answering, each chat platform accepting
its credential. A check that depends on a failed one (topics without Kafka) is skipped. Every
check has a deadline; none writes anything (a missing SQLite file is not created by looking).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from functools import partial
from pathlib import Path

from agentstream.config import Settings
from agentstream.kafka.topics import TOPICS, Topics
from agentstream.secrets_mask import mask_url
from agentstream_stack.cli_errors import command_line
from agentstream_stack.cli_support import masked
from agentstream_stack.doctor_probes import CheckFailed, NotApplicable, probe_connector, probe_platform


class Verdict(StrEnum):
    OK = "ok"
    FAIL = "fail"
    SKIP = "skip"  # not checked: what it depends on failed, or there is nothing to check


@dataclass(frozen=True)
class CheckResult:
    check: str  # what was checked: "kafka", "topics", "database", "connector <id>", "platform <name>"
    verdict: Verdict
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {k: str(v) for k, v in asdict(self).items()}


async def run_checks(settings: Settings, timeout_s: float) -> list[CheckResult]:
    """Every check, Kafka and topics first, then the rest concurrently (each within `timeout_s`)."""
    results: list[CheckResult] = []
    partitions: dict[str, int] = {}

    async def kafka() -> str:
        nonlocal partitions
        partitions, detail = await _kafka_topics(settings, timeout_s)
        return detail

    results.append(await _verdict("kafka", kafka, timeout_s))
    if results[-1].verdict is Verdict.OK:
        results.append(await _verdict("topics", lambda: _topics(settings, partitions), timeout_s))
    else:
        results.append(CheckResult("topics", Verdict.SKIP, "kafka unreachable"))
    others: list[tuple[str, Callable[[], Awaitable[str]]]] = [("database", partial(_database, settings.database.url))]
    others += [(f"connector {c.id}", partial(probe_connector, c, timeout_s)) for c in settings.connectors]
    others += [
        (f"platform {name}", partial(probe_platform, name, conf, timeout_s))
        for name, conf in settings.platforms.items()
        if conf.enabled
    ]
    results += await asyncio.gather(*(_verdict(name, check, timeout_s) for name, check in others))
    return results


async def _verdict(name: str, check: Callable[[], Awaitable[str]], timeout_s: float) -> CheckResult:
    try:
        async with asyncio.timeout(timeout_s):
            return CheckResult(name, Verdict.OK, await check())
    except NotApplicable as e:
        return CheckResult(name, Verdict.SKIP, str(e))
    except CheckFailed as e:
        return CheckResult(name, Verdict.FAIL, str(e))
    except TimeoutError:
        return CheckResult(name, Verdict.FAIL, f"no answer within {timeout_s:g} s")
    except Exception as e:  # any failure of a check is its verdict, in one line
        lines = str(e).strip().splitlines()
        first = lines[0] if lines else ""
        kind = type(e).__name__
        text = first if first.startswith(kind) else f"{kind}: {first}".rstrip(": ")  # aiokafka's name themselves
        return CheckResult(name, Verdict.FAIL, mask_url(text))


async def _kafka_topics(settings: Settings, timeout_s: float) -> tuple[dict[str, int], str]:
    """The partition count of every topic the broker has, and the verdict line."""
    from aiokafka.client import AIOKafkaClient

    from agentstream.kafka.security import client_security

    kafka = settings.kafka
    client = AIOKafkaClient(
        bootstrap_servers=kafka.bootstrap_servers,
        client_id=f"{kafka.client_id}-doctor",
        request_timeout_ms=int(timeout_s * 1000),
        **client_security(kafka),
    )
    try:
        await client.bootstrap()
        metadata = await client.fetch_all_metadata()
    finally:
        await client.close()
    topics = {t: len(metadata.partitions_for_topic(t) or ()) for t in metadata.topics()}
    brokers = len(metadata.brokers())
    return topics, f"reachable at {kafka.bootstrap_servers} ({brokers} broker{'s' if brokers != 1 else ''})"


async def _topics(settings: Settings, present: dict[str, int]) -> str:
    topics = Topics(settings.kafka.topic_prefix)
    missing, wrong = [], []
    for topic in TOPICS:
        name, want = topics.name(topic), topic.partition_count(settings.kafka)
        if name not in present:
            missing.append(name)
        elif present[name] != want:
            wrong.append(f"{name} has {present[name]} partitions, not {want}")
    if missing or wrong:
        problems = ([f"missing: {', '.join(missing)}"] if missing else []) + wrong
        raise CheckFailed("; ".join(problems) + f" ({command_line('topics create')} makes the missing ones)")
    return f"all {len(TOPICS)} present (prefix {settings.kafka.topic_prefix!r}, {settings.kafka.partitions} partitions)"


async def _database(url: str) -> str:
    from sqlalchemy.engine import make_url

    from agentstream.db.session import current_revisions, head_revisions

    u = make_url(url)
    if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:" and not Path(u.database).exists():  # noqa: ASYNC240 - one stat
        raise CheckFailed(f"no database at {u.database} ({command_line('db upgrade')} creates it)")
    current = await asyncio.to_thread(current_revisions, url)
    heads = head_revisions()
    where = masked(url)
    if not current:
        raise CheckFailed(f"{where} reachable but never migrated ({command_line('db upgrade')})")
    if current != heads:
        raise CheckFailed(
            f"{where} at {', '.join(current)}, not at head {', '.join(heads)} ({command_line('db upgrade')} migrates it)"
        )
    return f"{where} reachable, migrations at head"
