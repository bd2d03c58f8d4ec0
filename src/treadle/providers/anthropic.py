"""Anthropic Messages API adapter (docs/providers.md#anthropic)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from ..cancellation import CancellationToken
from ..types.content import FileContent, ImageContent, ThinkingContent, ToolCall
from ..types.messages import AgentMessage, AssistantMessage, ToolResultMessage
from ._convert import (
    assistant_parts,
    choose_tool,
    each_message,
    put_settings,
    safe_tool_call_id,
    unwrap_schema,
    user_parts,
    wire_names,
)
from ._http import HTTPAdapter, HTTPOptions
from .anthropic_stream import StreamState
from .base import ModelRequest, StreamEvent
from .files import ANTHROPIC, FileSupport, check_files, files_in

if TYPE_CHECKING:
    from typing_extensions import Unpack

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
EXTENDED_CACHE_BETA = "extended-cache-ttl-2025-04-11"  # for prompt_cache="long" (1 hour)
FILES_BETA = "files-api-2025-04-14"  # for a file sent by its file_id
DEFAULT_THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
_MIN_THINKING_BUDGET = 1024
_SAMPLING = wire_names(("temperature", "top_p"))
_CACHE = {"short": {"type": "ephemeral"}, "long": {"type": "ephemeral", "ttl": "1h"}}


class Anthropic(HTTPAdapter):
    """Claude models through the Messages API (options: docs/providers.md#anthropic)."""

    name = "anthropic"
    default_base_url = DEFAULT_BASE_URL
    file_support: FileSupport = ANTHROPIC
    """The files this adapter sends (docs/files.md); replace it on an instance to widen it."""

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = 8192,
        thinking_budgets: Mapping[str, int] | None = None,
        cite_documents: bool = False,
        **options: Unpack[HTTPOptions],
    ) -> None:
        super().__init__(model, **options)
        self.max_tokens = max_tokens
        self.thinking_budgets = {**DEFAULT_THINKING_BUDGETS, **(thinking_budgets or {})}
        # every document sent asks for citations: docs/providers.md#citations
        self.cite_documents = cite_documents

    def _key(self) -> str:
        return self._required_key("ANTHROPIC_API_KEY", "Anthropic")

    def _headers(self) -> dict[str, str]:
        key = self._key_header("x-api-key", self._key())
        return self._headers_with({"anthropic-version": API_VERSION, **key})

    def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        body = self.build_body(request)
        self._key()  # fail before any I/O when no key is configured
        # The 1-hour cache tier and files by id need their beta headers (unless the caller
        # sends their own).
        betas = [EXTENDED_CACHE_BETA] if request.prompt_cache == "long" else []
        if any(block.file_id for block, _ in files_in(request.messages)):
            betas.append(FILES_BETA)
        own = "anthropic-beta" in map(str.lower, self._extra_headers)
        headers = {"anthropic-beta": ",".join(betas)} if betas and not own else None
        state = StreamState(self.name, body["model"])
        state.merge = request.coalesce_deltas
        return self._events(state, f"{self.base_url}/v1/messages", body, cancel, headers)

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API request body for ``request`` (pure: no I/O)."""
        model = request.model or self.model
        check_files(self.file_support, request.messages, self.name, model)
        marked: list[dict[str, Any]] = []  # the last block of each cache_point message
        messages = _convert_messages(request.messages, self.name, marked)
        if self.cite_documents:
            _cite_documents(messages)
        body: dict[str, Any] = {"model": model}
        automatic: list[dict[str, Any]] = []  # the cache points every request gets
        if request.system_prompt:
            body["system"] = [{"type": "text", "text": request.system_prompt}]
            automatic.append(body["system"][-1])
        body["messages"] = messages
        explicit: list[dict[str, Any]] = []
        if request.tools:
            body["tools"] = [_tool(spec) for spec in request.tools]
            explicit.extend(body["tools"][i] for i, s in enumerate(request.tools) if s.cache_point)
            automatic.append(body["tools"][-1])
            if request.tool_choice is not None:
                body["tool_choice"] = choose_tool(request.tool_choice, "tool", _mode)
        users = [turn["content"] for turn in messages if turn["role"] == "user" and turn["content"]]
        if users:  # the last user block closes the cached prefix
            automatic.append(users[-1][-1])
        if request.prompt_cache in _CACHE:
            for block in _cache_points(automatic, explicit + marked):
                block["cache_control"] = dict(_CACHE[request.prompt_cache])
        max_tokens = request.max_tokens or self.max_tokens
        forced = body.get("tool_choice", {}).get("type") in ("any", "tool")
        # Anthropic rejects thinking with a forced tool choice, and for a tool turn in progress
        # that did not start with thinking; the request then goes without it.
        if request.thinking_level != "off" and not forced and _thinking_allowed(messages):
            budget = max(_MIN_THINKING_BUDGET, self.thinking_budgets[request.thinking_level])
            if max_tokens <= budget:
                max_tokens += budget
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        else:  # while thinking, Anthropic rejects any temperature but 1 (and top_p)
            put_settings(body, request, _SAMPLING)
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        body["max_tokens"] = max_tokens
        if request.response_format is not None:
            schema = unwrap_schema(request.response_format)
            body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        body["stream"] = self.streaming
        body.update(request.extra_body)
        return body


MAX_CACHE_POINTS = 4  # Anthropic refuses a request with more blocks marked


def _cache_points(
    automatic: list[dict[str, Any]], explicit: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The blocks to mark: the automatic points (system, last tool, last user block), then
    the explicit ones from the end of the prompt back (the longest prefixes) while fewer
    than Anthropic's four are marked (``explicit`` in prompt order: tools, then messages)."""
    chosen = {id(block): block for block in automatic}
    for block in reversed(explicit):
        if len(chosen) >= MAX_CACHE_POINTS:
            break
        chosen.setdefault(id(block), block)
    return list(chosen.values())


