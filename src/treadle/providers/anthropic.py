"""Anthropic Messages API adapter: ``POST {base_url}/v1/messages``.

Streams server-sent events by default (``stream=False`` uses the plain JSON response and
synthesises the same event sequence from it).

Mapping notes:

- ``stop_reason``: ``end_turn`` / ``stop_sequence`` -> ``"stop"``, ``max_tokens`` and
  ``model_context_window_exceeded`` -> ``"length"``, ``tool_use`` -> ``"tool_use"``.
  ``refusal`` and ``pause_turn`` map to ``"stop"``: the model ended its turn on purpose and
  whatever it said is the answer (there is no transport failure to retry).
- Thinking blocks keep their ``signature``; ``redacted_thinking`` becomes
  ``ThinkingContent(thinking="", redacted=True, signature=<data>)`` so it goes back to
  Anthropic unchanged. Thinking from any other provider is sent as text or dropped.
- Server-side tool blocks (``server_tool_use``, ``*_tool_result``) have no treadle content
  type and are left out of the message.
- Usage: Anthropic's ``input_tokens`` already excludes cached tokens, so it maps to
  ``Usage.input`` directly; ``cache_read_input_tokens`` / ``cache_creation_input_tokens``
  map to ``cache_read`` / ``cache_write``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from pydantic_core import from_json, to_json

from ..cancellation import CancellationToken
from ..types import (
    AssistantContent,
    AssistantMessage,
    ExtensionMessage,
    ImageContent,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ..types.messages import AgentMessage
from ..types.usage import StopReason
from ._convert import safe_tool_call_id, same_origin, thinking_as_text
from ._http import HTTPAdapter, classify, env_key
from .base import (
    ModelRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    StreamStart,
    TextEnd,
    TextStart,
    ThinkingEnd,
    ThinkingStart,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
# Sent with requests whose ``prompt_cache="long"`` asks for the 1-hour cache TTL.
EXTENDED_CACHE_BETA = "extended-cache-ttl-2025-04-11"

DEFAULT_THINKING_BUDGETS: dict[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
}
_MIN_THINKING_BUDGET = 1024

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_use",
    "refusal": "stop",
    "pause_turn": "stop",
}


class Anthropic(HTTPAdapter):
    """Claude models through the Messages API.

    ``max_tokens`` is the default answer budget (Anthropic requires one). When thinking is on
    and ``max_tokens`` would not leave room beyond the thinking budget, the budget is added on
    top of it. ``thinking_budgets`` overrides the token budget per thinking level.
    """

    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = True,
        max_tokens: int = 8192,
        thinking_budgets: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(
            model,
            base_url=base_url or DEFAULT_BASE_URL,
            api_key=api_key,
            headers=headers,
            client=client,
            timeout=timeout,
        )
        self.streaming = stream
        self.max_tokens = max_tokens
        self.thinking_budgets = {**DEFAULT_THINKING_BUDGETS, **(thinking_budgets or {})}

    # ---- HTTP ----

    def _key(self) -> str:
        key = self._api_key or env_key("ANTHROPIC_API_KEY")
        if not key:
            raise ProviderError(
                "auth",
                "no Anthropic API key: set the ANTHROPIC_API_KEY environment variable "
                "or pass api_key=",
                provider=self.name,
            )
        return key

    def _headers(self) -> dict[str, str]:
        return {
            "content-type": "application/json",
            "anthropic-version": API_VERSION,
            "x-api-key": self._key(),
            **self._extra_headers,
        }

    async def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Call the model; yield :data:`StreamEvent` values ending with one StreamDone."""
        body = self.build_body(request)
        self._key()  # fail before any I/O when no key is configured
        _check_cancel(cancel)
        url = f"{self.base_url}/v1/messages"
        state = _StreamState(self.name, body["model"])
        # The 1-hour cache tier needs its beta header; other requests go without it.
        extra = {"anthropic-beta": EXTENDED_CACHE_BETA} if request.prompt_cache == "long" else {}
        if "anthropic-beta" in self._extra_headers:
            extra = {}  # the caller's own beta header wins
        if not self.streaming:
            payload = await self._post_json(url, body, extra)
            _check_cancel(cancel)
            if not isinstance(payload, dict):
                raise ProviderError("server", "response was not a JSON object", provider=self.name)
            for event in _events_from_message(payload):
                for out in state.handle(event):
                    yield out
        else:
            async with aclosing(self._sse_json(url, body, cancel, extra)) as events:
                async for event in events:
                    for out in state.handle(event):
                        yield out
        if not state.finished:
            raise ProviderError(
                "truncated_stream",
                "the stream ended before message_stop",
                provider=self.name,
            )
        yield StreamDone(message=state.message())

    # ---- request ----

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API request body for ``request`` (pure: no I/O)."""
        cache = _cache_control(request.prompt_cache)
        messages = _convert_messages(request.messages, self.name)
        if cache is not None:
            _mark_last_user_block(messages, cache)
        max_tokens = request.max_tokens or self.max_tokens
        body: dict[str, Any] = {"model": request.model or self.model}
        if request.system_prompt:
            system: dict[str, Any] = {"type": "text", "text": request.system_prompt}
            if cache is not None:
                system["cache_control"] = cache
            body["system"] = [system]
        body["messages"] = messages
        if request.tools:
            tools: list[dict[str, Any]] = []
            for spec in request.tools:
                tool: dict[str, Any] = {"name": spec.name}
                if spec.description:
                    tool["description"] = spec.description
                tool["input_schema"] = spec.parameters
                tools.append(tool)
            if cache is not None:
                tools[-1]["cache_control"] = cache
            body["tools"] = tools
            if request.tool_choice is not None:
                body["tool_choice"] = _tool_choice(request.tool_choice)
        forced = body.get("tool_choice", {}).get("type") in ("any", "tool")
        # Anthropic rejects thinking with a forced tool choice, and for a tool turn in progress
        # that did not start with thinking; the request then goes without it.
        thinking = request.thinking_level != "off" and not forced and _thinking_allowed(messages)
        if thinking:
            budget = max(_MIN_THINKING_BUDGET, self.thinking_budgets[request.thinking_level])
            if max_tokens <= budget:
                max_tokens += budget
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        elif request.temperature is not None:
            # Anthropic rejects any temperature but 1 while thinking, so it is sent only without.
            body["temperature"] = request.temperature
        if request.top_p is not None and not thinking:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        body["max_tokens"] = max_tokens
        if request.response_format is not None:
            body["output_config"] = {
                "format": {"type": "json_schema", "schema": _schema_of(request.response_format)}
            }
        body["stream"] = self.streaming
        body.update(request.extra_body)
        return body


# ---- request helpers ----


def _cache_control(tier: str) -> dict[str, str] | None:
    if tier == "short":
        return {"type": "ephemeral"}
    if tier == "long":
        return {"type": "ephemeral", "ttl": "1h"}
    return None


def _tool_choice(choice: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(choice, dict):
        if "type" in choice:
            return choice  # already in Anthropic's shape
        return {"type": "tool", "name": choice["name"]}
    if choice in ("required", "any"):
        return {"type": "any"}
    if choice in ("auto", "none"):
        return {"type": choice}
    return {"type": "tool", "name": choice}


def _schema_of(response_format: dict[str, Any]) -> Any:
    """Accept a bare JSON schema or OpenAI's ``{"name": ..., "schema": {...}}`` wrapper."""
    inner = response_format.get("schema")
    return inner if isinstance(inner, dict) else response_format


