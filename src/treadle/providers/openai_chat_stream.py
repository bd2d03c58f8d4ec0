"""Chat Completions streams (and whole responses) into stream events."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic_core import from_json

from ..types import Citation, ErrorInfo, Usage
from ..types.usage import StopReason
from ._assemble import Assembler, count, text_delta, usage
from ._citations import from_openai
from ._errors import classify, filter_message, filtered_categories
from ._sse import SSEDecoder, SSEEvent
from .base import ProviderError, StreamEvent

# Reasoning fields read first, in this order, and only one per delta: some servers repeat
# the text in several (OpenRouter: ``reasoning`` and ``reasoning_details``). After them,
# any other field whose name says reasoning (and not signature: opaque tokens) is thinking.
_REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
_KNOWN_FIELDS = frozenset(
    {"role", "content", "refusal", "tool_calls", "function_call", "audio", "annotations", "name"}
).union(_REASONING_FIELDS)
_NAMES_REASONING = re.compile(r"^(?!.*signature).*(reasoning|thinking|thought)", re.I | re.S)
_FILTERED = "the provider's content filter stopped the response"


class ChatDecoder(SSEDecoder):
    """Server-sent events; a chunk that is exactly one ``data:`` line of JSON (nearly every
    read) comes out as its JSON, parsed straight from the bytes, others as :class:`SSEEvent`."""

    __slots__ = ()

    def feed(self, chunk: bytes) -> list[Any]:
        if (
            self.ready
            and chunk[:5] == b"data:"
            and chunk[-2:] == b"\n\n"
            and chunk.find(b"\n") == len(chunk) - 2
            and b"\r" not in chunk
            and len(chunk) <= self.max_line
        ):
            try:
                return [from_json(chunk[5:-2])]
            except ValueError:
                pass  # [DONE], or not JSON: the general path says which
        return SSEDecoder.feed(self, chunk)

    def close(self) -> list[Any]:
        """End of body: an event cut off there must still be whole JSON (else a ValueError)."""
        return [
            from_json(event.data)
            if event.event == "message" and event.data.strip() not in ("", "[DONE]")
            else event
            for event in SSEDecoder.close(self)
        ]


class ChatStream(Assembler):
    """Chunk payloads into the shared assembler's calls (docs/providers.md#openaichat)."""

    decoder = ChatDecoder
    # Some servers say "stop" after tool calls; the calls still need answering (``stop_for``).
    stops: dict[str, StopReason] = {
        "length": "length",
        "content_filter": "error",
        "tool_calls": "tool_use",
        "function_call": "tool_use",
    }
    unfinished = "the stream ended before the response was complete (no finish_reason, no [DONE])"

    def __init__(self, provider: str, model: str) -> None:
        super().__init__(provider, model)
        self._calls: dict[Any, int] = {}  # the server's index (None: the last call) -> block
        self.flagged: list[str] | None = None  # what a content filter stopped the answer for
        self.uncited: list[Citation] = []  # citations that came before the text they cite

    def feed(self, value: Any) -> Sequence[StreamEvent]:
        """The stream events of one wire event: a chunk's JSON, or an SSE event to read."""
        if type(value) is not dict:
            value = self._payload(value) if type(value) is SSEEvent else None
            if type(value) is not dict:
                return ()
        if value.get("error"):
            raise _error(value, self.provider)
        # The common chunk, fast: more text for the open text block, and nothing else.
        at = self.current
        if at is not None and value.get("usage") is None and "x_groq" not in value:
            block = self.blocks[at]
            choices = value.get("choices")
            if block.kind == "text" and type(choices) is list and len(choices) == 1:
                choice = choices[0]
                delta = choice.get("delta") if type(choice) is dict else None
                if type(delta) is dict and not (choice.get("finish_reason") or choice.get("index")):
                    content = delta.get("content")
                    if type(content) is str and content and (len(delta) == 1 or _only(delta)):
                        block.parts.append(content)
                        return [text_delta(at, content)]
        return self.chunk(value)

    def _payload(self, sse: SSEEvent) -> Any:
        """An SSE event's JSON (None for a keep-alive, ``[DONE]`` or an unknown event type)."""
        data = sse.data.strip()
        if self.done or sse.event not in ("message", "error") or not data:
            return None
        if data == "[DONE]":
            self.done = self.complete = True
            return None
        try:
            payload = from_json(data)
        except ValueError:
            error = sse.event == "error"
            message = data[:500] if error else f"malformed stream chunk: {data[:200]!r}"
            raise ProviderError("server", message, provider=self.provider) from None
        if sse.event == "error" and isinstance(payload, dict):
            raise _error(payload, self.provider)
        return payload

    def whole(self, payload: Any) -> list[Any]:
        """A non-streamed response as the one chunk that would have streamed it."""
        if not isinstance(payload, dict):
            text = f"unexpected response: {str(payload)[:200]!r}"
            raise ProviderError("server", text, provider=self.provider)
        if payload.get("error"):
            raise _error(payload, self.provider)
        choices = payload.get("choices") or []
        choice = choices[0] if choices and isinstance(choices[0], dict) else {}
        message = dict(choice.get("message") or {})
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            message["tool_calls"] = [
                {**call, "index": n} for n, call in enumerate(calls) if isinstance(call, dict)
            ]
        self.complete = True
        delta = {"index": 0, "delta": message, "finish_reason": choice.get("finish_reason")}
        if "content_filter_results" in choice:  # Azure: what its filter flagged
            delta["content_filter_results"] = choice["content_filter_results"]
        chunk = {key: payload.get(key) for key in ("id", "model", "usage")}
        return [{**chunk, "choices": [delta]}]

    def chunk(self, payload: dict[str, Any]) -> list[StreamEvent]:
        if not self.started:
            if "prompt_filter_results" in payload and not payload.get("choices"):
                return []  # Azure's verdict on the prompt comes first, with no id or model
            self.model = _str(payload.get("model")) or self.model
            if isinstance(payload.get("id"), str):
                self.response_id = payload["id"]
            self.start()
        usage = payload.get("usage")
        if not isinstance(usage, dict):
            extra = payload.get("x_groq")
            usage = extra.get("usage") if isinstance(extra, dict) else None
        if isinstance(usage, dict):
            self.totals = _usage(usage)
        choices = payload.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # n > 1 is not supported: the first choice is the answer
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.reason = reason
                if reason == "content_filter":  # Azure says which categories it flagged
                    self.flagged = filtered_categories(choice)
                self.complete = True
                self.end_all()
        return self.take()

    def _delta(self, delta: dict[str, Any]) -> None:
        thinking = _reasoning_text(delta)
        if thinking:
            self.text("thinking", thinking)
        content = delta.get("content")  # Mistral sends a list of typed parts
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for part in [*parts, {"type": "text", "text": delta.get("refusal")}]:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "thinking":
                text = _as_text(part.get("thinking"))
            elif kind == "text":
                text = part.get("text")
            else:
                continue
            if isinstance(text, str) and text:
                self.text(kind, text)
        annotations = delta.get("annotations")  # search models' url_citation
        if isinstance(annotations, list) and annotations:
            self._annotate(annotations)
        calls = delta.get("tool_calls")
        for fragment in calls if isinstance(calls, list) else ():
            if isinstance(fragment, dict):
                self._tool_fragment(fragment)

    def _annotate(self, annotations: list[Any]) -> None:
        """Citations of the message's text: its indices count in the whole content, which
        is one text block unless thinking or a tool call cut it (then the last one). Some
        come before any text: they wait for it."""
        for raw in annotations:
            cited = from_openai(raw) if isinstance(raw, dict) else None
            if cited is not None:
                self.uncited.append(cited)
        texts = [at for at, block in enumerate(self.blocks) if block.kind == "text"]
        if texts:
            for cited in self.uncited:
                self.cite(texts[-1], cited)
            self.uncited.clear()

    def _tool_fragment(self, fragment: dict[str, Any]) -> None:
        function = fragment.get("function")
        function = function if isinstance(function, dict) else {}
        call_id = _str(fragment.get("id"))
        name = _str(function.get("name"))
        arguments = function.get("arguments")
        if isinstance(arguments, (dict, list)):  # a few servers send parsed arguments
            arguments = json.dumps(arguments)
        position = fragment.get("index")
        key: Any = position if isinstance(position, int) else None
        at = self._calls.get(key)
        block = self.blocks[at] if at is not None else None
        if block is not None and call_id and block.id and call_id != block.id:
            block = None  # a different call reusing the index (seen from some servers)
        if at is None or block is None or block.done:
            self.close_current()
            call_id = call_id or f"call_{uuid.uuid4().hex[:24]}"
            at = self.open("tool", id=call_id, name=name, announce=False)
            block = self.blocks[at]
            self._calls[key] = self._calls[None] = at
        elif name and not block.name:
            block.name = name
        if isinstance(arguments, str) and arguments:
            self.add(at, arguments)
        if block.name:  # the start waits for the name: consumers never see a nameless call
            self.announce(at)

    def end(self) -> list[StreamEvent]:
        if self.uncited:
            self._annotate([])
        stop = self.stop_for(self.reason, self.stops)
        error = None
        if stop == "error":
            error = ErrorInfo(
                kind="content_filter", message=filter_message(_FILTERED, self.flagged)
            )
        return self.closing(stop, self.totals, error)


