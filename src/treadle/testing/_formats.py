"""Wire encoders for the fakes: an AssistantMessage as the bytes a provider would send.

One encoder per API. Each turns a message into the events of a streamed response (split in
``events``, which a truncation may cut, and ``tail``, the terminal events that say the
response is complete) or into one non-streamed JSON body, and knows the API's error shapes
(HTTP error bodies and mid-stream error events). The layouts follow the recordings in
``shared/fixtures/wire``: field order, ``usage: null`` placeholders, pings, sequence numbers,
Gemini's ``\\r\\n\\r\\n`` separators and so on.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..types import AssistantMessage, TextContent, ThinkingContent, ToolCall, Usage

FormatName = Literal["openai", "anthropic", "responses", "gemini", "ollama"]
StreamErrorKind = Literal["overloaded", "rate_limit", "server"]

_TOKEN = re.compile(r"\s*(?:\w+|[^\w\s]+)|\s+")


def pieces(text: str, size: int | None) -> list[str]:
    """``text`` cut into deltas: word-like tokens (``"Hello"``, ``" world"``, ``"!"``), the
    way models stream, or fixed ``size``-character pieces. Joined, they give ``text``."""
    if not text:
        return []
    if size:
        return [text[i : i + size] for i in range(0, len(text), size)]
    return _TOKEN.findall(text)


def dumps(value: Any) -> str:
    """Compact JSON with raw UTF-8, as OpenAI and Anthropic send it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def google_dumps(value: Any) -> str:
    """Gemini's JSON layout: ``": "`` after keys, ``","`` between items."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ": "))


def sse(data: Any, event: str | None = None, *, sep: str = "\n\n") -> bytes:
    text = data if isinstance(data, str) else dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}{sep}".encode()


def arguments_text(call: ToolCall) -> str:
    return call.raw_arguments if call.raw_arguments is not None else dumps(call.arguments)


def number(value: float) -> str:
    """``2``, ``0.5``, ``0.001``: a plain decimal, never an exponent."""
    if value == int(value):
        return str(int(value))
    return f"{value:.6f}".rstrip("0").rstrip(".")


@dataclass
class Context:
    """What an encoder needs besides the message."""

    model: str
    response_id: str | None
    serial: int
    chunk_size: int | None = None
    include_usage: bool = True
    query: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def pieces(self, text: str) -> list[str]:
        return pieces(text, self.chunk_size)


@dataclass
class Encoded:
    """A streamed response: ``events`` then ``tail`` (the events that complete it)."""

    events: list[bytes]
    tail: list[bytes]
    content_type: str


class Format:
    """The wire format of one API."""

    name: FormatName
    label: str
    endpoint: re.Pattern[str]
    endpoint_hint: str
    default_model: str
    reasoning_field = "reasoning_content"  # only Chat Completions uses it
    stream_content_type = "text/event-stream; charset=utf-8"
    json_content_type = "application/json"

    def is_stream(self, url_path: str, query: str, body: Any) -> bool:
        return isinstance(body, dict) and body.get("stream") is True

    def model_of(self, url_path: str, body: Any) -> str:
        if isinstance(body, dict) and isinstance(body.get("model"), str) and body["model"]:
            return str(body["model"])
        return self.default_model

    def response_id(self, serial: int) -> str:
        return f"resp_wirefake{serial:06d}"

    def check(self, message: AssistantMessage) -> None:
        """Raise ValueError when ``message`` cannot be said in this format."""
        self.finish(message)

    def finish(self, message: AssistantMessage) -> str:
        raise NotImplementedError

    def stream(self, message: AssistantMessage, ctx: Context) -> Encoded:
        raise NotImplementedError

    def whole(self, message: AssistantMessage, ctx: Context) -> bytes:
        raise NotImplementedError

    def error_body(self, status: int, message: str | None, ctx: Context) -> Any:
        raise NotImplementedError

    def error_event(self, kind: StreamErrorKind, message: str | None, ctx: Context) -> bytes:
        raise NotImplementedError

    def extra_headers(self, ctx: Context) -> dict[str, str]:
        return {}

    def error_bytes(self, payload: Any) -> bytes:
        """An HTTP error body laid out as the API sends it."""
        return dumps(payload).encode()

    def _unsupported(self, message: AssistantMessage, what: str) -> ValueError:
        return ValueError(
            f"a {self.label} response cannot carry {what} (message {message.text[:40]!r}); "
            "use Fail or StreamError for failures"
        )


def _has_calls(message: AssistantMessage) -> bool:
    return any(isinstance(block, ToolCall) for block in message.content)


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

_OPENAI_EVENTS: dict[StreamErrorKind, tuple[str, str | None, str]] = {
    "overloaded": ("server_error", None, "The server is overloaded. Please try again later."),
    "rate_limit": ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
    "server": ("server_error", None, "The server had an error while processing your request."),
}


def _openai_error(status: int, message: str | None, model: str) -> dict[str, Any]:
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
        if _has_calls(message) or message.stop_reason == "tool_use":
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
        return _openai_error(status, message, ctx.model)

    def error_bytes(self, payload: Any) -> bytes:
        return (json.dumps(payload, ensure_ascii=False, indent=4) + "\n").encode()

    def error_event(self, kind: StreamErrorKind, message: str | None, ctx: Context) -> bytes:
        error_type, code, text = _OPENAI_EVENTS[kind]
        error = {"message": message or text, "type": error_type, "param": None, "code": code}
        return sse({"error": error})


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
        if message.stop_reason == "stop" and _has_calls(message):
            return "tool_use"
        return _ANTHROPIC_STOP[message.stop_reason]

    def _usage(self, usage: Usage, *, start: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "input_tokens": usage.input,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
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


# ---------------------------------------------------------------- OpenAI Responses


def _reasoning_ids(block: ThinkingContent, serial: int, index: int) -> tuple[str, str | None]:
    """The item id and encrypted content for a thinking block. A signature in the adapter's
    own form (``{"type": "reasoning", "id", "encrypted_content"}``) is unpacked; any other
    signature is sent as the encrypted content."""
    if block.signature:
        try:
            data = json.loads(block.signature)
        except ValueError:
            data = None
        if isinstance(data, dict) and data.get("type") == "reasoning":
            item_id = data.get("id") if isinstance(data.get("id"), str) else None
            encrypted = data.get("encrypted_content")
            return (
                item_id or f"rs_wirefake{serial:06d}_{index}",
                encrypted if isinstance(encrypted, str) else None,
            )
        return f"rs_wirefake{serial:06d}_{index}", block.signature
    return f"rs_wirefake{serial:06d}_{index}", None


class ResponsesFormat(Format):
    """``POST /v1/responses``: typed events with sequence numbers; reasoning items with a
    summary, message items with output_text parts, function_call items with argument deltas."""

    name: FormatName = "responses"
    label = "OpenAI Responses"
    endpoint = re.compile(r"/responses$")
    endpoint_hint = "POST .../v1/responses"
    default_model = "gpt-4o-mini"

    def extra_headers(self, ctx: Context) -> dict[str, str]:
        return {"x-request-id": f"req_wirefake{ctx.serial:06d}"}

    def finish(self, message: AssistantMessage) -> str:
        if message.stop_reason in ("error", "aborted"):
            raise self._unsupported(message, f"stop_reason={message.stop_reason!r}")
        return "incomplete" if message.stop_reason == "length" else "completed"

    def _usage(self, usage: Usage) -> dict[str, Any]:
        prompt = usage.input + usage.cache_read
        return {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": usage.cache_read},
            "output_tokens": usage.output,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning},
            "total_tokens": usage.total_tokens or prompt + usage.output,
        }

    def _response(self, ctx: Context, status: str, output: list[Any], usage: Any) -> dict[str, Any]:
        return {
            "id": ctx.response_id or self.response_id(ctx.serial),
            "object": "response",
            "created_at": ctx.created,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": (
                {"reason": "max_output_tokens"} if status == "incomplete" else None
            ),
            "instructions": None,
            "max_output_tokens": None,
            "model": ctx.model,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": False,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": {},
        }

    def _items(self, message: AssistantMessage, ctx: Context) -> list[dict[str, Any]]:
        """The finished output items, one per content block."""
        items: list[dict[str, Any]] = []
        for index, block in enumerate(message.content):
            if isinstance(block, ThinkingContent):
                item_id, encrypted = _reasoning_ids(block, ctx.serial, index)
                item: dict[str, Any] = {"id": item_id, "type": "reasoning"}
                if encrypted is not None:
                    item["encrypted_content"] = encrypted
                item["summary"] = (
                    [{"type": "summary_text", "text": block.thinking}] if block.thinking else []
                )
                items.append(item)
            elif isinstance(block, TextContent):
                items.append(
                    {
                        "id": f"msg_wirefake{ctx.serial:06d}_{index}",
                        "type": "message",
                        "status": "completed",
                        "content": [
                            {
                                "type": "output_text",
                                "annotations": [],
                                "logprobs": [],
                                "text": block.text,
                            }
                        ],
                        "role": "assistant",
                    }
                )
            else:
                items.append(
                    {
                        "id": f"fc_wirefake{ctx.serial:06d}_{index}",
                        "type": "function_call",
                        "status": "completed",
                        "arguments": arguments_text(block),
                        "call_id": block.id,
                        "name": block.name,
                    }
                )
        return items

    def stream(self, message: AssistantMessage, ctx: Context) -> Encoded:
        status = self.finish(message)
        seq = 0

        def event(kind: str, **fields: Any) -> bytes:
            nonlocal seq
            payload = {"type": kind, "sequence_number": seq, **fields}
            seq += 1
            return sse(payload, kind)

        events = [
            event("response.created", response=self._response(ctx, "in_progress", [], None)),
            event("response.in_progress", response=self._response(ctx, "in_progress", [], None)),
        ]
        items = self._items(message, ctx)
        for at, (block, item) in enumerate(zip(message.content, items, strict=True)):
            where = {"item_id": item["id"], "output_index": at}
            if isinstance(block, ThinkingContent):
                added = {**item, "summary": []}
                events.append(event("response.output_item.added", output_index=at, item=added))
                if block.thinking:
                    summary_part = {"type": "summary_text", "text": ""}
                    events.append(
                        event(
                            "response.reasoning_summary_part.added",
                            **where,
                            summary_index=0,
                            part=summary_part,
                        )
                    )
                    for piece in ctx.pieces(block.thinking):
                        events.append(
                            event(
                                "response.reasoning_summary_text.delta",
                                **where,
                                summary_index=0,
                                delta=piece,
                            )
                        )
                    events.append(
                        event(
                            "response.reasoning_summary_text.done",
                            **where,
                            summary_index=0,
                            text=block.thinking,
                        )
                    )
                    done_part = {"type": "summary_text", "text": block.thinking}
                    events.append(
                        event(
                            "response.reasoning_summary_part.done",
                            **where,
                            summary_index=0,
                            part=done_part,
                        )
                    )
            elif isinstance(block, TextContent):
                added = {**item, "status": "in_progress", "content": []}
                events.append(event("response.output_item.added", output_index=at, item=added))
                part: dict[str, Any] = {
                    "type": "output_text",
                    "annotations": [],
                    "logprobs": [],
                    "text": "",
                }
                events.append(
                    event("response.content_part.added", **where, content_index=0, part=part)
                )
                for piece in ctx.pieces(block.text):
                    events.append(
                        event(
                            "response.output_text.delta",
                            **where,
                            content_index=0,
                            delta=piece,
                            logprobs=[],
                        )
                    )
                events.append(
                    event(
                        "response.output_text.done",
                        **where,
                        content_index=0,
                        text=block.text,
                        logprobs=[],
                    )
                )
                events.append(
                    event(
                        "response.content_part.done",
                        **where,
                        content_index=0,
                        part=item["content"][0],
                    )
                )
            else:
                added = {**item, "status": "in_progress", "arguments": ""}
                events.append(event("response.output_item.added", output_index=at, item=added))
                for piece in ctx.pieces(item["arguments"]):
                    events.append(
                        event("response.function_call_arguments.delta", **where, delta=piece)
                    )
                events.append(
                    event(
                        "response.function_call_arguments.done",
                        **where,
                        arguments=item["arguments"],
                    )
                )
            events.append(event("response.output_item.done", output_index=at, item=item))
        final = self._response(ctx, status, items, self._usage(message.usage))
        tail = [event(f"response.{status}", response=final)]
        return Encoded(events, tail, self.stream_content_type)

    def whole(self, message: AssistantMessage, ctx: Context) -> bytes:
        status = self.finish(message)
        payload = self._response(ctx, status, self._items(message, ctx), self._usage(message.usage))
        return dumps(payload).encode()

    def error_body(self, status: int, message: str | None, ctx: Context) -> Any:
        return _openai_error(status, message, ctx.model)

    def error_bytes(self, payload: Any) -> bytes:
        return (json.dumps(payload, ensure_ascii=False, indent=4) + "\n").encode()

    def error_event(self, kind: StreamErrorKind, message: str | None, ctx: Context) -> bytes:
        error_type, code, text = _OPENAI_EVENTS[kind]
        payload = {
            "type": "error",
            "code": code or error_type,
            "message": message or text,
            "param": None,
            "sequence_number": 0,
        }
        return sse(payload, "error")


# ---------------------------------------------------------------- Gemini

_GOOGLE_STATUS = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: ("UNAUTHENTICATED", "Request had invalid authentication credentials."),
    403: ("PERMISSION_DENIED", "The caller does not have permission."),
    404: ("NOT_FOUND", "Requested entity was not found."),
    429: (
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    500: (
        "INTERNAL",
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
    ),
    503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
    504: ("DEADLINE_EXCEEDED", "Deadline expired before operation could complete."),
}

_GOOGLE_EVENTS: dict[StreamErrorKind, int] = {"overloaded": 503, "rate_limit": 429, "server": 500}
_GEMINI_MODEL = re.compile(r"/((?:models|tunedModels)/[^/:]+):")


class GeminiFormat(Format):
    """``models/{model}:streamGenerateContent?alt=sse`` (SSE with ``\\r\\n\\r\\n``), the same
    without ``alt=sse`` (one JSON array, streamed), and ``:generateContent``.

    Signatures follow the adapter's convention: an empty ThinkingContent carrying a signature
    puts it on the next part (``thoughtSignature``); a thinking block with text and a signature
    carries it on its first part (and comes back as a carrier plus the thinking)."""

    name: FormatName = "gemini"
    label = "Gemini"
    endpoint = re.compile(r":(?:stream)?[gG]enerateContent$")
    endpoint_hint = "POST .../models/{model}:streamGenerateContent"
    default_model = "gemini-2.5-flash"
    stream_content_type = "text/event-stream"
    json_content_type = "application/json; charset=UTF-8"

    def is_stream(self, url_path: str, query: str, body: Any) -> bool:
        return url_path.endswith(":streamGenerateContent")

    def model_of(self, url_path: str, body: Any) -> str:
        found = _GEMINI_MODEL.search(url_path)
        if found is None:
            return self.default_model
        return found.group(1).removeprefix("models/")

    def response_id(self, serial: int) -> str:
        return f"wirefake{serial:06d}"

    def check(self, message: AssistantMessage) -> None:
        self.finish(message)
        for block in message.content:
            if isinstance(block, ToolCall) and block.raw_arguments is not None:
                raise self._unsupported(message, "raw (invalid JSON) tool arguments")

    def finish(self, message: AssistantMessage) -> str:
        if message.stop_reason == "aborted":
            raise self._unsupported(message, 'stop_reason="aborted"')
        if message.stop_reason == "length":
            return "MAX_TOKENS"
        if message.stop_reason == "error":
            return "SAFETY"
        return "STOP"

    def _usage(self, usage: Usage, *, final: bool) -> dict[str, Any]:
        prompt = usage.input + usage.cache_read
        if not final:
            return {"promptTokenCount": prompt, "totalTokenCount": prompt}
        candidates = max(0, usage.output - usage.reasoning)
        out: dict[str, Any] = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": candidates,
            "totalTokenCount": usage.total_tokens or prompt + candidates + usage.reasoning,
        }
        if usage.cache_read:
            out["cachedContentTokenCount"] = usage.cache_read
        out["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": prompt}]
        if usage.reasoning:
            out["thoughtsTokenCount"] = usage.reasoning
        return out

    def _parts(self, message: AssistantMessage, ctx: Context, *, split: bool) -> list[Any]:
        """The parts, one per delta (``split``) or one per block."""
        parts: list[dict[str, Any]] = []
        pending: str | None = None

        def emit(part: dict[str, Any], signature: str | None = None) -> None:
            nonlocal pending
            signature = signature or pending
            pending = None
            if signature:
                part["thoughtSignature"] = signature
            parts.append(part)

        for block in message.content:
            if isinstance(block, ThinkingContent):
                if block.redacted:
                    continue
                if not block.thinking:
                    if block.signature:
                        if pending:
                            emit({"text": ""})
                        pending = block.signature
                    continue
                texts = ctx.pieces(block.thinking) if split else [block.thinking]
                for i, text in enumerate(texts):
                    emit({"text": text, "thought": True}, block.signature if i == 0 else None)
            elif isinstance(block, TextContent):
                texts = ctx.pieces(block.text) if split else [block.text]
                for text in texts or ([""] if pending else []):
                    emit({"text": text})
            else:
                emit(
                    {"functionCall": {"id": block.id, "name": block.name, "args": block.arguments}}
                )
        if pending:
            emit({"text": ""})
        return parts

    def _chunk(
        self, ctx: Context, parts: list[Any], usage: dict[str, Any], finish: str | None = None
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        if finish is not None:
            candidate["finishReason"] = finish
        candidate["index"] = 0
        return {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": ctx.model,
            "responseId": ctx.response_id or self.response_id(ctx.serial),
        }

    def stream(self, message: AssistantMessage, ctx: Context) -> Encoded:
        """SSE with ``alt=sse``; without it, one JSON array whose elements stream."""
        partial = self._usage(message.usage, final=False)
        chunks = [
            self._chunk(ctx, [part], partial) for part in self._parts(message, ctx, split=True)
        ]
        final = self._chunk(
            ctx, [{"text": ""}], self._usage(message.usage, final=True), self.finish(message)
        )
        if "alt=sse" in ctx.query:
            events = [sse(google_dumps(c), sep="\r\n\r\n") for c in chunks]
            return Encoded(
                events, [sse(google_dumps(final), sep="\r\n\r\n")], self.stream_content_type
            )
        texts = [google_dumps(c) for c in chunks]
        array = [("[" if i == 0 else ",\r\n") + t for i, t in enumerate(texts)]
        last = ("[" if not texts else ",\r\n") + google_dumps(final) + "]"
        return Encoded([e.encode() for e in array], [last.encode()], self.json_content_type)

    def whole(self, message: AssistantMessage, ctx: Context) -> bytes:
        parts = self._parts(message, ctx, split=False)
        payload = self._chunk(
            ctx, parts, self._usage(message.usage, final=True), self.finish(message)
        )
        return google_dumps(payload).encode()

    def error_body(self, status: int, message: str | None, ctx: Context) -> Any:
        code, text = _GOOGLE_STATUS.get(
            status, ("INTERNAL" if status >= 500 else "FAILED_PRECONDITION", f"HTTP {status}")
        )
        if status == 404 and message is None:
            text = (
                f"models/{ctx.model} is not found for API version v1beta, or is not supported "
                "for generateContent."
            )
        return {"error": {"code": status, "message": message or text, "status": code}}

    def error_bytes(self, payload: Any) -> bytes:
        return (json.dumps(payload, ensure_ascii=False, indent=2) + "\n").encode()

    def error_event(self, kind: StreamErrorKind, message: str | None, ctx: Context) -> bytes:
        body = self.error_body(_GOOGLE_EVENTS[kind], message, ctx)
        return sse(google_dumps(body), sep="\r\n\r\n")


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


FORMATS: dict[str, Callable[[], Format]] = {
    "openai": OpenAIChatFormat,
    "anthropic": AnthropicFormat,
    "responses": ResponsesFormat,
    "gemini": GeminiFormat,
    "ollama": OllamaFormat,
}
ALIASES = {
    "openai_chat": "openai",
    "openai-chat": "openai",
    "chat": "openai",
    "openai_responses": "responses",
    "openai-responses": "responses",
    "google": "gemini",
}


def get_format(name: str) -> Format:
    key = ALIASES.get(name, name)
    factory = FORMATS.get(key)
    if factory is None:
        choices = ", ".join(sorted(FORMATS))
        raise ValueError(f"unknown wire format {name!r}: use one of {choices}")
    return factory()
