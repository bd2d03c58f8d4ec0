"""OpenAI Chat Completions and every server that speaks it (docs/providers.md#openaichat)."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections.abc import AsyncIterator
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal

import httpx

from ..cancellation import CancellationToken
from ..types import (
    AssistantMessage,
    FileContent,
    ImageContent,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from ._convert import (
    PENALTIES,
    after_tool_runs,
    put_prompt_cache,
    put_settings,
    safe_tool_call_id,
    visible_thinking,
    wire_names,
)
from ._http import HTTPAdapter, HTTPOptions, key_variable
from ._wire import (
    Encoded,
    ToolsJSON,
    WireCache,
    dumpb,
    dumpb_sharing,
    dumps,
    hole,
    joined,
    splice,
)
from .base import ModelRequest, StreamEvent
from .files import OPENAI_CHAT, FileSupport, check_files, file_as_text, text_of
from .openai_chat_stream import ChatStream

if TYPE_CHECKING:
    from typing_extensions import Unpack

DEFAULT_BASE_URL = "https://api.openai.com/v1"

_Encoded = tuple[Encoded | None, tuple[Encoded, ...], bool]  # see OpenAIChat._encode
_TEXT = itemgetter(0)
_IMAGES = itemgetter(1)

_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")
_ALNUM = re.compile(r"^[A-Za-z0-9]{9}$")


class OpenAIChat(HTTPAdapter):
    """A model behind ``{base_url}/chat/completions`` (options: docs/providers.md#openaichat)."""

    name = "openai"
    default_base_url = DEFAULT_BASE_URL
    file_support: FileSupport = OPENAI_CHAT
    """The files this adapter sends (docs/files.md); replace it on an instance to widen it."""

    def __init__(
        self,
        model: str,
        *,
        provider_name: str = "openai",
        organization: str | None = None,
        project: str | None = None,
        include_usage: bool = True,
        system_role: Literal["system", "developer"] = "system",
        max_tokens_field: str | None = None,
        reasoning_field: str | None = None,
        api_key_env: str | None = None,
        require_key: bool | None = None,
        prompt_cache_fields: bool | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        self.name = provider_name
        self._key_env = api_key_env or key_variable(provider_name)
        self.key_variables = (self._key_env,)
        super().__init__(model, **options)
        self.include_usage = include_usage
        self.system_role = system_role
        self.organization = organization
        self.project = project
        host = httpx.URL(self.base_url).host
        self.max_tokens_field = max_tokens_field or (
            "max_completion_tokens" if host == "api.openai.com" else "max_tokens"
        )
        deepseek = "reasoning_content" if provider_name == "deepseek" else None
        self.reasoning_field = deepseek if reasoning_field is None else reasoning_field
        self._require_key = require_key if require_key is not None else not _is_local(host)
        # prompt_cache_key and prompt_cache_retention: OpenAI's own (and Azure's) fields,
        # which a strict OpenAI-compatible server could refuse.
        self.prompt_cache_fields = (
            host == "api.openai.com" if prompt_cache_fields is None else prompt_cache_fields
        )
        self._wire: WireCache[_Encoded] = WireCache()
        self._tools = ToolsJSON(
            lambda specs: [_tool(s.name, s.description, s.parameters) for s in specs]
        )

    def _headers(self) -> dict[str, str]:
        headers = super()._headers()
        if self._api_key and "authorization" not in map(str.lower, headers):
            headers["authorization"] = f"Bearer {self._api_key}"
        if self.organization:
            headers["openai-organization"] = self.organization
        if self.project:
            headers["openai-project"] = self.project
        return headers

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for ``request`` (pure: no I/O), as :meth:`encode_body` sends it."""
        body: dict[str, Any] = json.loads(self.encode_body(request))
        return body

    def encode_body(self, request: ModelRequest) -> bytes:
        """The request body as sent, each message's JSON from the adapter's cache (``_wire.py``)."""
        head: dict[str, Any] = {"model": request.model or self.model}
        check_files(self.file_support, request.messages, self.name, head["model"])
        rest: dict[str, Any] = {"stream": self.streaming}
        if self.streaming and self.include_usage:
            rest["stream_options"] = {"include_usage": True}
        tools = b""
        if request.tools:
            # Never an empty list: several servers reject ``"tools": []``. Encoded once for
            # the same tools (it is most of a short request), and sent as the last key.
            tools = b'"tools":' + self._tools.encode(request.tools)
            if request.tool_choice is not None:
                rest["tool_choice"] = _tool_choice(request.tool_choice)
        put_settings(rest, request, wire_names(PENALTIES, max_tokens=self.max_tokens_field))
        if request.thinking_level != "off":
            rest["reasoning_effort"] = request.thinking_level
        if request.response_format is not None:
            rest["response_format"] = _response_format(request.response_format)
        if self.prompt_cache_fields:
            put_prompt_cache(rest, request)
        extra = request.extra_body
        if "tools" in extra:  # the caller's own tools replace these
            tools = b""
        if "messages" in extra:  # the caller's own messages replace the history
            body = {**head, "messages": None, **rest, **extra}
            if tools:
                body.setdefault("tools", json.loads(tools[len(b'"tools":') :]))
            return dumps(body).encode()
        for name, value in extra.items():
            (head if name == "model" else rest)[name] = value
        return splice(head, "messages", self._messages(request), rest, tools)

    def _messages(self, request: ModelRequest) -> list[Encoded]:
        """The history's messages as encoded JSON, in order."""
        system = {"role": self.system_role, "content": request.system_prompt}
        out: list[Encoded] = [dumpb(system)] if request.system_prompt else []
        self._wire.settings((self.name, self.reasoning_field))
        encoded = self._wire.encode_all(request.messages, self._encode)
        if any(map(_IMAGES, encoded)):  # tool images wait for the end of the tool messages
            out.extend(after_tool_runs(encoded, _user_parts))
        else:  # the common case, without a Python-level loop
            out.extend(filter(None, map(_TEXT, encoded)))
        return out

    def _encode(self, message: Any) -> _Encoded:
        """One message as its JSON (None for none), the image parts it leaves for a user
        message, and whether it is a tool message. Files' base64 is kept by reference
        (``Pieces``), not copied into each message's encoding."""
        if isinstance(message, UserMessage):
            shared: list[str] = []
            content = _user_content(message.content, shared)
            return dumpb_sharing({"role": "user", "content": content}, shared), (), False
        if isinstance(message, AssistantMessage):
            return self._assistant(message), (), False
        if isinstance(message, ToolResultMessage):
            return self._tool_result(message)
        return None, (), False  # extension messages never reach a provider

    def _assistant(self, message: AssistantMessage) -> bytes | None:
        texts = [block.text for block in message.content if isinstance(block, TextContent)]
        calls = [
            {
                "id": self._call_id(block.id),
                "type": "function",
                # Invalid JSON from the model goes back as {}: several servers parse this
                # field and would reject the whole history.
                "function": {"name": block.name, "arguments": json.dumps(block.arguments)},
            }
            for block in message.tool_calls
        ]
        if not texts and not calls:
            return None  # nothing a model may see (thinking alone is not a message)
        converted: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
        if calls:
            converted["tool_calls"] = calls
        if self.reasoning_field and message.provider == self.name:
            reasoning = visible_thinking(message)
            if reasoning:
                converted[self.reasoning_field] = reasoning
        return dumpb(converted)

    def _tool_result(self, message: ToolResultMessage) -> _Encoded:
        """A tool message (text only: text files join its text), and the parts of a user
        message with the tool's images and other files."""
        text = "\n".join(t for t in map(text_of, message.content) if t is not None)
        media = [
            block
            for block in message.content
            if isinstance(block, ImageContent)
            or (isinstance(block, FileContent) and not _as_text(block))
        ]
        call_id = self._call_id(message.tool_call_id)
        parts: list[Encoded] = []
        if media:
            note = f"[{len(media)} image(s) or file(s) follow in the next user message]"
            text = f"{text}\n{note}" if text else note
            label = f"Returned by the {message.tool_name} tool (call {call_id}):"
            parts.append(dumpb({"type": "text", "text": label}))
            for block in media:
                shared: list[str] = []
                parts.append(dumpb_sharing(_media_part(block, shared), shared))
        tool = {"role": "tool", "tool_call_id": call_id, "content": text}
        return dumpb(tool), tuple(parts), True

    def _call_id(self, call_id: str) -> str:
        if self.name != "mistral":
            return safe_tool_call_id(call_id, max_len=40)  # OpenAI's limit
        if _ALNUM.match(call_id):  # Mistral accepts only 9 alphanumeric characters
            return call_id
        return hashlib.sha256(call_id.encode()).hexdigest()[:9]

    def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        if self._require_key and not self.has_credentials:
            raise self._no_key(f"no API key for {self.name}", self._key_env)
        state = ChatStream(self.name, request.model or self.model)
        state.merge = request.coalesce_deltas
        return self._events(state, self.endpoint(request), self.encode_body(request), cancel)

    def endpoint(self, request: ModelRequest) -> str:
        """The URL ``request`` is posted to."""
        return f"{self.base_url}/chat/completions"


def _tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "parameters": parameters}
    if description:
        function["description"] = description
    return {"type": "function", "function": function}


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, dict) and "name" in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice


