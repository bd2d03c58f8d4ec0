"""Transcript rules: every tool call has exactly one result, after its call, before the next
assistant message; no result without its call. Providers reject histories that break them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..types import AgentMessage, AssistantMessage, TextContent, ToolResultMessage

MISSING_RESULT_TEXT = "No result was recorded for this tool call."


@dataclass(frozen=True, slots=True)
class TranscriptIssue:
    """One broken rule: where (message index) and what."""

    index: int
    problem: str
    tool_call_id: str | None = None

    def __str__(self) -> str:
        return f"message {self.index}: {self.problem}"


def validate_transcript(
    messages: Sequence[AgentMessage], *, allow_pending: Iterable[str] = ()
) -> list[TranscriptIssue]:
    """Every broken tool-call rule in ``messages`` (empty when the history is valid).

    Results are matched to the calls of the assistant message before them, so an id that a
    later turn uses again (servers that number calls per response) is fine.
    ``allow_pending`` lists call ids that may stay unanswered at the end (a suspended run's
    approvals).
    """
    pending_ok = set(allow_pending)
    issues: list[TranscriptIssue] = []
    open_calls: dict[str, int] = {}
    answered: set[str] = set()  # answered calls of the current assistant message

    def close_open(at: int) -> None:
        for call_id, where in open_calls.items():
            if at < len(messages) or call_id not in pending_ok:
                issues.append(
                    TranscriptIssue(where, f"tool call {call_id!r} has no result", call_id)
                )
        open_calls.clear()

    for i, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            call_id = message.tool_call_id
            if call_id in open_calls:
                del open_calls[call_id]
                answered.add(call_id)
            elif call_id in answered:
                issues.append(
                    TranscriptIssue(i, f"second result for tool call {call_id!r}", call_id)
                )
            else:
                issues.append(
                    TranscriptIssue(
                        i, f"result for tool call {call_id!r} without its call", call_id
                    )
                )
        elif message.role in ("assistant", "user"):
            if open_calls:
                close_open(i)
            if isinstance(message, AssistantMessage):
                answered = set()
                for call in message.tool_calls:
                    if call.id in open_calls:
                        issues.append(
                            TranscriptIssue(i, f"tool call id {call.id!r} used twice", call.id)
                        )
                    open_calls[call.id] = i
    close_open(len(messages))
    return issues


def missing_result(
    call_id: str, tool_name: str, text: str = MISSING_RESULT_TEXT, *, cancelled: bool = False
) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id,
        tool_name=tool_name,
        content=[TextContent(text=text)],
        is_error=True,
        cancelled=cancelled,
    )


def repair_transcript(
    messages: Sequence[AgentMessage],
    *,
    missing_text: str = MISSING_RESULT_TEXT,
    missing_cancelled: bool = False,
    allow_pending: Iterable[str] = (),
) -> list[AgentMessage]:
    """A copy of ``messages`` that follows the rules: unanswered calls get an error result
    (``missing_text``; marked ``cancelled`` with ``missing_cancelled``) right after their
    other results; results without a call, and second results, are dropped. Valid
    histories come back equal."""
    pending_ok = set(allow_pending)
    out: list[AgentMessage] = []
    open_calls: dict[str, str] = {}  # id -> tool name, in call order

    def close_open(keep_pending: bool) -> None:
        for call_id, name in open_calls.items():
            if keep_pending and call_id in pending_ok:
                continue
            out.append(missing_result(call_id, name, missing_text, cancelled=missing_cancelled))
        open_calls.clear()

    for message in messages:
        if isinstance(message, ToolResultMessage):
            if message.tool_call_id in open_calls:
                del open_calls[message.tool_call_id]
                out.append(message)
            continue
        if message.role in ("assistant", "user") and open_calls:
            close_open(keep_pending=False)
        out.append(message)
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                open_calls.setdefault(call.id, call.name)
    close_open(keep_pending=True)
    return out
