"""Printing events for a person: plain text, or rich when it is installed and stdout is a tty."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from ..types import (
    AgentEnd,
    AgentEvent,
    AssistantMessage,
    MessageEnd,
    MessageUpdate,
    PlanCreated,
    ProviderRetry,
    TextDelta,
    ThinkingDelta,
    ToolExecutionEnd,
    ToolExecutionStart,
    Usage,
)


def _short(value: Any, limit: int = 120) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Renderer:
    """Plain-text rendering (ANSI dim for thinking when writing to a terminal)."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.tty = self.out.isatty()
        self._open = False  # inside a streamed line

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def _line(self, text: str) -> None:
        if self._open:
            self._write("\n")
            self._open = False
        self._write(text + "\n")

    def dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.tty else text

    def status(self, usage: Usage, model: str) -> None:
        cost = f" ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""
        self._line(self.dim(f"[{model}] tokens in {usage.input} out {usage.output}{cost}"))

    def event(self, event: AgentEvent) -> None:
        indent = "  " * event.depth
        if isinstance(event, MessageUpdate):
            delta = event.delta
            if isinstance(delta, TextDelta):
                self._write(delta.text)
                self._open = True
            elif isinstance(delta, ThinkingDelta):
                self._write(self.dim(delta.text))
                self._open = True
        elif isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
            if self._open:
                self._write("\n")
                self._open = False
            error = event.message.error
            if error is not None:
                self._line(f"{indent}error: {error.kind}: {error.message}")
        elif isinstance(event, ToolExecutionStart):
            self._line(f"{indent}→ {event.tool_name}({_short(event.args)})")
        elif isinstance(event, ToolExecutionEnd):
            mark = "✗" if event.is_error else "←"
            self._line(f"{indent}{mark} {event.tool_name}: {_short(event.result.text)}")
        elif isinstance(event, ProviderRetry):
            self._line(
                self.dim(
                    f"{indent}retry {event.attempt}/{event.max_retries} in "
                    f"{event.delay_s:.1f}s: {event.message}"
                )
            )
        elif isinstance(event, PlanCreated):
            self._line(self.dim(f"plan:\n{event.plan}"))
        elif isinstance(event, AgentEnd) and event.depth == 0 and event.reason != "completed":
            self._line(self.dim(f"[run ended: {event.reason}]"))


class RichRenderer(Renderer):
    """The same, through rich's console (colours, dim thinking)."""

    def __init__(self, out: TextIO | None = None) -> None:
        super().__init__(out)
        from rich.console import Console

        self.console = Console(file=self.out, highlight=False)

    def dim(self, text: str) -> str:
        from rich.markup import escape

        return f"[dim]{escape(text)}[/dim]"

    def _write(self, text: str) -> None:
        self.console.print(text, end="", markup="[dim]" in text, soft_wrap=True)

    def _line(self, text: str) -> None:
        if self._open:
            self.console.print()
            self._open = False
        self.console.print(text, markup="[dim]" in text, soft_wrap=True)


def make_renderer(out: TextIO | None = None) -> Renderer:
    stream = out or sys.stdout
    if stream.isatty():
        try:
            return RichRenderer(stream)
        except ImportError:
            pass
    return Renderer(stream)