def _only(delta: dict[str, Any]) -> bool:
    """Whether a delta holds nothing but its content (and the role)."""
    return all(value is None or key in ("content", "role") for key, value in delta.items())


def _error(payload: dict[str, Any], provider: str) -> ProviderError:
    """An error event in the stream, with the HTTP status it names when it names one."""
    error = payload.get("error")
    error = error if isinstance(error, dict) else {}
    codes = [error.get(key) for key in ("status_code", "status", "code")]
    status = next((c for c in codes if isinstance(c, int) and 400 <= c <= 599), 0)
    return classify(status, payload, provider=provider, fallback="error event in the stream")


def _usage(raw: dict[str, Any]) -> Usage:
    prompt = raw.get("prompt_tokens_details")
    return usage(
        count(raw, "prompt_tokens"),
        count(raw, "completion_tokens"),
        cache_read=count(prompt, "cached_tokens") or count(raw, "prompt_cache_hit_tokens"),
        cache_write=count(prompt, "cache_write_tokens"),  # OpenRouter
        reasoning=count(raw.get("completion_tokens_details"), "reasoning_tokens"),
        total=count(raw, "total_tokens"),
        cost=raw.get("cost"),  # OpenRouter, in USD
    )


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _reasoning_text(delta: dict[str, Any]) -> str:
    others = sorted(k for k in delta if k not in _KNOWN_FIELDS and _NAMES_REASONING.match(k))
    for key in (*(k for k in _REASONING_FIELDS if k in delta), *others):
        text = _as_text(delta[key])
        if text:
            return text
    return ""


def _as_text(value: Any) -> str:
    """Reasoning text from a string, a list of parts, or a part (``{"text": ...}``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_as_text(item) for item in value)
    if isinstance(value, dict):
        for key in ("text", "thinking", "summary", "content"):
            if key in value:
                return _as_text(value[key])
    return ""
