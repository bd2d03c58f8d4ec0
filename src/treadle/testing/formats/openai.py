"""The OpenAI Chat Completions wire format (chunks, usage, errors)."""

from __future__ import annotations

import json
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

# ---------------------------------------------------------------- OpenAI Chat Completions

_OPENAI_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    403: ("invalid_request_error", "permission_denied", "You are not allowed to sample from it."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    408: ("timeout", None, "Request timed out."),
    413: ("invalid_request_error", None, "Request too large."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
    504: ("timeout", None, "Gateway timeout."),
}

OPENAI_STREAM_ERRORS: dict[StreamErrorKind, tuple[str, str | None, str]] = {
    "overloaded": ("server_error", None, "The server is overloaded. Please try again later."),
    "rate_limit": ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
    "server": ("server_error", None, "The server had an error while processing your request."),
}


def openai_error(status: int, message: str | None, model: str) -> dict[str, Any]:
    kind, code, text = _OPENAI_ERRORS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None, "")
    )
    if status == 404 and message is None:
        text = f"The model `{model}` does not exist or you do not have access to it."
    return {
        "error": {
            "message": message or text or f"HTTP {status}",
            "type": kind,
            "param": None,
            "code": code,
        }
    }


def openai_usage(usage: Usage) -> dict[str, Any]:
    prompt = usage.input + usage.cache_read + usage.cache_write
    prompt_details: dict[str, Any] = {"cached_tokens": usage.cache_read, "audio_tokens": 0}
    if usage.cache_write:
        prompt_details["cache_write_tokens"] = usage.cache_write
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output,
        "total_tokens": usage.total_tokens or prompt + usage.output,
        "prompt_tokens_details": prompt_details,
        "completion_tokens_details": {
            "reasoning_tokens": usage.reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    if usage.cost_usd is not None:
        out["cost"] = usage.cost_usd
    return out


class OpenAIChatFormat(Format):
    """``POST /v1/chat/completions``. Thinking travels as ``reasoning_content`` deltas (the
    DeepSeek / vLLM dialect); Chat Completions has no field for a thinking signature."""

    name: FormatName = "openai"
    label = "OpenAI Chat Completions"
    endpoint = re.compile(r"/chat/completions$")
    endpoint_hint = "POST .../chat/completions"
    default_model = "gpt-4o-mini"

    def __init__(self, reasoning_field: str = "reasoning_content") -> None:
        self.reasoning_field = reasoning_field

    def response_id(self, serial: int) -> str:
        return f"chatcmpl-wirefake{serial:06d}"

    def extra_headers(self, ctx: Context) -> dict[str, str]:
        return {"x-request-id": f"req_wirefake{ctx.serial:06d}", "openai-processing-ms": "42"}

    def finish(self, message: AssistantMessage) -> str:
        if message.stop_reason == "length":
            return "length"
        if message.stop_reason == "error":
            return "content_filter"
        if message.stop_reason == "aborted":
            raise self._unsupported(message, 'stop_reason="aborted"')
        if has_calls(message) or message.stop_reason == "tool_use":
            return "tool_calls"
        return "stop"

    def _chunk(self, ctx: Context, rid: str, choices: list[Any], usage: Any = None) -> bytes:
        payload: dict[str, Any] = {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": ctx.model,
            "service_tier": "default",
            "system_fingerprint": "fp_wirefake",
            "choices": choices,
        }
        if ctx.include_usage:
            payload["usage"] = usage
        return sse(payload)

    def _delta(self, ctx: Context, rid: str, delta: dict[str, Any], finish: Any = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return self._chunk(ctx, rid, [choice])

    def stream(self, message: AssistantMessage, ctx: Context) -> Encoded:
        rid = ctx.response_id or self.response_id(ctx.serial)
        first = message.content[0] if message.content else None
        opening: dict[str, Any] = {
            "role": "assistant",
            "content": "" if isinstance(first, TextContent) or first is None else None,
            "refusal": None,
        }
        events = [self._delta(ctx, rid, opening)]
        call_index = 0
        for block in message.content:
            if isinstance(block, TextContent):
                for piece in ctx.pieces(block.text):
                    events.append(self._delta(ctx, rid, {"content": piece}))
            elif isinstance(block, ThinkingContent):
                for piece in ctx.pieces(block.thinking):
                    delta = {"content": None, self.reasoning_field: piece}
                    events.append(self._delta(ctx, rid, delta))
            else:
                head = {
                    "index": call_index,
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": ""},
                }
                events.append(self._delta(ctx, rid, {"tool_calls": [head]}))
                for piece in ctx.pieces(arguments_text(block)):
                    fragment = {"index": call_index, "function": {"arguments": piece}}
                    events.append(self._delta(ctx, rid, {"tool_calls": [fragment]}))
                call_index += 1
        tail = [self._delta(ctx, rid, {}, self.finish(message))]
        if ctx.include_usage:
            tail.append(self._chunk(ctx, rid, [], openai_usage(message.usage)))
        tail.append(b"data: [DONE]\n\n")
        return Encoded(events, tail, self.stream_content_type)

    def whole(self, message: AssistantMessage, ctx: Context) -> bytes:
        texts = [b.text for b in message.content if isinstance(b, TextContent)]
        thinking = [b.thinking for b in message.content if isinstance(b, ThinkingContent)]
        reply: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
        if any(thinking):
            reply[self.reasoning_field] = "".join(thinking)
        calls = [
            {
                "id": b.id,
                "type": "function",
                "function": {"name": b.name, "arguments": arguments_text(b)},
            }
            for b in message.content
            if isinstance(b, ToolCall)
        ]
        if calls:
            reply["tool_calls"] = calls
        reply["refusal"] = None
        reply["annotations"] = []
        payload = {
            "id": ctx.response_id or self.response_id(ctx.serial),
            "object": "chat.completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [
                {
                    "index": 0,
                    "message": reply,
                    "logprobs": None,
                    "finish_reason": self.finish(message),
                }
            ],
            "usage": openai_usage(message.usage),
            "service_tier": "default",
            "system_fingerprint": "fp_wirefake",
        }
        return dumps(payload).encode()

    def error_body(self, status: int, message: str | None, ctx: Context) -> Any:
        return openai_error(status, message, ctx.model)

    def error_bytes(self, payload: Any) -> bytes:
        return (json.dumps(payload, ensure_ascii=False, indent=4) + "\n").encode()

    def error_event(self, kind: StreamErrorKind, message: str | None, ctx: Context) -> bytes:
        error_type, code, text = OPENAI_STREAM_ERRORS[kind]
        error = {"message": message or text, "type": error_type, "param": None, "code": code}
        return sse({"error": error})
