"""Formatting cost: what rendering each frame's Markdown adds to delivery, beside no rendering in the same run.

    uv run python -m bench.formatting              # a 4,000-character Markdown answer, 20-character deltas
    uv run python -m bench.formatting --json

Reported: the state machine's time per delta for Telegram with its HTML rendering (length
checks on the rendering) beside the same platform with Markdown passed through (no
rendering), and the time to render one whole frame for each markup.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, replace

from agentstream.config import TextFormat
from agentstream_delivery.adapters.telegram import CAPABILITIES as TELEGRAM
from agentstream_delivery.formatting import render
from agentstream_delivery.stream_inputs import Finish, TextDelta
from agentstream_delivery.stream_machine import transition
from agentstream_delivery.stream_model import StreamModel

PARAGRAPH = (
    "## Step {i}\n\nThe **fastest** way is _usually_ `sort -u` (see [the manual](https://man7.org/sort.1)).\n\n"
    "- keeps ~~duplicates~~ *once*\n- handles 👍🏽 and 🇩🇪\n\n```sh\nsort -u < in.txt > out.txt\n```\n\n"
)


def answer(chars: int) -> str:
    text, i = "", 0
    while len(text) < chars:
        text += PARAGRAPH.format(i=i)
        i += 1
    return text[:chars]


def per_delta_us(fmt: TextFormat, text: str, delta: int) -> float:
    model = StreamModel(replace(TELEGRAM, formatting=fmt))
    now = 0.0
    start = time.perf_counter()
    steps = 0
    for i in range(0, len(text), delta):
        now += 0.05  # 20 deltas per second: an edit is due every 20th
        model, _ = transition(model, TextDelta("m1", text[i : i + delta]), now)
        steps += 1
    transition(model, Finish("completed", text=text), now + 1)
    return (time.perf_counter() - start) / steps * 1e6


def render_ms(fmt: TextFormat, text: str, rounds: int = 20) -> float:
    start = time.perf_counter()
    for i in range(rounds):
        render(text + str(i), fmt)  # a new text each round: the cache does not answer
    return (time.perf_counter() - start) / rounds * 1000


@dataclass(frozen=True)
class FormattingResult:
    chars: int
    delta_chars: int
    per_delta_us_markdown_passthrough: float
    per_delta_us_telegram_html: float
    render_ms: dict[str, float]  # one whole frame, by markup (`TextFormat` value)

    @property
    def ratio(self) -> float:
        """Telegram HTML per delta over Markdown passed through: what rendering costs the state machine."""
        return self.per_delta_us_telegram_html / max(self.per_delta_us_markdown_passthrough, 0.001)


def measure(chars: int = 4000, delta: int = 20) -> FormattingResult:
    text = answer(chars)
    return FormattingResult(
        chars=len(text),
        delta_chars=delta,
        per_delta_us_markdown_passthrough=round(per_delta_us(TextFormat.MARKDOWN, text, delta), 1),
        per_delta_us_telegram_html=round(per_delta_us(TextFormat.TELEGRAM_HTML, text, delta), 1),
        render_ms={f.value: round(render_ms(f, text), 2) for f in TextFormat if f is not TextFormat.MARKDOWN},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chars", type=int, default=4000)
    parser.add_argument("--delta", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.chars, args.delta)
    figures = {
        "chars": result.chars,
        "delta_chars": result.delta_chars,
        "per_delta_us_markdown_passthrough": result.per_delta_us_markdown_passthrough,
        "per_delta_us_telegram_html": result.per_delta_us_telegram_html,
        **{f"render_ms_{markup}": ms for markup, ms in result.render_ms.items()},
    }
    ratio = result.ratio
    if args.json:
        print(json.dumps({**figures, "ratio": round(ratio, 2)}))
        return
    for name, value in figures.items():
        print(f"{name:>36} {value}")
    print(f"telegram_html / passthrough per delta: {ratio:.1f}x")


if __name__ == "__main__":
    main()