def _response_format(spec: dict[str, Any]) -> dict[str, Any]:
    """``{"type": "json_schema", ...}`` from a bare JSON schema or ``{name, schema, strict}``."""
    if spec.get("type") in ("json_schema", "json_object") and "properties" not in spec:
        return spec  # already in OpenAI's shape
    wrapped = isinstance(spec.get("schema"), dict)
    schema: dict[str, Any] = spec["schema"] if wrapped else spec
    name = (spec.get("name") if wrapped else None) or schema.get("title")
    cleaned = _SCHEMA_NAME.sub("_", str(name))[:64] if name else "response"
    strict = bool(spec.get("strict", False)) if wrapped else False
    json_schema: dict[str, Any] = {"name": cleaned, "schema": schema, "strict": strict}
    description = spec.get("description") if wrapped else None
    if isinstance(description, str) and description:
        json_schema["description"] = description
    return {"type": "json_schema", "json_schema": json_schema}


def _user_content(
    blocks: list[TextContent | ImageContent | FileContent], shared: list[str]
) -> str | list[dict[str, Any]]:
    if not blocks:
        return ""
    if len(blocks) == 1 and isinstance(blocks[0], TextContent):
        return blocks[0].text
    return [
        {"type": "text", "text": block.text}
        if isinstance(block, TextContent)
        else _media_part(block, shared)
        for block in blocks
    ]


