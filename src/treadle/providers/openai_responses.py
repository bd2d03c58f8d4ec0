"""OpenAI Responses API adapter: ``POST {base_url}/responses``.

Stateless by default: every call sends the whole history with ``store: false``, so nothing is
kept on OpenAI's side and no ``previous_response_id`` is needed. When thinking is on, the
request asks for ``reasoning.encrypted_content`` so reasoning items can be replayed.

Mapping notes:

- One ``reasoning`` output item becomes one :class:`ThinkingContent`: its summary parts joined
  by blank lines (streamed as they arrive) and, in ``signature``, a small JSON object
  ``{"type": "reasoning", "id": ..., "encrypted_content": ...}``. Only such signatures, on
  messages from this provider, are replayed as reasoning items; anything else (thinking made by
  another provider, or by the Chat Completions adapter, which never has reasoning items) is
  sent as text or dropped.
- A ``function_call`` item becomes a :class:`ToolCall` whose ``id`` is the item's ``call_id``
  (what ``function_call_output`` refers to), not its ``fc_...`` item id.
- Refusals are kept as text. ``response.incomplete`` with ``max_output_tokens`` -> ``"length"``.
- Usage: ``input_tokens`` includes cached tokens; ``Usage.input`` is the uncached part.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any

import httpx
from pydantic_core import from_json, to_json

from ..cancellation import CancellationToken
from ..types import (
    AssistantMessage,
    ExtensionMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)
from ..types.messages import AgentMessage
from ._assemble import check_cancel, json_object
from ._convert import image_data_url, safe_tool_call_id, same_origin, thinking_as_text
from ._http import HTTPAdapter, env_key
from .base import (
    ModelRequest,
    ProviderError,
    StreamEvent,
)
from .openai_responses_stream import StreamState, events_from_response

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_EFFORTS = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high"}


class OpenAIResponses(HTTPAdapter):
    """OpenAI models through the Responses API.

    ``store`` is sent as is (default ``False``: stateless). ``reasoning_summary`` is the
    ``reasoning.summary`` setting used when thinking is on (``None`` to leave it out; OpenAI
    only returns summaries for verified organisations on some models).
    """

    name = "openai"

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
        store: bool = False,
        reasoning_summary: str | None = "auto",
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
        self.store = store
        self.reasoning_summary = reasoning_summary

    # ---- HTTP ----

    def _key(self) -> str:
        key = self._api_key or env_key("OPENAI_API_KEY")
        if not key:
            raise ProviderError(
                "auth",
                "no OpenAI API key: set the OPENAI_API_KEY environment variable or pass api_key=",
                provider=self.name,
            )
        return key

    def _headers(self) -> dict[str, str]:
        return {
            "content-type": "application/json",
            "authorization": f"Bearer {self._key()}",
            **self._extra_headers,
        }

    async def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Call the model; yield :data:`StreamEvent` values ending with one StreamDone."""
        body = self.build_body(request)
        self._key()  # fail before any I/O when no key is configured
        check_cancel(cancel, self.name)
        url = f"{self.base_url}/responses"
        state = StreamState(self.name, body["model"])
        events = self._events(
            state,
            url,
            body,
            cancel,
            whole=lambda payload: events_from_response(json_object(payload, self.name)),
            unfinished="the stream ended before response.completed",
        )
        async with aclosing(events) as events:
            async for event in events:
                yield event

    # ---- request ----

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The Responses API request body for ``request`` (pure: no I/O)."""
        body: dict[str, Any] = {"model": request.model or self.model}
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        body["input"] = _convert_messages(request.messages, self.name)
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                    # The Responses API defaults to strict schemas, which most schemas fail.
                    "strict": False,
                }
                for spec in request.tools
            ]
            if request.tool_choice is not None:
                body["tool_choice"] = _tool_choice(request.tool_choice)
        if request.max_tokens is not None:
            body["max_output_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.thinking_level != "off":
            reasoning: dict[str, Any] = {"effort": _EFFORTS[request.thinking_level]}
            if self.reasoning_summary:
                reasoning["summary"] = self.reasoning_summary
            body["reasoning"] = reasoning
            body["include"] = ["reasoning.encrypted_content"]
        if request.response_format is not None:
            body["text"] = {"format": _text_format(request.response_format)}
        body["store"] = self.store
        body["stream"] = self.streaming
        body.update(request.extra_body)
        return body


# ---- request helpers ----


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, dict):
        if "type" in choice:
            return choice  # already in the Responses shape
        return {"type": "function", "name": choice["name"]}
    if choice in ("auto", "none", "required"):
        return choice
    if choice == "any":
        return "required"
    return {"type": "function", "name": choice}


def _text_format(response_format: dict[str, Any]) -> dict[str, Any]:
    """Accept a bare JSON schema or a ``{"name", "schema", "strict"?}`` wrapper."""
    schema = response_format.get("schema")
    if not isinstance(schema, dict):
        return {"type": "json_schema", "name": "response", "schema": response_format}
    out: dict[str, Any] = {
        "type": "json_schema",
        "name": response_format.get("name") or "response",
        "schema": schema,
    }
    if "strict" in response_format:
        out["strict"] = response_format["strict"]
    return out


def _input_content(content: list[TextContent | ImageContent]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text:
                parts.append({"type": "input_text", "text": block.text})
        else:
            parts.append({"type": "input_image", "image_url": image_data_url(block)})
    return parts


def reasoning_item(block: ThinkingContent) -> dict[str, Any] | None:
    """The reasoning input item for a thinking block this adapter produced, else None.

    Item ids are left out: with ``store: false`` OpenAI would look them up and fail, and the
    encrypted content carries everything the model needs.
    """
    if not block.signature:
        return None
    try:
        data = from_json(block.signature)
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
    native = same_origin(message, provider)
    items: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                items.append({"role": "assistant", "content": block.text})
        elif isinstance(block, ThinkingContent):
            item = reasoning_item(block) if native else None
            if item is not None:
                items.append(item)
            else:
                text = thinking_as_text(block)
                if text:
                    items.append({"role": "assistant", "content": text})
        else:
            arguments = block.raw_arguments
            if arguments is None:
                arguments = to_json(block.arguments).decode()
            items.append(
                {
                    "type": "function_call",
                    "call_id": safe_tool_call_id(block.id),
                    "name": block.name,
                    "arguments": arguments,
                }
            )
    return items


def _tool_output(message: ToolResultMessage) -> dict[str, Any]:
    output: str | list[dict[str, Any]]
    if any(isinstance(block, ImageContent) for block in message.content):
        output = _input_content(message.content)  # OpenAI takes text and images here
    else:
        output = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    return {
        "type": "function_call_output",
        "call_id": safe_tool_call_id(message.tool_call_id),
        "output": output,
    }


def _convert_messages(messages: list[AgentMessage], provider: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            content = _input_content(message.content)
            if content:
                items.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            items.extend(_assistant_items(message, provider))
        elif isinstance(message, ToolResultMessage):
            items.append(_tool_output(message))
        elif isinstance(message, ExtensionMessage):
            continue
    return items


# ---- response handling ----
