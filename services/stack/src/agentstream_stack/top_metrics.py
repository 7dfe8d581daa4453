"""What `agentstream top` shows, read from the services' `/metrics`.

`FIGURES` is the one table of metric names: each figure names the samples it sums, as
alternatives (the first metric present wins, so a newer metric replaces an older one) each with
the labels it keeps.
A figure whose metric no service exports is `None` (shown as "–"), never 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import httpx
from prometheus_client.parser import text_string_to_metric_families


class Figure(StrEnum):
    RUNS_STARTED_PER_S = "runs_started_per_s"
    RUNS_FINISHED_PER_S = "runs_finished_per_s"
    RUNS_FAILED_PER_S = "runs_failed_per_s"
    ACTIVE_RUNS = "active_runs"
    CONSUMER_LAG = "consumer_lag"
    RATE_LIMITED_PER_S = "rate_limited_per_s"
    RATE_LIMITED = "rate_limited"
    DEAD_LETTERS_PER_S = "dead_letters_per_s"
    DEAD_LETTERS = "dead_letters"


@dataclass(frozen=True)
class Metric:
    """Samples of one name whose labels include `labels`."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        return name == self.name and all(labels.get(k) == v for k, v in self.labels.items())


@dataclass(frozen=True)
class Source:
    """A figure: the sum over every service of the first alternative any service exports."""

    alternatives: tuple[Metric, ...]
    per_second: bool = False  # a rate between two scrapes instead of the current value


def _one(name: str, per_second: bool = False, **labels: str) -> Source:
    return Source((Metric(name, labels),), per_second)


# The metric names, in one place. Counters are matched by their sample name (`…_total`).
RATE_LIMITED = Metric("agentstream_delivery_platform_calls_total", {"outcome": "rate_limited"})
DEAD_LETTERS = (Metric("agentstream_dead_letters_total"),)
FIGURES: dict[Figure, Source] = {
    Figure.RUNS_STARTED_PER_S: Source(
        (Metric("agentstream_runs_started_total"), Metric("agentstream_runner_records_total", {"type": "run.start"})),
        per_second=True,
    ),
    Figure.RUNS_FINISHED_PER_S: _one("agentstream_runs_finished_total", per_second=True),
    Figure.RUNS_FAILED_PER_S: _one("agentstream_runs_finished_total", per_second=True, status="failed"),
    Figure.ACTIVE_RUNS: Source(
        (Metric("agentstream_runner_active_runs"), Metric("agentstream_runner_active_conversations"))
    ),
    Figure.CONSUMER_LAG: _one("agentstream_consumer_lag"),
    Figure.RATE_LIMITED_PER_S: Source((RATE_LIMITED,), per_second=True),
    Figure.RATE_LIMITED: Source((RATE_LIMITED,)),
    Figure.DEAD_LETTERS_PER_S: Source(DEAD_LETTERS, per_second=True),
    Figure.DEAD_LETTERS: Source(DEAD_LETTERS),
}
# Lag: labels group, topic, partition. Every replica of a group may export the same partition:
# per partition the highest value counts once.
LAG_METRIC = FIGURES[Figure.CONSUMER_LAG].alternatives[0].name
LAG_GROUP_LABEL = "group"


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Scrape:
    """One service's `/metrics` at one moment: its samples, or why there are none."""

    service: str
    url: str
    at: float
    samples: tuple[Sample, ...] = ()
    error: str | None = None


def parse_metrics(text: str) -> tuple[Sample, ...]:
    return tuple(
        Sample(sample.name, dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    )


async def scrape(client: httpx.AsyncClient, service: str, url: str) -> Scrape:
    at = asyncio.get_running_loop().time()
    try:
        response = await client.get(url.rstrip("/") + "/metrics")
    except httpx.HTTPError as err:
        return Scrape(service, url, at, error=f"not answering ({type(err).__name__})")
    if response.status_code != 200:
        hint = " (a metrics token: --token or auth.metrics_token_env)" if response.status_code in (401, 403) else ""
        return Scrape(service, url, at, error=f"HTTP {response.status_code}{hint}")
    try:
        return Scrape(service, url, at, samples=parse_metrics(response.text))
    except ValueError as err:
        return Scrape(service, url, at, error=f"unreadable metrics ({err})")


async def scrape_all(client: httpx.AsyncClient, urls: Mapping[str, str]) -> list[Scrape]:
    return list(await asyncio.gather(*(scrape(client, service, url) for service, url in urls.items())))


def total(scrapes: Sequence[Scrape], source: Source) -> float | None:
    """The sum of the source's samples over every service; None when no service has the metric."""
    for metric in source.alternatives:
        found = [s for scrape in scrapes for s in scrape.samples if s.name == metric.name]
        if found:
            return sum(s.value for s in found if metric.matches(s.name, s.labels))
    return None


def figures(before: Sequence[Scrape], now: Sequence[Scrape]) -> dict[Figure, float | None]:
    out: dict[Figure, float | None] = {}
    for figure, source in FIGURES.items():
        if figure is Figure.CONSUMER_LAG:
            groups = lag_by_group(now)
            out[figure] = sum(groups.values()) if groups else None
            continue
        current = total(now, source)
        if not source.per_second:
            out[figure] = current
            continue
        previous = total(before, source)
        elapsed = _elapsed(before, now)
        if current is None or previous is None or elapsed <= 0:
            out[figure] = None
        else:
            # A restarted service resets its counters: never show a negative rate.
            out[figure] = max(current - previous, 0.0) / elapsed
    return out


def _elapsed(before: Sequence[Scrape], now: Sequence[Scrape]) -> float:
    if not before or not now:
        return 0.0
    return max(s.at for s in now) - max(s.at for s in before)


def lag_by_group(scrapes: Sequence[Scrape]) -> dict[str, float]:
    per_partition: dict[tuple[str, str, str], float] = {}
    for scrape in scrapes:
        for s in scrape.samples:
            if s.name == LAG_METRIC:
                key = (s.labels.get(LAG_GROUP_LABEL, "?"), s.labels.get("topic", ""), s.labels.get("partition", ""))
                per_partition[key] = max(per_partition.get(key, 0.0), s.value)
    lag: dict[str, float] = {}
    for (group, _, _), value in per_partition.items():
        lag[group] = lag.get(group, 0.0) + value
    return dict(sorted(lag.items()))