def _as_text(block: object) -> bool:
    return isinstance(block, FileContent) and block.kind == "text"


def _media_part(block: ImageContent | FileContent, shared: list[str]) -> dict[str, Any]:
    """The part for an image or a file, its base64 a :func:`hole` in ``shared``."""
    if isinstance(block, ImageContent):
        url = f"data:{block.mime_type};base64,{hole(shared, block.data)}"
        return {"type": "image_url", "image_url": {"url": url}}
    if block.kind == "text":
        return {"type": "text", "text": file_as_text(block)}
    data = hole(shared, block.data) if block.data is not None else None
    data_url = f"data:{block.mime_type};base64,{data}"
    if block.kind == "image":
        return {"type": "image_url", "image_url": {"url": block.url or data_url}}
    if block.kind == "audio":
        audio_format = "mp3" if block.mime_type == "audio/mpeg" else "wav"
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}
    if block.file_id is not None:
        return {"type": "file", "file": {"file_id": block.file_id}}
    filename = block.name or "file.pdf"
    return {"type": "file", "file": {"filename": filename, "file_data": data_url}}


def _user_parts(parts: list[Encoded]) -> Encoded:
    return joined(parts, b'{"role":"user","content":[', b",", b"]}")


def _is_local(host: str) -> bool:
    """Local servers (vLLM, llama.cpp, Ollama, LM Studio) usually need no key."""
    if host.endswith((".localhost", ".local", ".internal")) or not re.search("[.:]", host):
        return True  # a bare name (localhost, a container or LAN host) or a local domain
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return (
        address.is_loopback or address.is_private or address.is_link_local or address.is_unspecified
    )
