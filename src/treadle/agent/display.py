"""How a :class:`~treadle.agent.result.RunResult` shows itself in a notebook and a REPL:
the answer, each tool call with how it ended, usage and cost, and why the run ended.
Plain text for a terminal (IPython's ``_repr_pretty_``), HTML and Markdown for Jupyter;
no dependency beyond the standard library, and every value escaped."""

from __future__ import annotations

import html
import importlib
import json
import sys
import time
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from ..types import (
    AgentEvent,
    AgentMessage,
    AssistantMessage,
    ErrorInfo,
    MessageEnd,
    MessageUpdate,
    TextDelta,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolResultMessage,
    Usage,
)


class Shown(Protocol):
    """What a view reads of a run's result (``RunResult`` has it; imported by no one here,
    since the result imports this module to show itself)."""

    @property
    def messages(self) -> list[AgentMessage]: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def reason(self) -> str: ...
    @property
    def error(self) -> ErrorInfo | None: ...
    @property
    def output(self) -> Any: ...
    @property
    def pending_tool_calls(self) -> list[str]: ...
    @property
    def text(self) -> str: ...


_ARGS_CHARS = 120
_RESULT_CHARS = 160


@dataclass(frozen=True, slots=True)
class CallLine:
    """One tool call of a run, as shown: its name, arguments and how it ended."""

    name: str
    arguments: str
    outcome: str
    failed: bool


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_lines(result: Shown) -> list[CallLine]:
    """The run's tool calls in order, each with its result (or "no result")."""
    results = {m.tool_call_id: m for m in result.messages if isinstance(m, ToolResultMessage)}
    lines: list[CallLine] = []
    for message in result.messages:
        if not isinstance(message, AssistantMessage):
            continue
        for call in message.tool_calls:
            arguments = _clip(json.dumps(call.arguments, ensure_ascii=False), _ARGS_CHARS)
            answer = results.get(call.id)
            if answer is None:
                lines.append(CallLine(call.name, arguments, "no result (pending)", False))
            else:
                lines.append(
                    CallLine(
                        call.name, arguments, _clip(answer.text, _RESULT_CHARS), answer.is_error
                    )
                )
    return lines


def summary(result: Shown) -> str:
    """Usage, cost and the end of the run, on one line."""
    usage = result.usage
    parts = [f"{usage.input} in / {usage.output} out tokens"]
    if usage.cost_usd is not None:
        parts.append(f"${usage.cost_usd:.4f}")
    parts.append(f"ended: {result.reason}")
    if result.error is not None:
        parts.append(f"{result.error.kind}: {_clip(result.error.message, 200)}")
    if result.pending_tool_calls:
        parts.append(f"waiting on {', '.join(result.pending_tool_calls)}")
    return " · ".join(parts)


def as_text(result: Shown) -> str:
    """The plain-text view (a terminal, IPython without HTML)."""
    lines = [result.text or "(no answer)"]
    calls = call_lines(result)
    if calls:
        lines.append("")
        lines += [
            f"  {'✗' if c.failed else '→'} {c.name}({c.arguments}) = {c.outcome}" for c in calls
        ]
    if result.output is not None:
        lines += ["", f"output: {result.output!r}"]
    lines += ["", summary(result)]
    return "\n".join(lines)


def as_html(result: Shown) -> str:
    """The notebook view: every value escaped (a model's answer is untrusted text)."""
    e = html.escape
    answer = e(result.text) if result.text else "<em>(no answer)</em>"
    lines = call_lines(result)
    rows = "".join(
        f"<li><code>{e(c.name)}({e(c.arguments)})</code> "
        f"{'<b>failed</b>: ' if c.failed else '→ '}{e(c.outcome)}</li>"
        for c in lines
    )
    calls = f"<details><summary>{len(lines)} tool call(s)</summary><ul>{rows}</ul></details>"
    output = (
        f"<div><b>output</b>: <code>{e(repr(result.output))}</code></div>"
        if result.output is not None
        else ""
    )
    return (
        '<div class="treadle-run-result">'
        f'<div style="white-space: pre-wrap">{answer}</div>'
        f"{calls if rows else ''}{output}"
        f'<div style="opacity: 0.7; font-size: smaller">{e(summary(result))}</div>'
        "</div>"
    )


class LiveView:
    """A run shown as it happens: in a notebook one display updated in place (at most ten
    times a second, and at each tool call), elsewhere text written as it arrives."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out
        self.text: list[str] = []
        self.calls: list[str] = []
        self.handle = _notebook_display() if out is None else None
        self.shown_at = 0.0

    def add(self, event: AgentEvent) -> None:
        if isinstance(event, MessageUpdate) and isinstance(event.delta, TextDelta):
            self.text.append(event.delta.text)
            if self.handle is None:
                self._write(event.delta.text)
            else:
                self._update(force=False)
        elif isinstance(event, ToolExecutionStart):
            arguments = _clip(json.dumps(event.args, ensure_ascii=False), _ARGS_CHARS)
            self.calls.append(f"→ {event.tool_name}({arguments})")
            self._write(f"\n{self.calls[-1]}\n") if self.handle is None else self._update(True)
        elif isinstance(event, ToolExecutionEnd):
            mark = "✗" if event.is_error else "✓"
            line = f"  {mark} {_clip(event.result.text, _RESULT_CHARS)}"
            self.calls.append(line)
            self._write(f"{line}\n") if self.handle is None else self._update(True)
        elif isinstance(event, MessageEnd) and self.handle is None and self.text:
            self._write("\n")

    def done(self, result: Shown) -> None:
        if self.handle is not None:
            self.handle.update(_HTML(as_html(result)))
        else:
            self._write(f"[{summary(result)}]\n")

    def _write(self, text: str) -> None:
        out = self.out or sys.stdout
        out.write(text)
        out.flush()

    def _update(self, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self.shown_at < 0.1:
            return
        self.shown_at = now
        body = html.escape("".join(self.text))
        calls = "".join(f"<div><code>{html.escape(c)}</code></div>" for c in self.calls)
        assert self.handle is not None
        self.handle.update(_HTML(f'<div style="white-space: pre-wrap">{body}</div>{calls}'))


class _HTML:
    """HTML for IPython's display machinery (its own ``HTML`` class, without importing it)."""

    def __init__(self, markup: str) -> None:
        self.markup = markup

    def _repr_html_(self) -> str:
        return self.markup


def _notebook_display() -> Any:
    """A display handle when running under a notebook front end, else None."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    if shell is None or "IPKernelApp" not in getattr(shell, "config", {}):
        return None
    display = importlib.import_module("IPython.display").display  # it is running
    return display(_HTML(""), display_id=True)
