"""What the web page reads besides the UI message stream: a stored history as UI messages
(the shape the stream builds, so the page has one model of a conversation) and treadle
events as JSON for the inspector."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...types import (
    AgentEvent,
    AgentMessage,
    AssistantMessage,
    MessageUpdate,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from .._files import media_of, ui_file_part
from ..vercel_ai import source_parts


def messages_to_ui(
    messages: Sequence[AgentMessage], pending: Mapping[str, str | None] | Sequence[str] = ()
) -> list[dict[str, Any]]:
    """A history as UI messages (``role`` and ``parts``). Consecutive assistant messages and
    tool results make one assistant message (a ``step-start`` part per model response);
    ``index`` is how many history messages the UI message ends at (a branch point). Calls in
    ``pending`` wait for an approval (state ``approval-requested``; a mapping gives each its
    question, ``approval.prompt``). A denied call (its result's ``details`` say
    ``denied``) is ``output-denied`` with the reason, not an error."""
    out: list[dict[str, Any]] = []
    tools: dict[str, dict[str, Any]] = {}
    waiting = set(pending)
    prompts = pending if isinstance(pending, Mapping) else {}
    for index, message in enumerate(messages, start=1):
        if isinstance(message, UserMessage):
            files = [p for p in map(ui_file_part, media_of(message.content)) if p]
            out.append(
                {
                    "id": f"m{index}",
                    "role": "user",
                    "parts": [{"type": "text", "text": message.text}, *files],
                    "index": index,
                }
            )
            continue
        if isinstance(message, AssistantMessage):
            if not out or out[-1]["role"] != "assistant":
                out.append({"id": f"m{index}", "role": "assistant", "parts": [], "index": index})
            current = out[-1]
            current["index"] = index
            parts: list[dict[str, Any]] = current["parts"]
            parts.append({"type": "step-start"})
            for block in message.content:
                if isinstance(block, ThinkingContent) and block.thinking:
                    parts.append({"type": "reasoning", "text": block.thinking, "state": "done"})
                elif isinstance(block, TextContent) and block.text:
                    parts.append({"type": "text", "text": block.text, "state": "done"})
                elif isinstance(block, ToolCall):
                    part: dict[str, Any] = {
                        "type": f"tool-{block.name}",
                        "toolCallId": block.id,
                        "toolName": block.name,
                        "input": block.arguments,
                        "state": "approval-requested" if block.id in waiting else "input-available",
                    }
                    if block.id in waiting:
                        part["approval"] = {"id": block.id}
                        if prompts.get(block.id):
                            part["approval"]["prompt"] = prompts[block.id]
                    tools[block.id] = part
                    parts.append(part)
            parts.extend(source_parts(message, f"m{index}"))
            if message.stop_reason == "aborted":
                current["stopped"] = True
            if message.error is not None and message.stop_reason == "error":
                parts.append({"type": "error", "errorText": message.error.message})
        elif isinstance(message, ToolResultMessage):
            called = tools.get(message.tool_call_id)
            if called is None:
                continue
            denied = isinstance(message.details, dict) and message.details.get("denied") is True
            if denied:
                called["state"] = "output-denied"
                called["approval"] = {"id": message.tool_call_id, "approved": False}
                called["approval"]["reason"] = message.text
            elif message.is_error:
                called["state"] = "output-error"
                called["errorText"] = message.text
            else:
                called["state"] = "output-available"
                called["output"] = message.text
                made = [p for p in map(ui_file_part, media_of(message.content)) if p]
                if made and out and out[-1]["role"] == "assistant":  # as the stream puts them
                    out[-1]["parts"].extend(made)
            if out and out[-1]["role"] == "assistant":
                out[-1]["index"] = index
    return out


_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*\)")  # [label](url) -> label
_MARKS = re.compile(r"[`*~]+|(?<![A-Za-z0-9])_+|_+(?![A-Za-z0-9])")
_LEAD = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-+]\s+|\d+[.)]\s+)")


def plain_title(title: str | None, *, branch: bool = False) -> str:
    """A session's title as plain text: the first user text without its Markdown marks
    (``**``, backticks, ``# ``, links shown by their label). A branch says so."""
    text = _LEAD.sub("", _MARKS.sub("", _LINK.sub(r"\1", title or ""))).strip()
    text = " ".join(text.split()) or "(untitled)"
    return f"{text} (branch)" if branch else text


def event_json(event: AgentEvent) -> dict[str, Any]:
    """One event for the inspector. A ``message_update`` carries its delta only (not the
    message so far: that would make the stream quadratic)."""
    if isinstance(event, MessageUpdate):
        return {
            "type": event.type,
            "seq": event.seq,
            "loop_id": event.loop_id,
            "depth": event.depth,
            "timestamp": event.timestamp,
            "delta": event.delta.model_dump(mode="json"),
        }
    return event.model_dump(mode="json")
