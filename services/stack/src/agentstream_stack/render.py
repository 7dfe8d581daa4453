"""Print a run's events as a person would like to read them in a terminal."""

from __future__ import annotations

from rich.console import Console

from agentstream.contracts import (
    DeltaKind,
    MessageDelta,
    Notice,
    RunEvent,
    RunFinished,
    SegmentBreak,
    ToolCall,
    ToolResult,
)


class StreamPrinter:
    """Writes text deltas as they arrive; tool calls and the end as dim lines."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._line_open = False

    def _newline(self) -> None:
        if self._line_open:
            self.console.print()
            self._line_open = False

    def __call__(self, event: RunEvent) -> None:
        match event:
            case MessageDelta(kind=DeltaKind.TEXT, text=text):
                self.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)
                self._line_open = True
            case ToolCall(tool=tool, arguments=args):
                self._newline()
                self.console.print(f"[dim]→ {tool}({args})[/dim]", highlight=False)
            case ToolResult(tool=tool, ok=ok, content=content, error=error):
                self.console.print(f"[dim]← {tool}: {content if ok else 'error: ' + str(error)}[/dim]", highlight=False)
            case SegmentBreak():
                self._newline()
            case Notice(text=text, level=level):
                self._newline()
                self.console.print(f"[{'red' if level == 'error' else 'yellow'}]{text}[/]", highlight=False)
            case RunFinished(status=status, error=error, usage=usage, duration_ms=ms):
                self._newline()
                detail = f" — {error}" if error else ""
                self.console.print(
                    f"[dim]run {status}{detail} · {usage.llm_calls} LLM calls, "
                    f"{usage.total_tokens} tokens · {ms:.0f} ms[/dim]",
                    highlight=False,
                )
            case _:
                pass
