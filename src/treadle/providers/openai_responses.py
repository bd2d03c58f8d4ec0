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
from ._convert import image_data_url, safe_tool_call_id, same_origin, thinking_as_text
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
        _check_cancel(cancel)
        url = f"{self.base_url}/responses"
        state = _StreamState(self.name, body["model"])
        if not self.streaming:
            payload = await self._post_json(url, body)
            _check_cancel(cancel)
            if not isinstance(payload, dict):
                raise ProviderError("server", "response was not a JSON object", provider=self.name)
            for event in _events_from_response(payload):
                for out in state.handle(event):
                    yield out
        else:
            async with aclosing(self._sse_json(url, body, cancel)) as events:
                async for event in events:
                    for out in state.handle(event):
                        yield out
        if not state.finished:
            raise ProviderError(
                "truncated_stream",
                "the stream ended before response.completed",
                provider=self.name,
            )
        yield StreamDone(message=state.message())

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


def _check_cancel(cancel: CancellationToken | None) -> None:
    if cancel is not None and cancel.immediate:
        raise ProviderError("cancelled", "cancelled by the caller", provider=OpenAIResponses.name)


# ---- response handling ----


def _events_from_response(response: dict[str, Any]) -> list[dict[str, Any]]:
    """A non-streamed Response as the stream events that would have produced it."""
    events: list[dict[str, Any]] = [{"type": "response.created", "response": response}]
    for index, item in enumerate(response.get("output") or []):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    status = response.get("status")
    final = status if status in ("failed", "incomplete") else "completed"
    events.append({"type": f"response.{final}", "response": response})
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


def _stream_error(payload: dict[str, Any], provider: str) -> ProviderError:
    """An ``error`` event or a failed response's ``error`` object as a ProviderError."""
    error = payload.get("error")
    if not isinstance(error, dict):
        # The event itself is the error: {"type": "error", "code": ..., "message": ...}
        error = {k: v for k, v in payload.items() if k not in ("type", "sequence_number")}
    if not error.get("type") and error.get("code"):
        error = {**error, "type": error["code"]}
    return classify(0, {"error": error}, provider=provider, fallback="stream error")


@dataclass
class _Block:
    kind: Literal["text", "thinking", "tool"]
    parts: list[str] = field(default_factory=list)
    signature: str | None = None
    id: str = ""
    name: str = ""
    summary_index: int = 0
    done: bool = False
    call: ToolCall | None = None


