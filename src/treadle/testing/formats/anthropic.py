"""The Anthropic Messages wire format (typed SSE events, pings, errors)."""

from __future__ import annotations

import re
from typing import Any

from ...types import AssistantMessage, TextContent, ThinkingContent, ToolCall, Usage
from .base import (
    Context,
    Encoded,
    Format,
    FormatName,
    StreamErrorKind,
    arguments_text,
    dumps,
    has_calls,
    sse,
)

# ---------------------------------------------------------------- Anthropic Messages

_ANTHROPIC_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "Not found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per "
        "minute. Please reduce the prompt length or the maximum tokens requested, or try "
        "again later.",
    ),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}

_ANTHROPIC_EVENTS: dict[StreamErrorKind, tuple[str, str]] = {
    "overloaded": ("overloaded_error", "Overloaded"),
    "rate_limit": ("rate_limit_error", "Rate limited"),
    "server": ("api_error", "Internal server error"),
}

_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_use": "tool_use"}


class AnthropicFormat(Format):
    """``POST /v1/messages``: message_start, content blocks with their deltas (text, thinking
    with its signature, tool input as JSON fragments), message_delta, message_stop."""

    name: FormatName = "anthropic"
    label = "Anthropic Messages"
    endpoint = re.compile(r"/messages$")
    endpoint_hint = "POST .../v1/messages"
    default_model = "claude-sonnet-4-5"

    def response_id(self, serial: int) -> str:
        return f"msg_wirefake{serial:06d}"

    def extra_headers(self, ctx: Context) -> dict[str, str]:
        return {"request-id": f"req_wirefake{ctx.serial:06d}"}

    def finish(self, message: AssistantMessage) -> str:
        if message.stop_reason in ("error", "aborted"):
            raise self._unsupported(message, f"stop_reason={message.stop_reason!r}")
        if message.stop_reason == "stop" and has_calls(message):
            return "tool_use"
        return _ANTHROPIC_STOP[message.stop_reason]

    def _usage(self, usage: Usage, *, start: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "input_tokens": usage.input,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
            "cache_creation": {  # the writes by retention, as the API reports them
                "ephemeral_5m_input_tokens": usage.cache_write - usage.cache_write_long,
                "ephemeral_1h_input_tokens": usage.cache_write_long,
            },
            "output_tokens": min(1, usage.output) if start else usage.output,
        }
        if start:
            out["service_tier"] = "standard"
        elif usage.reasoning:
            out["output_tokens_details"] = {"thinking_tokens": usage.reasoning}
        return out

    def stream(self, message: AssistantMessage, ctx: Context) -> Encoded:
        finish = self.finish(message)
        start = {
            "type": "message_start",
            "message": {
                "id": ctx.response_id or self.response_id(ctx.serial),
                "type": "message",
                "role": "assistant",
                "model": ctx.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": self._usage(message.usage, start=True),
            },
        }
        events = [sse(start, "message_start")]
        for index, block in enumerate(message.content):
            events.extend(self._block(index, block, ctx))
            if index == 0:
                events.append(sse('{"type": "ping"}', "ping"))
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": finish, "stop_sequence": None},
            "usage": self._usage(message.usage, start=False),
        }
        tail = [sse(delta, "message_delta"), sse({"type": "message_stop"}, "message_stop")]
        return Encoded(events, tail, self.stream_content_type)

    def _block(
        self, index: int, block: TextContent | ThinkingContent | ToolCall, ctx: Context
    ) -> list[bytes]:
        def start(content_block: dict[str, Any]) -> bytes:
            payload = {
                "type": "content_block_start",
                "index": index,
                "content_block": content_block,
            }
            return sse(payload, "content_block_start")

        def delta(body: dict[str, Any]) -> bytes:
            payload = {"type": "content_block_delta", "index": index, "delta": body}
            return sse(payload, "content_block_delta")

        out: list[bytes] = []
        if isinstance(block, TextContent):
            out.append(start({"type": "text", "text": ""}))
            out.extend(delta({"type": "text_delta", "text": p}) for p in ctx.pieces(block.text))
        elif isinstance(block, ThinkingContent) and block.redacted:
            out.append(start({"type": "redacted_thinking", "data": block.signature or ""}))
        elif isinstance(block, ThinkingContent):
            out.append(start({"type": "thinking", "thinking": "", "signature": ""}))
            out.extend(
                delta({"type": "thinking_delta", "thinking": p}) for p in ctx.pieces(block.thinking)
            )
            if block.signature:
                out.append(delta({"type": "signature_delta", "signature": block.signature}))
        else:
            out.append(start({"type": "tool_use", "id": block.id, "name": block.name, "input": {}}))
            out.append(delta({"type": "input_json_delta", "partial_json": ""}))
            out.extend(
                delta({"type": "input_json_delta", "partial_json": p})
                for p in ctx.pieces(arguments_text(block))
            )
        out.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        return out

    def whole(self, message: AssistantMessage, ctx: Context) -> bytes:
        content: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextContent):
                content.append({"type": "text", "text": block.text})
            elif isinstance(block, ThinkingContent) and block.redacted:
                content.append({"type": "redacted_thinking", "data": block.signature or ""})
            elif isinstance(block, ThinkingContent):
                content.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
            else:
                content.append(
                    {
                        "type": "tool_use",
                        "id": block.id,
                        "name": block.name,
                        "input": block.arguments,
                    }
                )
        usage = self._usage(message.usage, start=False)
        payload = {
            "id": ctx.response_id or self.response_id(ctx.serial),
            "type": "message",
            "role": "assistant",
            "model": ctx.model,
            "content": content,
            "stop_reason": self.finish(message),
            "stop_sequence": None,
            "usage": usage,
        }
        return dumps(payload).encode()

    def error_body(self, status: int, message: str | None, ctx: Context) -> Any:
        kind, text = _ANTHROPIC_ERRORS.get(
            status, ("api_error" if status >= 500 else "invalid_request_error", f"HTTP {status}")
        )
        if status == 404 and message is None:
            text = f"model: {ctx.model}"
        return {
            "type": "error",
            "error": {"type": kind, "message": message or text},
            "request_id": f"req_wirefake{ctx.serial:06d}",
        }

    def error_event(self, kind: StreamErrorKind, message: str | None, ctx: Context) -> bytes:
        error_type, text = _ANTHROPIC_EVENTS[kind]
        error = {"details": None, "type": error_type, "message": message or text}
        return sse({"type": "error", "error": error}, "error")
