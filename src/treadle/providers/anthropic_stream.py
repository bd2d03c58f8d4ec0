"""Anthropic Messages streams, assembled: typed SSE events into stream events and the final
AssistantMessage (also for a whole, non-streamed response)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_core import from_json, to_json

from ..types import (
    AssistantContent,
    AssistantMessage,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from ..types.usage import StopReason
from ._http import classify
from .base import (
    StreamEvent,
    StreamStart,
    TextEnd,
    TextStart,
    ThinkingEnd,
    ThinkingStart,
)

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_use",
    "refusal": "stop",
    "pause_turn": "stop",
}


def events_from_message(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A non-streamed Message as the stream events that would have produced it."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**message, "content": []}}
    ]
    for index, block in enumerate(message.get("content") or []):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": message.get("stop_reason")}})
    events.append({"type": "message_stop"})
    return events


def parse_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments from the model's JSON text: (arguments, raw text if invalid)."""
    if not text.strip():
        return {}, None
    try:
        value = from_json(text)
    except ValueError:
        return {}, text
    if isinstance(value, dict):
        return value, None
    return {}, text


@dataclass
class _Block:
    kind: Literal["text", "thinking", "redacted", "tool"]
    parts: list[str] = field(default_factory=list)
    signature: str | None = None
    id: str = ""
    name: str = ""
    done: bool = False
    call: ToolCall | None = None


class StreamState:
    """Turns Anthropic stream events into treadle stream events and the final message."""

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.response_id: str | None = None
        self.started = False
        self.finished = False
        self.stop_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.blocks: list[_Block] = []
        self.index_map: dict[int, int] = {}  # Anthropic block index -> treadle content index

    def handle(self, event: dict[str, Any]) -> list[StreamEvent]:
        kind = event.get("type")
        out: list[StreamEvent] = []
        if kind == "error":
            raise classify(0, event, provider=self.provider, fallback="stream error")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            self.response_id = message.get("id")
            self._usage(message.get("usage"))
        if not self.started and kind not in ("ping", None):
            self.started = True
            out.append(StreamStart(model=self.model, response_id=self.response_id))
        if kind == "content_block_start":
            self._start(event, out)
        elif kind == "content_block_delta":
            self._delta(event, out)
        elif kind == "content_block_stop":
            at = self.index_map.get(event.get("index", -1))
            if at is not None:
                self._stop(at, out)
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self.stop_reason = delta["stop_reason"]
            self._usage(event.get("usage"))
        elif kind == "message_stop":
            for at in range(len(self.blocks)):
                self._stop(at, out)
            self.finished = True
        return out

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            value = usage.get(key)
            if isinstance(value, int):
                self.usage[key] = value
        details = usage.get("output_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("thinking_tokens"), int):
            self.usage["thinking_tokens"] = details["thinking_tokens"]

    def _start(self, event: dict[str, Any], out: list[StreamEvent]) -> None:
        block = event.get("content_block") or {}
        kind = block.get("type")
        at = len(self.blocks)
        if kind == "text":
            self.blocks.append(_Block("text"))
            out.append(TextStart(index=at))
            if block.get("text"):
                self._text(at, block["text"], out)
        elif kind == "thinking":
            self.blocks.append(_Block("thinking", signature=block.get("signature") or None))
            out.append(ThinkingStart(index=at))
            if block.get("thinking"):
                self._text(at, block["thinking"], out)
        elif kind == "redacted_thinking":
            self.blocks.append(_Block("redacted", signature=block.get("data")))
            out.append(ThinkingStart(index=at, redacted=True))
        elif kind == "tool_use":
            tool = _Block("tool", id=block.get("id", ""), name=block.get("name", ""))
            self.blocks.append(tool)
            out.append(ToolCallStart(index=at, id=tool.id, name=tool.name))
            initial = block.get("input")
            if initial:  # a non-streamed block carries its whole input here
                text = to_json(initial).decode()
                tool.parts.append(text)
                out.append(ToolCallDelta(index=at, arguments=text))
        else:
            return  # server tool blocks and other kinds have no treadle content type
        self.index_map[event.get("index", at)] = at

    def _text(self, at: int, text: str, out: list[StreamEvent]) -> None:
        block = self.blocks[at]
        block.parts.append(text)
        if block.kind == "text":
            out.append(TextDelta(index=at, text=text))
        else:
            out.append(ThinkingDelta(index=at, text=text))

    def _delta(self, event: dict[str, Any], out: list[StreamEvent]) -> None:
        at = self.index_map.get(event.get("index", -1))
        if at is None:
            return
        block = self.blocks[at]
        delta = event.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta" and block.kind == "text":
            if delta.get("text"):
                self._text(at, delta["text"], out)
        elif kind == "thinking_delta" and block.kind == "thinking":
            if delta.get("thinking"):
                self._text(at, delta["thinking"], out)
        elif kind == "signature_delta" and block.kind == "thinking":
            block.signature = (block.signature or "") + (delta.get("signature") or "")
        elif kind == "input_json_delta" and block.kind == "tool":
            fragment = delta.get("partial_json") or ""
            if fragment:
                block.parts.append(fragment)
                out.append(ToolCallDelta(index=at, arguments=fragment))

    def _stop(self, at: int, out: list[StreamEvent]) -> None:
        block = self.blocks[at]
        if block.done:
            return
        block.done = True
        if block.kind == "text":
            out.append(TextEnd(index=at))
        elif block.kind in ("thinking", "redacted"):
            out.append(ThinkingEnd(index=at, signature=block.signature))
        else:
            arguments, raw = parse_arguments("".join(block.parts))
            block.call = ToolCall(
                id=block.id, name=block.name, arguments=arguments, raw_arguments=raw
            )
            out.append(ToolCallEnd(index=at, tool_call=block.call))

    def message(self) -> AssistantMessage:
        content: list[AssistantContent] = []
        for block in self.blocks:
            text = "".join(block.parts)
            if block.kind == "text":
                content.append(TextContent(text=text))
            elif block.kind == "thinking":
                content.append(ThinkingContent(thinking=text, signature=block.signature))
            elif block.kind == "redacted":
                content.append(
                    ThinkingContent(thinking="", signature=block.signature, redacted=True)
                )
            else:
                assert block.call is not None
                content.append(block.call)
        stop: StopReason = _STOP_REASONS.get(self.stop_reason or "", "stop")
        if stop == "stop" and any(isinstance(b, ToolCall) for b in content):
            stop = "tool_use"
        u = self.usage
        input_tokens = u.get("input_tokens", 0)
        output = u.get("output_tokens", 0)
        cache_read = u.get("cache_read_input_tokens", 0)
        cache_write = u.get("cache_creation_input_tokens", 0)
        usage = Usage(
            input=input_tokens,
            output=output,
            reasoning=u.get("thinking_tokens", 0),
            cache_read=cache_read,
            cache_write=cache_write,
            total_tokens=input_tokens + output + cache_read + cache_write,
        )
        return AssistantMessage(
            content=content,
            stop_reason=stop,
            model=self.model,
            provider=self.provider,
            usage=usage,
            response_id=self.response_id,
        )