class _StreamState:
    """Turns Responses stream events into treadle stream events and the final message."""

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.response_id: str | None = None
        self.started = False
        self.finished = False
        self.incomplete_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.blocks: list[_Block] = []
        self.items: dict[int, int] = {}  # output_index -> content index (reasoning, calls)
        self.item_ids: dict[str, int] = {}  # item id -> content index
        self.parts: dict[tuple[int, int], int] = {}  # (output_index, content_index) -> text

    def handle(self, event: dict[str, Any]) -> list[StreamEvent]:
        kind = event.get("type")
        out: list[StreamEvent] = []
        if kind == "error":
            raise _stream_error(event, self.provider)
        response = event.get("response")
        if isinstance(response, dict):
            self.model = response.get("model") or self.model
            self.response_id = response.get("id") or self.response_id
        if not self.started:
            self.started = True
            out.append(StreamStart(model=self.model, response_id=self.response_id))
        if kind == "response.output_item.added":
            self._item_added(event, out)
        elif kind == "response.output_item.done":
            self._item_done(event, out)
        elif kind == "response.content_part.added":
            part = event.get("part") or {}
            if part.get("type") in ("output_text", "refusal"):
                at = self._text_block(event, out)
                initial = part.get("text") or part.get("refusal")
                if initial:
                    self._append(at, initial, out)
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            if event.get("delta"):
                self._append(self._text_block(event, out), event["delta"], out)
        elif kind in ("response.output_text.done", "response.refusal.done"):
            self._text_done(event, out)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            self._reasoning_delta(event, out)
        elif kind == "response.function_call_arguments.delta":
            found = self._find(event)
            if found is not None and self.blocks[found].kind == "tool" and event.get("delta"):
                self._append(found, event["delta"], out)
        elif kind == "response.failed":
            error = response.get("error") if isinstance(response, dict) else None
            raise _stream_error({"error": error or {"message": "response failed"}}, self.provider)
        elif kind in ("response.completed", "response.incomplete"):
            if isinstance(response, dict):
                if isinstance(response.get("usage"), dict):
                    self.usage = response["usage"]
                if kind == "response.incomplete":
                    details = response.get("incomplete_details") or {}
                    self.incomplete_reason = details.get("reason") or "incomplete"
            for at in range(len(self.blocks)):
                self._end(at, out)
            self.finished = True
        return out

    # ---- blocks ----

    def _text_done(self, event: dict[str, Any], out: list[StreamEvent]) -> None:
        at = self._text_block(event, out)
        final = event.get("text") or event.get("refusal")
        if final and not self.blocks[at].parts:
            self._append(at, final, out)
        self._end(at, out)

    def _reasoning_delta(self, event: dict[str, Any], out: list[StreamEvent]) -> None:
        at = self._find(event)
        if at is None or self.blocks[at].kind != "thinking" or not event.get("delta"):
            return
        block = self.blocks[at]
        summary_index = event.get("summary_index", 0)
        if summary_index != block.summary_index and block.parts:
            self._append(at, "\n\n", out)  # summary parts are separate paragraphs
        block.summary_index = summary_index
        self._append(at, event["delta"], out)

    def _find(self, event: dict[str, Any]) -> int | None:
        item_id = event.get("item_id")
        if isinstance(item_id, str) and item_id in self.item_ids:
            return self.item_ids[item_id]
        return self.items.get(event.get("output_index", -1))

    def _open(self, block: _Block, out: list[StreamEvent]) -> int:
        at = len(self.blocks)
        self.blocks.append(block)
        if block.kind == "text":
            out.append(TextStart(index=at))
        elif block.kind == "thinking":
            out.append(ThinkingStart(index=at))
        else:
            out.append(ToolCallStart(index=at, id=block.id, name=block.name))
        return at

    def _text_block(self, event: dict[str, Any], out: list[StreamEvent]) -> int:
        key = (event.get("output_index", -1), event.get("content_index", 0))
        at = self.parts.get(key)
        if at is None:
            at = self.parts[key] = self._open(_Block("text"), out)
        return at

    def _append(self, at: int, text: str, out: list[StreamEvent]) -> None:
        block = self.blocks[at]
        block.parts.append(text)
        if block.kind == "text":
            out.append(TextDelta(index=at, text=text))
        elif block.kind == "thinking":
            out.append(ThinkingDelta(index=at, text=text))
        else:
            out.append(ToolCallDelta(index=at, arguments=text))

    def _item_added(self, event: dict[str, Any], out: list[StreamEvent]) -> int | None:
        item = event.get("item") or {}
        kind = item.get("type")
        if kind == "reasoning":
            block = _Block("thinking")
        elif kind == "function_call":
            call_id = item.get("call_id") or item.get("id") or ""
            block = _Block("tool", id=call_id, name=item.get("name") or "")
        else:
            return None  # messages open per content part; other item kinds are not mapped
        at = self._open(block, out)
        self.items[event.get("output_index", at)] = at
        if isinstance(item.get("id"), str):
            self.item_ids[item["id"]] = at
        return at

    def _item_done(self, event: dict[str, Any], out: list[StreamEvent]) -> None:
        item = event.get("item") or {}
        kind = item.get("type")
        output_index = event.get("output_index", -1)
        if kind == "message":
            for content_index, part in enumerate(item.get("content") or []):
                text = part.get("text") if part.get("type") == "output_text" else None
                text = text if text is not None else part.get("refusal")
                if text is None:
                    continue
                key = {"output_index": output_index, "content_index": content_index}
                at = self._text_block(key, out)
                if text and not self.blocks[at].parts:
                    self._append(at, text, out)
                self._end(at, out)
            return
        if kind not in ("reasoning", "function_call"):
            return
        found = self._find({"item_id": item.get("id"), "output_index": output_index})
        if found is None:
            found = self._item_added(event, out)
        if found is None:
            return
        at = found
        block = self.blocks[at]
        if kind == "reasoning":
            if not block.parts:
                summary = [s.get("text", "") for s in item.get("summary") or []]
                text = "\n\n".join(s for s in summary if s)
                if text:
                    self._append(at, text, out)
            signature: dict[str, Any] = {"type": "reasoning", "id": item.get("id")}
            if item.get("encrypted_content"):
                signature["encrypted_content"] = item["encrypted_content"]
            block.signature = to_json(signature).decode()
        else:
            arguments = item.get("arguments")
            if isinstance(arguments, str) and arguments and not block.parts:
                self._append(at, arguments, out)
            if isinstance(arguments, str) and arguments:
                block.parts = [arguments]  # the item's final text is authoritative
        self._end(at, out)

    def _end(self, at: int, out: list[StreamEvent]) -> None:
        block = self.blocks[at]
        if block.done:
            return
        block.done = True
        if block.kind == "text":
            out.append(TextEnd(index=at))
        elif block.kind == "thinking":
            out.append(ThinkingEnd(index=at, signature=block.signature))
        else:
            arguments, raw = parse_arguments("".join(block.parts))
            block.call = ToolCall(
                id=block.id, name=block.name, arguments=arguments, raw_arguments=raw
            )
            out.append(ToolCallEnd(index=at, tool_call=block.call))

    # ---- result ----

    def message(self) -> AssistantMessage:
        content: list[AssistantContent] = []
        for block in self.blocks:
            text = "".join(block.parts)
            if block.kind == "text":
                content.append(TextContent(text=text))
            elif block.kind == "thinking":
                content.append(ThinkingContent(thinking=text, signature=block.signature))
            else:
                assert block.call is not None
                content.append(block.call)
        stop: StopReason
        if self.incomplete_reason == "max_output_tokens":
            stop = "length"
        elif any(isinstance(block, ToolCall) for block in content):
            stop = "tool_use"
        else:
            stop = "stop"
        return AssistantMessage(
            content=content,
            stop_reason=stop,
            model=self.model,
            provider=self.provider,
            usage=_usage(self.usage),
            response_id=self.response_id,
        )


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _usage(usage: dict[str, Any]) -> Usage:
    input_details = usage.get("input_tokens_details") or {}
    output_details = usage.get("output_tokens_details") or {}
    prompt = _int(usage.get("input_tokens"))
    cached = _int(input_details.get("cached_tokens"))
    output = _int(usage.get("output_tokens"))
    return Usage(
        input=max(0, prompt - cached),
        output=output,
        reasoning=_int(output_details.get("reasoning_tokens")),
        cache_read=cached,
        total_tokens=_int(usage.get("total_tokens")) or prompt + output,
    )
