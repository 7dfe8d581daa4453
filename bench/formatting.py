"""Formatting cost: what rendering each frame's Markdown adds to delivery, beside no rendering in the same run.

    uv run python -m bench.formatting              # a 4,000-character Markdown answer, 20-character deltas
    uv run python -m bench.formatting --json

Reported: the state machine's time per delta for each markup on the platform that renders to it
(its length limit, unit and edit pace: Telegram's HTML, Slack's mrkdwn, Discord's Markdown,
Signal's plain text, the web page's HTML; length checks on the rendering, the closed blocks of
the growing answer kept, docs/delivery.md) beside the same platform with Markdown passed through
(no rendering), each the best of `--rounds` interleaved rounds with cold caches, and the time to
render one whole frame from scratch per markup. Target: every markup ≤ 3× its platform's
passthrough per delta; the exit status is 1 when one is over.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, replace

from agentstream.config import TextFormat
from agentstream.contracts import RunStatus
from agentstream_delivery.adapters.base import Capabilities
from agentstream_delivery.adapters.discord import CAPABILITIES as DISCORD
from agentstream_delivery.adapters.signal import CAPABILITIES as SIGNAL
from agentstream_delivery.adapters.slack import CAPABILITIES as SLACK
from agentstream_delivery.adapters.telegram import CAPABILITIES as TELEGRAM
from agentstream_delivery.adapters.web import WebAdapter
from agentstream_delivery.formatting import render, render_frame, render_whole
from agentstream_delivery.formatting.incremental import MEMO
from agentstream_delivery.formatting.streaming import FENCES
from agentstream_delivery.formatting.tree import inline_tokens, normalized_link, parse, readable_url, tokens
from agentstream_delivery.stream_inputs import Finish, TextDelta
from agentstream_delivery.stream_machine import transition
from agentstream_delivery.stream_model import StreamModel

TARGET_RATIO = 3.0
MARKUPS = [f for f in TextFormat if f is not TextFormat.MARKDOWN]
# Each markup on the platform that renders to it: a web page's 100,000 characters and 0.2 s edits are not
# Telegram's 4,096 UTF-16 units and 1 s.
PLATFORM_OF: dict[TextFormat, Capabilities] = {
    TextFormat.TELEGRAM_HTML: TELEGRAM,
    TextFormat.SLACK_MRKDWN: SLACK,
    TextFormat.DISCORD_MARKDOWN: DISCORD,
    TextFormat.PLAIN: SIGNAL,
    TextFormat.HTML: WebAdapter().capabilities,
}
assert set(PLATFORM_OF) == set(MARKUPS), "a markup without its platform"
# Every paragraph says something of its own ({i}): an answer does not repeat itself, and a cache of what was
# parsed must not be flattered by one that does.
PARAGRAPH = (
    "## Step {i}\n\nThe **fastest** way {i} is _usually_ `sort -u` (see [the manual](https://man7.org/sort.{i})).\n\n"
    "- keeps ~~duplicates~~ *once* ({i})\n- handles 👍🏽 and 🇩🇪\n\n```sh\nsort -u < in{i}.txt > out.txt\n```\n\n"
)


def answer(chars: int, salt: str = "") -> str:
    text, i = "", 0
    while len(text) < chars:
        text += PARAGRAPH.format(i=f"{i}{salt}")
        i += 1
    return text[:chars]


def cold_caches() -> None:
    """Nothing a round rendered helps the next one."""
    for cache in (render, render_frame, parse, tokens, inline_tokens, readable_url, normalized_link):
        cache.cache_clear()
    MEMO.clear()
    FENCES.clear()


def per_delta_us(platform: Capabilities, fmt: TextFormat, text: str, delta: int) -> float:
    model = StreamModel(replace(platform, formatting=fmt))
    now = 0.0
    start = time.process_time()  # CPU, not wall: the machine's other load does not count
    steps = 0
    for i in range(0, len(text), delta):
        now += 0.05  # 20 deltas per second: an edit is due every 15th (buffer_threshold) or each second
        model, _ = transition(model, TextDelta("m1", text[i : i + delta]), now)
        steps += 1
    transition(model, Finish(RunStatus.COMPLETED, text=text), now + 1)
    return (time.process_time() - start) / steps * 1e6


def render_ms(fmt: TextFormat, text: str, rounds: int = 10) -> float:
    took = 0.0
    for i in range(rounds):
        cold_caches()
        start = time.process_time()
        render_whole(text + str(i), fmt)
        took += time.process_time() - start
    return took / rounds * 1000


@dataclass(frozen=True)
class FormattingResult:
    chars: int
    delta_chars: int
    per_delta_us: dict[str, float]  # the state machine per delta, by markup (`TextFormat` value), on its platform
    per_delta_us_passthrough: dict[str, float]  # the same platform with Markdown passed through, by markup
    render_ms: dict[str, float]  # one whole frame rendered from scratch, by markup

    @property
    def per_delta_us_markdown_passthrough(self) -> float:
        """Telegram's, with Markdown passed through."""
        return self.per_delta_us_passthrough[TextFormat.TELEGRAM_HTML.value]

    @property
    def per_delta_us_telegram_html(self) -> float:
        return self.per_delta_us[TextFormat.TELEGRAM_HTML.value]

    @property
    def ratios(self) -> dict[str, float]:
        """Per delta over its platform's Markdown passed through, by markup: what rendering costs the state machine."""
        return {
            markup: us / max(self.per_delta_us_passthrough[markup], 0.001) for markup, us in self.per_delta_us.items()
        }

    @property
    def ratio(self) -> float:
        return self.ratios[TextFormat.TELEGRAM_HTML.value]

    @property
    def over(self) -> list[str]:
        """The markups over the target."""
        return [markup for markup, r in self.ratios.items() if r > TARGET_RATIO]

    @property
    def within_target(self) -> bool:
        return not self.over