def _image_block(image: ImageContent) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": image.mime_type, "data": image.data},
    }


def _user_blocks(content: list[TextContent | ImageContent]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text:  # Anthropic rejects empty text blocks
                blocks.append({"type": "text", "text": block.text})
        else:
            blocks.append(_image_block(block))
    return blocks


def _assistant_blocks(message: AssistantMessage, provider: str) -> list[dict[str, Any]]:
    native = same_origin(message, provider)
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            if native and block.signature and block.redacted:
                blocks.append({"type": "redacted_thinking", "data": block.signature})
            elif native and block.signature:
                blocks.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
            else:
                text = thinking_as_text(block)
                if text:
                    blocks.append({"type": "text", "text": text})
        else:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": safe_tool_call_id(block.id),
                    "name": block.name,
                    "input": block.arguments,
                }
            )
    return blocks


def _tool_result_block(message: ToolResultMessage) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": safe_tool_call_id(message.tool_call_id),
    }
    content = _user_blocks(message.content)
    if content:
        block["content"] = content
    if message.is_error:
        block["is_error"] = True
    return block


def _append(wire: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Add blocks as a turn, merging with the previous turn of the same role.

    Anthropic wants all tool_result blocks answering one assistant turn in a single user
    turn, ahead of any other user content.
    """
    if not wire or wire[-1]["role"] != role:
        wire.append({"role": role, "content": list(blocks)})
        return
    content: list[dict[str, Any]] = wire[-1]["content"]
    for block in blocks:
        if block["type"] == "tool_result":
            at = 0
            while at < len(content) and content[at]["type"] == "tool_result":
                at += 1
            content.insert(at, block)
        else:
            content.append(block)


def _convert_messages(messages: list[AgentMessage], provider: str) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            blocks = _user_blocks(message.content)
            if blocks:
                _append(wire, "user", blocks)
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message, provider)
            if blocks:
                _append(wire, "assistant", blocks)
        elif isinstance(message, ToolResultMessage):
            _append(wire, "user", [_tool_result_block(message)])
        elif isinstance(message, ExtensionMessage):
            continue
    return wire


def _mark_last_user_block(wire: list[dict[str, Any]], cache: dict[str, str]) -> None:
    for turn in reversed(wire):
        if turn["role"] == "user" and turn["content"]:
            turn["content"][-1]["cache_control"] = cache
            return


def _thinking_allowed(wire: list[dict[str, Any]]) -> bool:
    """False when the turn in progress (an assistant tool-use turn answered only by tool
    results) does not open with a thinking block, as when the history came from another
    provider or had thinking off."""
    for turn in reversed(wire):
        if turn["role"] == "user":
            if not all(block["type"] == "tool_result" for block in turn["content"]):
                return True
            continue
        blocks = turn["content"]
        if not any(block["type"] == "tool_use" for block in blocks):
            return True
        return blocks[0]["type"] in ("thinking", "redacted_thinking")
    return True


def _check_cancel(cancel: CancellationToken | None) -> None:
    if cancel is not None and cancel.immediate:
        raise ProviderError("cancelled", "cancelled by the caller", provider=Anthropic.name)


# ---- response handling ----


def _events_from_message(message: dict[str, Any]) -> list[dict[str, Any]]:
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


class _StreamState:
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
