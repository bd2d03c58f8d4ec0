"""Ollama's native chat API adapter (docs/providers.md#ollama)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import httpx

from ..cancellation import CancellationToken
from ..types import (
    AssistantMessage,
    FileContent,
    ImageContent,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from ._assemble import Assembler, count, usage
from ._convert import (
    PENALTIES,
    each_message,
    merge_extra,
    put_settings,
    unwrap_schema,
    visible_thinking,
    wire_names,
)
from ._errors import classify
from ._http import HTTPAdapter, HTTPOptions
from ._sse import NDJSONDecoder
from .base import ModelRequest, StreamEvent, ThinkingLevel
from .files import OLLAMA, FileSupport, check_files, text_of

if TYPE_CHECKING:
    from typing_extensions import Unpack

DEFAULT_BASE_URL = "http://localhost:11434"
DEFAULT_PORT = 11434
# The request's settings as Ollama's model options.
_OPTIONS = wire_names(PENALTIES, max_tokens="num_predict")


def host_url(value: str) -> str:
    """``OLLAMA_HOST`` as Ollama's own CLI reads it (docs/providers.md#ollama)."""
    value = value.strip().rstrip("/")
    scheme, _, rest = value.partition("://") if "://" in value else ("http", "", value)
    netloc, slash, path = rest.partition("/")
    has_port = ":" in netloc.rsplit("]", 1)[-1]
    if not has_port and scheme == "http":
        netloc = f"{netloc}:{DEFAULT_PORT}"
    return f"{scheme}://{netloc}{slash}{path}"


class Ollama(HTTPAdapter):
    """A local (or ollama.com) Ollama server (options: docs/providers.md#ollama)."""

    name = "ollama"
    file_support: FileSupport = OLLAMA
    """The files this adapter sends (docs/files.md): images, and text files as text."""
    key_variables = ("OLLAMA_API_KEY",)
    connect_hint = "is Ollama running? Start it with `ollama serve`, or point OLLAMA_HOST at it"
    key_header = ("authorization", "Bearer ")

    def __init__(
        self,
        model: str,
        *,
        options: Mapping[str, Any] | None = None,
        keep_alive: str | int | None = None,
        **http: Unpack[HTTPOptions],
    ) -> None:
        if http.get("base_url") is None:
            env_host = os.environ.get("OLLAMA_HOST")
            http["base_url"] = host_url(env_host) if env_host else DEFAULT_BASE_URL
        super().__init__(model, **http)
        self.options = dict(options or {})
        self.keep_alive = keep_alive

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        model = request.model or self.model
        check_files(self.file_support, request.messages, self.name, model)
        messages: list[dict[str, Any]] = []
        if request.system_prompt:
            messages.append({"role": "system", "content": request.system_prompt})
        history = each_message(
            request.messages, user=_user, assistant=_assistant, tool=_tool_result
        )
        messages.extend(filter(None, history))
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": self.streaming}
        tools = request.tools
        choice = request.tool_choice
        if choice == "none":
            tools = []
        elif isinstance(choice, dict):
            tools = [t for t in tools if t.name == choice.get("name")] or tools
        if tools:  # Ollama cannot force tool use: "required" is not expressed
            body["tools"] = [{"type": "function", "function": _function(t)} for t in tools]
        body["think"] = think_value(model, request.thinking_level)
        options = dict(self.options)
        put_settings(options, request, _OPTIONS)
        if options:
            body["options"] = options
        if request.response_format is not None:
            body["format"] = unwrap_schema(request.response_format)
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        return merge_extra(body, request.extra_body)

    def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        host = httpx.URL(self.base_url).host
        if not self.has_credentials and (host == "ollama.com" or host.endswith(".ollama.com")):
            raise self._no_key("ollama.com needs an API key", "OLLAMA_API_KEY")
        body = self.build_body(request)
        url = f"{self.base_url}/api/chat"
        state = _Response(self.name, body["model"])
        state.merge = request.coalesce_deltas
        return self._events(state, url, body, cancel)


def think_value(model: str, level: ThinkingLevel) -> bool | str:
    """``think`` for ``level`` on ``model`` (docs/providers.md#ollama)."""
    if level == "off":
        return False
    if model.split("/")[-1].startswith("gpt-oss"):
        return {"minimal": "low"}.get(level, level)
    return True


def _function(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


def _user(message: UserMessage) -> dict[str, Any]:
    return _with_images({"role": "user", "content": _text(message)}, message)


def _text(message: UserMessage | ToolResultMessage) -> str:
    """The message's text, its text files included (Ollama takes text and images only)."""
    return "\n".join(t for t in map(text_of, message.content) if t is not None)


def _tool_result(message: ToolResultMessage) -> dict[str, Any]:
    entry = {"role": "tool", "content": _text(message), "tool_name": message.tool_name}
    return _with_images({**entry, "tool_call_id": message.tool_call_id}, message)


def _with_images(entry: dict[str, Any], message: UserMessage | ToolResultMessage) -> dict[str, Any]:
    images = [
        b.data
        for b in message.content
        if isinstance(b, ImageContent) or (isinstance(b, FileContent) and b.kind == "image")
        if b.data is not None
    ]
    if images:
        entry["images"] = images
    return entry


def _assistant(message: AssistantMessage) -> dict[str, Any] | None:
    # Ollama's thinking carries no signature, so any provider's visible thinking can go back.
    thinking = visible_thinking(message)
    text = message.text
    calls = [
        {"id": c.id, "function": {"name": c.name, "arguments": c.arguments}}
        for c in message.tool_calls
    ]
    if not (text or thinking or calls):
        return None
    entry: dict[str, Any] = {"role": "assistant", "content": text}
    if thinking:
        entry["thinking"] = thinking
    if calls:
        entry["tool_calls"] = calls
    return entry


class _Response(Assembler):
    """Response lines into the shared assembler's calls."""

    decoder = NDJSONDecoder
    stops = {"length": "length"}
    unfinished = "the Ollama stream ended without its final done:true line"

    def feed(self, line: Any) -> list[StreamEvent]:
        if not isinstance(line, dict):
            return []
        if "error" in line:
            error = classify(0, line, provider=self.provider)
            if error.kind == "bad_request":
                # After HTTP 200 an error line means the model failed while running.
                error.kind = "server"
            raise error
        if isinstance(line.get("model"), str):
            self.model = line["model"]
        self.start()
        message = line.get("message") or {}
        thinking, content = message.get("thinking"), message.get("content")
        if isinstance(thinking, str) and thinking:
            self.text("thinking", thinking)
        if isinstance(content, str) and content:
            self.text("text", content)
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                function = call.get("function") or {}
                call_id = call.get("id")
                if not isinstance(call_id, str) or not call_id:  # older Ollama versions
                    call_id = f"call_{uuid.uuid4().hex[:24]}"
                self.whole_tool(call_id, str(function.get("name", "")), function.get("arguments"))
        if line.get("done"):
            self.complete = True
            reason = line.get("done_reason")
            self.reason = reason if isinstance(reason, str) else None
            self.totals = usage(count(line, "prompt_eval_count"), count(line, "eval_count"))
        return self.take()
