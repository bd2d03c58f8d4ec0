"""Anthropic Messages streams (and whole responses) into stream events."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_json

from ..types.usage import StopReason
from ._assemble import Assembler, json_object, usage
from ._citations import from_anthropic
from ._errors import classify
from .base import StreamEvent

_USAGE = "input_tokens output_tokens cache_read_input_tokens cache_creation_input_tokens".split()
# content_block_delta types: the kind of block each feeds, and the field it comes in
_DELTAS = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("thinking", "signature"),
    "input_json_delta": ("tool", "partial_json"),
}


class StreamState(Assembler):
    """Anthropic stream events into the shared assembler's calls."""

    stops: dict[str, StopReason] = {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "max_tokens": "length",
        "model_context_window_exceeded": "length",
        "tool_use": "tool_use",
        "refusal": "stop",
        "pause_turn": "stop",
    }
    unfinished = "the stream ended before message_stop"

    def __init__(self, provider: str, model: str) -> None:
        super().__init__(provider, model)
        self.usage: dict[str, int] = {}
        self.totals = usage(0, 0)
        self.index_map: dict[int, int] = {}  # Anthropic block index -> treadle content index

    def whole(self, payload: Any) -> list[Any]:
        """A non-streamed Message as the stream events that would have produced it."""
        message = json_object(payload, self.provider)
        events: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
        for index, block in enumerate(message.get("content") or []):
            events.append({"type": "content_block_start", "index": index, "content_block": block})
            events.append({"type": "content_block_stop", "index": index})
        stop = {"stop_reason": message.get("stop_reason")}
        return [*events, {"type": "message_delta", "delta": stop}, {"type": "message_stop"}]

    def feed(self, event: dict[str, Any]) -> list[StreamEvent]:
        kind = event.get("type")
        if kind == "error":
            raise classify(0, event, provider=self.provider, fallback="stream error")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            self.response_id = message.get("id")
            self._usage(message.get("usage"))
        if kind not in ("ping", None):
            self.start()
        if kind == "content_block_start":
            self._open(event)
        elif kind == "content_block_delta":
            self._delta(event)
        elif kind == "content_block_stop":
            at = self.index_map.get(event.get("index", -1))
            if at is not None:
                self.close(at)
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self.reason = delta["stop_reason"]
            self._usage(event.get("usage"))
        elif kind == "message_stop":
            self.end_all()
            self.complete = True
        return self.take()

    def _usage(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            return
        u = self.usage
        for key in _USAGE:
            if isinstance(raw.get(key), int):
                u[key] = raw[key]
        details = raw.get("output_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("thinking_tokens"), int):
            u["thinking_tokens"] = details["thinking_tokens"]
        written = raw.get("cache_creation")  # the writes by retention: 5 minutes, 1 hour
        if isinstance(written, dict) and isinstance(written.get("ephemeral_1h_input_tokens"), int):
            u["long_writes"] = written["ephemeral_1h_input_tokens"]
        read, write = u.get("cache_read_input_tokens", 0), u.get("cache_creation_input_tokens", 0)
        prompt = u.get("input_tokens", 0) + read + write  # input_tokens excludes the cache
        out, thinking = u.get("output_tokens", 0), u.get("thinking_tokens", 0)
        self.totals = usage(
            prompt,
            out,
            cache_read=read,
            cache_write=write,
            cache_write_long=u.get("long_writes", 0),
            reasoning=thinking,
        )

    def _open(self, event: dict[str, Any]) -> None:
        block = event.get("content_block") or {}
        kind = block.get("type")
        if kind in ("text", "thinking"):
            signature = (block.get("signature") or None) if kind == "thinking" else None
            at = self.open(kind, signature=signature)
            for cited in block.get("citations") or () if kind == "text" else ():
                self._cite(at, cited)  # a non-streamed block carries its citations here
            if block.get(kind):  # the text, or the thinking
                self.add(at, block[kind])
        elif kind == "redacted_thinking":
            at = self.open("thinking", signature=block.get("data"), redacted=True)
        elif kind == "tool_use":
            at = self.open("tool", id=block.get("id", ""), name=block.get("name", ""))
            if block.get("input"):  # a non-streamed block carries its whole input here
                self.add(at, to_json(block["input"]).decode())
        else:
            return  # server tool blocks and other kinds have no treadle content type
        self.index_map[event.get("index", at)] = at

    def _delta(self, event: dict[str, Any]) -> None:
        at = self.index_map.get(event.get("index", -1))
        if at is None:
            return
        block = self.blocks[at]
        delta = event.get("delta") or {}
        if delta.get("type") == "citations_delta" and block.kind == "text":
            self._cite(at, delta.get("citation"))
            return
        kind, field = _DELTAS.get(str(delta.get("type")), ("", ""))
        if kind != block.kind or block.redacted:
            return
        if field == "signature":
            block.signature = (block.signature or "") + (delta.get("signature") or "")
        elif delta.get(field):
            self.add(at, delta[field])

    def _cite(self, at: int, raw: Any) -> None:
        if isinstance(raw, dict):
            self.cite(at, from_anthropic(raw))
