"""OpenAI Responses API adapter, stateless (docs/providers.md#openairesponses)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx
from pydantic_core import from_json, to_json

from ..cancellation import CancellationToken
from ..types.content import FileContent, ImageContent, TextContent, ThinkingContent, ToolCall
from ..types.messages import AssistantMessage, ToolResultMessage, UserMessage
from ._convert import (
    assistant_parts,
    choose_tool,
    each_message,
    image_data_url,
    put_prompt_cache,
    put_settings,
    safe_tool_call_id,
    user_parts,
    wire_names,
)
from ._http import HTTPAdapter, HTTPOptions
from .base import ModelRequest, StreamEvent
from .files import OPENAI_RESPONSES, FileSupport, check_files, file_as_text
from .openai_responses_stream import StreamState

if TYPE_CHECKING:
    from typing_extensions import Unpack

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_SETTINGS = wire_names(("max_tokens", "temperature", "top_p"), max_tokens="max_output_tokens")


class OpenAIResponses(HTTPAdapter):
    """OpenAI models through the Responses API (options: docs/providers.md#openairesponses)."""

    name = "openai"
    default_base_url = DEFAULT_BASE_URL
    file_support: FileSupport = OPENAI_RESPONSES
    """The files this adapter sends (docs/files.md); replace it on an instance to widen it."""

    def __init__(
        self,
        model: str,
        *,
        store: bool = False,
        reasoning_summary: str | None = "auto",
        prompt_cache_fields: bool | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        super().__init__(model, **options)
        self.store = store
        self.reasoning_summary = reasoning_summary
        host = httpx.URL(self.base_url).host  # OpenAI's (and Azure's) own fields: see OpenAIChat
        self.prompt_cache_fields = (
            host == "api.openai.com" if prompt_cache_fields is None else prompt_cache_fields
        )

    def _key(self) -> str:
        return self._required_key("OPENAI_API_KEY", "OpenAI")

    def _headers(self) -> dict[str, str]:
        return self._headers_with(self._key_header("authorization", f"Bearer {self._key()}"))

    def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        body = self.build_body(request)
        self._key()  # fail before any I/O when no key is configured
        state = StreamState(self.name, body["model"])
        state.merge = request.coalesce_deltas
        return self._events(state, self.endpoint(request), body, cancel)

    def endpoint(self, request: ModelRequest) -> str:
        """The URL ``request`` is posted to."""
        return f"{self.base_url}/responses"

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The Responses API request body for ``request`` (pure: no I/O)."""
        body: dict[str, Any] = {"model": request.model or self.model}
        check_files(self.file_support, request.messages, self.name, body["model"])
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        items = each_message(
            request.messages,
            user=_user_items,
            assistant=lambda message: _assistant_items(message, self.name),
            tool=_tool_output,
        )
        body["input"] = [item for group in items for item in group]
        if request.tools:
            # Not strict: the Responses API's default, strict schemas, fails most schemas.
            body["tools"] = [
                {"type": "function", "name": spec.name, "description": spec.description}
                | {"parameters": spec.parameters, "strict": False}
                for spec in request.tools
            ]
            if request.tool_choice is not None:
                body["tool_choice"] = choose_tool(request.tool_choice, "function", str)
        put_settings(body, request, _SETTINGS)
        if request.thinking_level != "off":
            reasoning: dict[str, Any] = {"effort": request.thinking_level}
            if self.reasoning_summary:
                reasoning["summary"] = self.reasoning_summary
            body["reasoning"] = reasoning
            body["include"] = ["reasoning.encrypted_content"]
        if request.response_format is not None:
            body["text"] = {"format": _text_format(request.response_format)}
        if self.prompt_cache_fields:
            put_prompt_cache(body, request)
        body["store"] = self.store
        body["stream"] = self.streaming
        body.update(request.extra_body)
        return body


def _text_format(response_format: dict[str, Any]) -> dict[str, Any]:
    """Accept a bare JSON schema or a ``{"name", "schema", "strict"?}`` wrapper."""
    schema = response_format.get("schema")
    if not isinstance(schema, dict):
        return {"type": "json_schema", "name": "response", "schema": response_format}
    name = response_format.get("name") or "response"
    out: dict[str, Any] = {"type": "json_schema", "name": name, "schema": schema}
    if "strict" in response_format:
        out["strict"] = response_format["strict"]
    return out


def _input_content(
    content: list[TextContent | ImageContent | FileContent],
) -> list[dict[str, Any]]:
    return user_parts(
        content,
        lambda text: {"type": "input_text", "text": text},
        lambda image: {"type": "input_image", "image_url": image_data_url(image)},
        _input_file,
    )


def _input_file(file: FileContent) -> dict[str, Any]:
    """``input_image`` for an image, ``input_text`` for a text file, else ``input_file``."""
    if file.kind == "text":
        return {"type": "input_text", "text": file_as_text(file)}
    image = file.kind == "image"
    part: dict[str, Any] = {"type": "input_image" if image else "input_file"}
    if file.file_id is not None:
        part["file_id"] = file.file_id
    elif file.url is not None:
        part["image_url" if image else "file_url"] = file.url
    elif image:
        part["image_url"] = file.data_url()
    else:
        part["file_data"] = file.data_url()
        part["filename"] = file.name or _default_name(file)
    return part


def _default_name(file: FileContent) -> str:
    return "file.pdf" if file.kind == "pdf" else "file"


def _user_items(message: UserMessage) -> list[dict[str, Any]]:
    content = _input_content(message.content)
    return [{"role": "user", "content": content}] if content else []


def reasoning_item(block: ThinkingContent) -> dict[str, Any] | None:
    """The reasoning input item (without its id) for a thinking block this adapter produced."""
    try:
        data = from_json(block.signature or "")
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("type") != "reasoning":
        return None
    encrypted = data.get("encrypted_content")
    if not isinstance(encrypted, str) or not encrypted:
        return None
    summary = [{"type": "summary_text", "text": block.thinking}] if block.thinking else []
    return {"type": "reasoning", "summary": summary, "encrypted_content": encrypted}


def _assistant_items(message: AssistantMessage, provider: str) -> list[dict[str, Any]]:
    return assistant_parts(
        message,
        provider,
        text=lambda text: {"role": "assistant", "content": text},
        thinking=reasoning_item,
        call=_function_call,
    )


def _function_call(call: ToolCall) -> dict[str, Any]:
    arguments = call.raw_arguments
    if arguments is None:
        arguments = to_json(call.arguments).decode()
    call_id = safe_tool_call_id(call.id)
    return {"type": "function_call", "call_id": call_id, "name": call.name, "arguments": arguments}


def _tool_output(message: ToolResultMessage) -> list[dict[str, Any]]:
    output: str | list[dict[str, Any]] = message.text
    if any(isinstance(block, (ImageContent, FileContent)) for block in message.content):
        output = _input_content(message.content)  # OpenAI takes text, images and files here
    call_id = safe_tool_call_id(message.tool_call_id)
    return [{"type": "function_call_output", "call_id": call_id, "output": output}]