def measure(chars: int = 4000, delta: int = 20, rounds: int = 5) -> FormattingResult:
    best: dict[tuple[TextFormat, TextFormat], float] = {}  # (markup, what is rendered: itself or Markdown)
    for r in range(max(1, rounds)):  # interleaved, so that a burst of load hits every markup alike
        for fmt in MARKUPS:
            for rendered in (TextFormat.MARKDOWN, fmt):
                cold_caches()
                us = per_delta_us(PLATFORM_OF[fmt], rendered, answer(chars, f".{r}"), delta)
                best[fmt, rendered] = min(us, best.get((fmt, rendered), us))
    text = answer(chars)
    return FormattingResult(
        chars=len(text),
        delta_chars=delta,
        per_delta_us={f.value: round(best[f, f], 1) for f in MARKUPS},
        per_delta_us_passthrough={f.value: round(best[f, TextFormat.MARKDOWN], 1) for f in MARKUPS},
        render_ms={f.value: round(render_ms(f, text), 2) for f in MARKUPS},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chars", type=int, default=4000)
    parser.add_argument("--delta", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.chars, args.delta, args.rounds)
    figures: dict[str, float] = {
        "chars": result.chars,
        "delta_chars": result.delta_chars,
        **{f"per_delta_us_{markup}": us for markup, us in result.per_delta_us.items()},
        **{f"per_delta_us_{markup}_passthrough": us for markup, us in result.per_delta_us_passthrough.items()},
        **{f"render_ms_{markup}": ms for markup, ms in result.render_ms.items()},
    }
    verdict = "PASS" if result.within_target else "FAIL"
    if args.json:
        ratios = {f"ratio_{markup}": round(r, 2) for markup, r in result.ratios.items()}
        print(json.dumps({**figures, **ratios, "ratio": round(result.ratio, 2), "verdict": verdict}))
    else:
        for name, value in figures.items():
            print(f"{name:>44} {value}")
        for markup, r in result.ratios.items():
            print(f"{markup + ' / its passthrough per delta':>52}: {r:.1f}x ({'ok' if r <= TARGET_RATIO else 'OVER'})")
        over = f" (over: {', '.join(result.over)})" if result.over else ""
        print(f"every markup ≤ {TARGET_RATIO:g}x its platform's passthrough per delta: {verdict}{over}")
    sys.exit(0 if result.within_target else 1)


if __name__ == "__main__":
    main()
