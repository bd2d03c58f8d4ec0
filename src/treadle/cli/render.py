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
    ProviderFallback,
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

    def _write(self, text: str, dim: bool = False) -> None:
        self.out.write(self.dim(text) if dim else text)
        self.out.flush()

    def _line(self, text: str, dim: bool = False) -> None:
        if self._open:
            self._write("\n")
            self._open = False
        self._write(text + "\n", dim)

    def dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.tty else text

    def status(self, usage: Usage, model: str) -> None:
        cost = f" ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""
        self._line(f"[{model}] tokens in {usage.input} out {usage.output}{cost}", dim=True)

    def event(self, event: AgentEvent) -> None:
        indent = "  " * event.depth
        if isinstance(event, MessageUpdate):
            delta = event.delta
            if isinstance(delta, TextDelta):
                self._write(delta.text)
                self._open = True
            elif isinstance(delta, ThinkingDelta):
                self._write(delta.text, dim=True)
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
                f"{indent}retry {event.attempt}/{event.max_retries} in "
                f"{event.delay_s:.1f}s: {event.message}",
                dim=True,
            )
        elif isinstance(event, ProviderFallback):
            self._line(
                f"{indent}{event.from_provider}:{event.from_model} failed ({event.error_kind}): "
                f"falling back to {event.to_provider}:{event.to_model}",
                dim=True,
            )
        elif isinstance(event, PlanCreated):
            self._line(f"plan:\n{event.plan}", dim=True)
        elif isinstance(event, AgentEnd) and event.depth == 0 and event.reason != "completed":
            self._line(f"[run ended: {event.reason}]", dim=True)


class RichRenderer(Renderer):
    """The same, through rich's console (colours, dim thinking)."""

    def __init__(self, out: TextIO | None = None) -> None:
        super().__init__(out)
        from rich.console import Console

        self.console = Console(file=self.out, highlight=False)

    def _write(self, text: str, dim: bool = False) -> None:
        # Model and tool text is printed as it is, never parsed as rich markup.
        self.console.print(text, end="", markup=False, style="dim" if dim else None, soft_wrap=True)

    def _line(self, text: str, dim: bool = False) -> None:
        if self._open:
            self.console.print()
            self._open = False
        self.console.print(text, markup=False, style="dim" if dim else None, soft_wrap=True)


def make_renderer(out: TextIO | None = None) -> Renderer:
    """Rich when it is installed and the output is a terminal; plain text otherwise."""
    stream = out or sys.stdout
    if stream.isatty():
        try:
            return RichRenderer(stream)
        except ImportError:
            pass
    return Renderer(stream)