def _tool(spec: Any) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": spec.name}
    if spec.description:
        tool["description"] = spec.description
    tool["input_schema"] = spec.parameters
    return tool


def _mode(mode: str) -> dict[str, str]:
    return {"type": "any" if mode == "required" else mode}


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image_block(image: ImageContent) -> dict[str, Any]:
    source = {"type": "base64", "media_type": image.mime_type, "data": image.data}
    return {"type": "image", "source": source}


def _file_block(file: FileContent) -> dict[str, Any]:
    """A PDF or image by its bytes, URL or file id; a text file as a plain-text document."""
    source: dict[str, Any]
    if file.data is not None and file.kind == "text":
        source = {"type": "text", "media_type": "text/plain", "data": file.text()}
    elif file.data is not None:
        source = {"type": "base64", "media_type": file.mime_type, "data": file.data}
    elif file.url is not None:
        source = {"type": "url", "url": file.url}
    else:
        source = {"type": "file", "file_id": file.file_id}
    if file.kind == "image":
        return {"type": "image", "source": source}
    block: dict[str, Any] = {"type": "document", "source": source}
    if file.name:
        block["title"] = file.name
    return block


def _signed_thinking(block: ThinkingContent) -> dict[str, Any] | None:
    """Anthropic's own thinking goes back with its signature (None: it has none)."""
    if not block.signature:
        return None
    if block.redacted:
        return {"type": "redacted_thinking", "data": block.signature}
    return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}


def _tool_use(call: ToolCall) -> dict[str, Any]:
    call_id = safe_tool_call_id(call.id)
    return {"type": "tool_use", "id": call_id, "name": call.name, "input": call.arguments}


def _tool_result(message: ToolResultMessage) -> list[dict[str, Any]]:
    call_id = safe_tool_call_id(message.tool_call_id)
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    content = user_parts(message.content, _text_block, _image_block, _file_block)
    if content:
        block["content"] = content
    if message.is_error:
        block["is_error"] = True
    return [block]


def _convert_messages(
    messages: list[AgentMessage], provider: str, marked: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The history as turns, merged by role, tool results first (docs/providers.md#anthropic).
    The last block of each message with ``cache_point`` is appended to ``marked``."""
    wire: list[dict[str, Any]] = []
    turns = each_message(
        messages,
        user=lambda m: ("user", _user_blocks(m.content), m.cache_point),
        assistant=lambda m: ("assistant", _assistant_blocks(m, provider), m.cache_point),
        tool=lambda m: ("user", _tool_result(m), m.cache_point),
    )
    for role, blocks, cache_point in turns:
        if not blocks:
            continue
        if cache_point and marked is not None:  # (a thinking block takes no cache_control)
            last = next((b for b in reversed(blocks) if "thinking" not in b["type"]), None)
            if last is not None:
                marked.append(last)
        if not wire or wire[-1]["role"] != role:
            wire.append({"role": role, "content": blocks})
            continue
        content: list[dict[str, Any]] = wire[-1]["content"]
        for block in blocks:
            at = len(content)
            if block["type"] == "tool_result":  # ahead of the turn's other content
                at = next((i for i, b in enumerate(content) if b["type"] != "tool_result"), at)
            content.insert(at, block)
    return wire


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    return user_parts(content, _text_block, _image_block, _file_block)


def _assistant_blocks(message: AssistantMessage, provider: str) -> list[dict[str, Any]]:
    return assistant_parts(
        message, provider, text=_text_block, thinking=_signed_thinking, call=_tool_use
    )


def _cite_documents(wire: list[dict[str, Any]]) -> None:
    """Citations enabled on each document of the turns, tool results' included."""
    for turn in wire:
        for block in turn["content"]:
            inner = block.get("content") if block["type"] == "tool_result" else None
            for part in [block, *(inner if isinstance(inner, list) else ())]:
                if part.get("type") == "document":
                    part["citations"] = {"enabled": True}


def _thinking_allowed(wire: list[dict[str, Any]]) -> bool:
    """False when the turn in progress, a tool-use turn answered only by tool results, does not
    open with thinking (docs/providers.md#anthropic)."""
    if wire and wire[-1]["role"] == "user":  # (turns alternate: they are merged by role)
        if not all(block["type"] == "tool_result" for block in wire[-1]["content"]):
            return True
        wire = wire[:-1]
    blocks = wire[-1]["content"] if wire else []
    if not any(block["type"] == "tool_use" for block in blocks):
        return True
    return blocks[0]["type"] in ("thinking", "redacted_thinking")
