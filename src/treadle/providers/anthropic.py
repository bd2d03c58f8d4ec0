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
from typing import TYPE_CHECKING, Any

from ..cancellation import CancellationToken
from ..types.content import ImageContent, TextContent, ThinkingContent, ToolCall
from ..types.messages import AgentMessage, AssistantMessage, ToolResultMessage
from ._convert import (
    assistant_parts,
    each_message,
    put_settings,
    safe_tool_call_id,
    user_parts,
    wire_names,
)
from ._http import HTTPAdapter, HTTPOptions
from .anthropic_stream import StreamState
from .base import ModelRequest, StreamEvent

if TYPE_CHECKING:
    from typing_extensions import Unpack

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
_SAMPLING = wire_names(("temperature", "top_p"))


class Anthropic(HTTPAdapter):
    """Claude models through the Messages API.

    ``max_tokens`` is the default answer budget (Anthropic requires one). When thinking is on
    and ``max_tokens`` would not leave room beyond the thinking budget, the budget is added on
    top of it. ``thinking_budgets`` overrides the token budget per thinking level.
    """

    name = "anthropic"
    default_base_url = DEFAULT_BASE_URL

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = 8192,
        thinking_budgets: Mapping[str, int] | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        """``options``: ``api_key``, ``base_url``, ``client``, ``timeout``, ``headers``,
        ``stream`` (see :class:`~treadle.providers._http.HTTPOptions`)."""
        super().__init__(model, **options)
        self.max_tokens = max_tokens
        self.thinking_budgets = {**DEFAULT_THINKING_BUDGETS, **(thinking_budgets or {})}

    # ---- HTTP ----

    def _key(self) -> str:
        return self._required_key("ANTHROPIC_API_KEY", "Anthropic")

    def _headers(self) -> dict[str, str]:
        return self._headers_with({"anthropic-version": API_VERSION, "x-api-key": self._key()})

    def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Call the model; yield :data:`StreamEvent` values ending with one StreamDone."""
        body = self.build_body(request)
        self._key()  # fail before any I/O when no key is configured
        # The 1-hour cache tier needs its beta header (unless the caller sends their own).
        beta = request.prompt_cache == "long" and "anthropic-beta" not in self._extra_headers
        state = StreamState(self.name, body["model"])
        url = f"{self.base_url}/v1/messages"
        return self._events(
            state, url, body, cancel, {"anthropic-beta": EXTENDED_CACHE_BETA} if beta else None
        )

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
        else:
            # Anthropic rejects any temperature but 1 (and top_p) while thinking, so they
            # are sent only without.
            put_settings(body, request, _SAMPLING)
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


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _user_blocks(content: list[TextContent | ImageContent]) -> list[dict[str, Any]]:
    return user_parts(content, _text_block, _image_block)  # Anthropic rejects empty text


def _assistant_blocks(message: AssistantMessage, provider: str) -> list[dict[str, Any]]:
    return assistant_parts(
        message, provider, text=_text_block, thinking=_signed_thinking, call=_tool_use
    )


def _signed_thinking(block: ThinkingContent) -> dict[str, Any] | None:
    """Anthropic's own thinking goes back with its signature (None: it has none)."""
    if not block.signature:
        return None
    if block.redacted:
        return {"type": "redacted_thinking", "data": block.signature}
    return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}


def _tool_use(call: ToolCall) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": safe_tool_call_id(call.id),
        "name": call.name,
        "input": call.arguments,
    }


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
    turns = each_message(
        messages,
        user=lambda message: ("user", _user_blocks(message.content)),
        assistant=lambda message: ("assistant", _assistant_blocks(message, provider)),
        tool=lambda message: ("user", [_tool_result_block(message)]),
    )
    for role, blocks in turns:
        if blocks:
            _append(wire, role, blocks)
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


# ---- response handling ----
