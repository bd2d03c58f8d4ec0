"""The Ollama chat wire format (NDJSON lines, done markers, errors)."""

from __future__ import annotations

import re
import time
from typing import Any

from ...types import AssistantMessage, TextContent, ThinkingContent, ToolCall
from .base import Context, Encoded, Format, FormatName, StreamErrorKind, dumps

# ---------------------------------------------------------------- Ollama

_OLLAMA_EVENTS: dict[StreamErrorKind, str] = {
    "overloaded": "server overloaded, please try again later",
    "rate_limit": "too many requests, please try again later",
    "server": "model runner has unexpectedly stopped",
}


class OllamaFormat(Format):
    """``POST /api/chat``: newline-delimited JSON, one partial message per line, then a
    ``done: true`` line with ``done_reason`` and the token counts."""

    name: FormatName = "ollama"
    label = "Ollama"
    endpoint = re.compile(r"/api/chat$")
    endpoint_hint = "POST .../api/chat"
    default_model = "llama3.2"
    stream_content_type = "application/x-ndjson"
    json_content_type = "application/json; charset=utf-8"

    def is_stream(self, url_path: str, query: str, body: Any) -> bool:
        return not (isinstance(body, dict) and body.get("stream") is False)

    def response_id(self, serial: int) -> str:
        return ""

    def finish(self, message: AssistantMessage) -> str:
        if message.stop_reason in ("error", "aborted"):
            raise self._unsupported(message, f"stop_reason={message.stop_reason!r}")
        return "length" if message.stop_reason == "length" else "stop"

    def _stamp(self, ctx: Context, at: int) -> str:
        seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ctx.created))
        return f"{seconds}.{at:09d}Z"

    def _line(self, ctx: Context, at: int, message: dict[str, Any]) -> dict[str, Any]:
        return {"model": ctx.model, "created_at": self._stamp(ctx, at), "message": message}

    def _done(self, message: AssistantMessage, ctx: Context, at: int) -> dict[str, Any]:
        return {
            "done": True,
            "done_reason": self.finish(message),
            "total_duration": 123456789,
            "load_duration": 1234567,
            "prompt_eval_count": message.usage.input,
            "prompt_eval_duration": 2345678,
            "eval_count": message.usage.output,
            "eval_duration": 34567890,
        }

    @staticmethod
    def _call(block: ToolCall, index: int) -> dict[str, Any]:
        arguments: Any = block.raw_arguments if block.raw_arguments is not None else block.arguments
        return {
            "id": block.id,
            "function": {"index": index, "name": block.name, "arguments": arguments},
        }

    def stream(self, message: AssistantMessage, ctx: Context) -> Encoded:
        lines: list[dict[str, Any]] = []
        calls = 0
        for block in message.content:
            if isinstance(block, TextContent):
                for piece in ctx.pieces(block.text):
                    lines.append({"role": "assistant", "content": piece})
            elif isinstance(block, ThinkingContent):
                for piece in ctx.pieces(block.thinking):
                    lines.append({"role": "assistant", "content": "", "thinking": piece})
            else:
                call = self._call(block, calls)
                lines.append({"role": "assistant", "content": "", "tool_calls": [call]})
                calls += 1
        events = [
            (dumps({**self._line(ctx, at, body), "done": False}) + "\n").encode()
            for at, body in enumerate(lines)
        ]
        last = {
            **self._line(ctx, len(lines), {"role": "assistant", "content": ""}),
            **self._done(message, ctx, len(lines)),
        }
        return Encoded(events, [(dumps(last) + "\n").encode()], self.stream_content_type)

    def whole(self, message: AssistantMessage, ctx: Context) -> bytes:
        reply: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(b.text for b in message.content if isinstance(b, TextContent)),
        }
        thinking = "".join(b.thinking for b in message.content if isinstance(b, ThinkingContent))
        if thinking:
            reply["thinking"] = thinking
        calls = [b for b in message.content if isinstance(b, ToolCall)]
        if calls:
            reply["tool_calls"] = [self._call(b, i) for i, b in enumerate(calls)]
        payload = {**self._line(ctx, 0, reply), **self._done(message, ctx, 0)}
        return (dumps(payload) + "\n").encode()

    def error_body(self, status: int, message: str | None, ctx: Context) -> Any:
        defaults = {
            400: "invalid request",
            401: "unauthorized",
            404: f"model '{ctx.model}' not found",
            429: "too many requests",
            500: "model runner has unexpectedly stopped",
            503: "server busy, please try again. maximum pending requests exceeded",
        }
        return {"error": message or defaults.get(status, f"HTTP {status}")}

    def error_event(self, kind: StreamErrorKind, message: str | None, ctx: Context) -> bytes:
        return (dumps({"error": message or _OLLAMA_EVENTS[kind]}) + "\n").encode()
