"""Chat Completions streams, assembled: deltas of text, reasoning and tool calls into stream
events and the final AssistantMessage (also for a whole, non-streamed response)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_core import from_json

from ..types import (
    AssistantMessage,
    ErrorInfo,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from ..types._base import trusted
from ..types.usage import StopReason
from .base import (
    StreamDone,
    StreamEvent,
    StreamStart,
    TextEnd,
    TextStart,
    ThinkingEnd,
    ThinkingStart,
)

# ---- stream assembly ----


# Delta fields with a fixed meaning; any other field that looks like reasoning is thinking.
_STANDARD_FIELDS = frozenset(
    {"role", "content", "refusal", "tool_calls", "function_call", "audio", "annotations", "name"}
)
# Checked first, in this order; only one reasoning field is read per delta, because some
# servers repeat the same text in several (OpenRouter: ``reasoning`` and ``reasoning_details``).
_REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")


@dataclass
class _Call:
    index: int
    id: str
    name: str
    parts: list[str] = field(default_factory=list)
    started: bool = False
    ended: bool = False


class Assembler:
    """Turns chunk payloads into stream events and the final message.

    Block indexes follow the order blocks first appear; tool-call fragments are matched to
    their call by the provider's ``index`` (or id), so interleaved calls stay apart.
    """

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.response_id: str | None = None
        self.started = False
        self.done = False  # [DONE] seen
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self._blocks: list[TextContent | ThinkingContent | _Call] = []
        self._texts: dict[int, list[str]] = {}
        self._open: int | None = None  # the text or thinking block receiving deltas
        self._calls: dict[Any, _Call] = {}
        self._last_call: _Call | None = None

    def plain_text(self, payload: dict[str, Any]) -> TextDelta | None:
        """Fast path for the common chunk: more text for the open text block, nothing else.
        None sends the chunk through :meth:`chunk`."""
        index = self._open
        if index is None or type(self._blocks[index]) is not TextContent:
            return None
        choices = payload.get("choices")
        if type(choices) is not list or len(choices) != 1 or payload.get("usage") is not None:
            return None
        if "x_groq" in payload:
            return None
        choice = choices[0]
        if type(choice) is not dict or choice.get("finish_reason") or choice.get("index", 0):
            return None
        delta = choice.get("delta")
        if type(delta) is not dict:
            return None
        content = delta.get("content")
        if type(content) is not str or not content:
            return None
        for key, value in delta.items():
            if value is not None and key != "content" and key != "role":
                return None
        self._texts[index].append(content)
        return trusted(
            TextDelta, {"type": "text", "index": index, "text": content}, {"index", "text"}
        )

    def chunk(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        if not self.started:
            if isinstance(payload.get("model"), str) and payload["model"]:
                self.model = payload["model"]
            if isinstance(payload.get("id"), str):
                self.response_id = payload["id"]
            yield from self._start()
        usage = payload.get("usage")
        if not isinstance(usage, dict):
            extra = payload.get("x_groq")
            usage = extra.get("usage") if isinstance(extra, dict) else None
        if isinstance(usage, dict):
            self.usage = _usage(usage)
        choices = payload.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # n > 1 is not supported: the first choice is the answer
            delta = choice.get("delta")
            if isinstance(delta, dict):
                yield from self._delta(delta)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
                yield from self.finish()

    def _delta(self, delta: dict[str, Any]) -> Iterator[StreamEvent]:
        thinking = _reasoning_text(delta)
        if thinking:
            yield from self._append("thinking", thinking)
        content = delta.get("content")
        if isinstance(content, str):
            if content:
                yield from self._append("text", content)
        elif isinstance(content, list):  # Mistral: typed parts
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "thinking":
                    text = _as_text(part.get("thinking"))
                    if text:
                        yield from self._append("thinking", text)
                elif part.get("type") == "text" and isinstance(part.get("text"), str):
                    if part["text"]:
                        yield from self._append("text", part["text"])
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            yield from self._append("text", refusal)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for fragment in calls:
                if isinstance(fragment, dict):
                    yield from self._tool_fragment(fragment)

    def _append(self, kind: Literal["text", "thinking"], text: str) -> Iterator[StreamEvent]:
        index = self._open
        if index is None or not isinstance(self._blocks[index], _kind_type(kind)):
            yield from self._close_open()
            index = len(self._blocks)
            self._blocks.append(
                TextContent(text="") if kind == "text" else ThinkingContent(thinking="")
            )
            self._texts[index] = []
            self._open = index
            yield TextStart(index=index) if kind == "text" else ThinkingStart(index=index)
        self._texts[index].append(text)
        values = {"type": kind, "index": index, "text": text}
        if kind == "text":
            yield trusted(TextDelta, values, {"index", "text"})
        else:
            yield trusted(ThinkingDelta, values, {"index", "text"})

    def _close_open(self) -> Iterator[StreamEvent]:
        index, self._open = self._open, None
        if index is not None:
            if isinstance(self._blocks[index], TextContent):
                yield TextEnd(index=index)
            else:
                yield ThinkingEnd(index=index)

    def _tool_fragment(self, fragment: dict[str, Any]) -> Iterator[StreamEvent]:
        function = fragment.get("function")
        function = function if isinstance(function, dict) else {}
        call_id = _str(fragment.get("id"))
        name = _str(function.get("name"))
        arguments = function.get("arguments")
        if isinstance(arguments, (dict, list)):  # a few servers send parsed arguments
            arguments = json.dumps(arguments)
        args = arguments if isinstance(arguments, str) else ""

        position = fragment.get("index")
        key: Any = position if isinstance(position, int) else None
        call = self._calls.get(key) if key is not None else self._last_call
        if call is not None and call_id and call.id and call_id != call.id:
            call = None  # a different call reusing the index (seen from some servers)
        if call is None or call.ended:
            yield from self._close_open()
            call = _Call(
                index=len(self._blocks), id=call_id or f"call_{uuid.uuid4().hex[:24]}", name=name
            )
            self._blocks.append(call)
            if key is not None:
                self._calls[key] = call
            self._last_call = call
        elif name and not call.name:
            call.name = name
        if args:
            call.parts.append(args)
        # The start waits for the name, so consumers never see a nameless call.
        if not call.started and call.name:
            call.started = True
            yield ToolCallStart(index=call.index, id=call.id, name=call.name)
            if call.parts:
                yield ToolCallDelta(index=call.index, arguments="".join(call.parts))
        elif call.started and args:
            yield ToolCallDelta(index=call.index, arguments=args)

    def _start(self) -> Iterator[StreamEvent]:
        if not self.started:
            self.started = True
            yield StreamStart(model=self.model, response_id=self.response_id)

    def end(self) -> Iterator[StreamEvent]:
        """The last events: any still-open blocks closed, then the complete message."""
        yield from self._start()
        yield from self.finish()
        yield StreamDone(message=self.message())

    def finish(self) -> Iterator[StreamEvent]:
        """Close every open block; tool calls get their parsed arguments."""
        yield from self._close_open()
        for block in self._blocks:
            if not isinstance(block, _Call) or block.ended:
                continue
            if not block.started:
                block.started = True
                yield ToolCallStart(index=block.index, id=block.id, name=block.name)
                if block.parts:
                    yield ToolCallDelta(index=block.index, arguments="".join(block.parts))
            block.ended = True
            yield ToolCallEnd(index=block.index, tool_call=_tool_call(block))

    def message(self) -> AssistantMessage:
        content: list[TextContent | ThinkingContent | ToolCall] = []
        for index, block in enumerate(self._blocks):
            if isinstance(block, _Call):
                content.append(_tool_call(block))
            elif isinstance(block, TextContent):
                content.append(TextContent(text="".join(self._texts[index])))
            else:
                content.append(ThinkingContent(thinking="".join(self._texts[index])))
        has_calls = any(isinstance(block, ToolCall) for block in content)
        stop, error = _stop_reason(self.finish_reason, has_calls)
        return AssistantMessage(
            content=content,
            stop_reason=stop,
            model=self.model,
            provider=self.provider,
            usage=self.usage or Usage(),
            response_id=self.response_id,
            error=error,
        )


# ---- helpers ----


def _kind_type(kind: str) -> type[TextContent] | type[ThinkingContent]:
    return TextContent if kind == "text" else ThinkingContent


def _tool_call(call: _Call) -> ToolCall:
    text = "".join(call.parts)
    if not text.strip():
        return ToolCall(id=call.id, name=call.name)
    try:
        parsed = from_json(text)
    except ValueError:
        parsed = text
    if parsed is None:
        return ToolCall(id=call.id, name=call.name)
    if not isinstance(parsed, dict):
        return ToolCall(id=call.id, name=call.name, raw_arguments=text)
    return ToolCall(id=call.id, name=call.name, arguments=parsed)


def _stop_reason(reason: str | None, has_calls: bool) -> tuple[StopReason, ErrorInfo | None]:
    if reason == "length":
        return "length", None
    if reason == "content_filter":
        return "error", ErrorInfo(
            kind="content_filter", message="the provider's content filter stopped the response"
        )
    # Some servers say "stop" after tool calls; the calls still need answering.
    if reason in ("tool_calls", "function_call") or has_calls:
        return "tool_use", None
    return "stop", None


def _usage(raw: dict[str, Any]) -> Usage:
    prompt = _int(raw.get("prompt_tokens"))
    completion = _int(raw.get("completion_tokens"))
    prompt_details = raw.get("prompt_tokens_details")
    prompt_details = prompt_details if isinstance(prompt_details, dict) else {}
    completion_details = raw.get("completion_tokens_details")
    completion_details = completion_details if isinstance(completion_details, dict) else {}
    cache_read = _int(prompt_details.get("cached_tokens")) or _int(
        raw.get("prompt_cache_hit_tokens")
    )
    cache_write = _int(prompt_details.get("cache_write_tokens"))  # OpenRouter
    cost = raw.get("cost")  # OpenRouter, in USD
    return Usage(
        input=max(0, prompt - cache_read - cache_write),
        output=completion,
        reasoning=_int(completion_details.get("reasoning_tokens")),
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=_int(raw.get("total_tokens")) or prompt + completion,
        cost_usd=float(cost)
        if isinstance(cost, (int, float)) and not isinstance(cost, bool)
        else None,
    )


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _is_reasoning_key(key: str) -> bool:
    lowered = key.lower()
    if "signature" in lowered:  # opaque tokens, not text
        return False
    return "reasoning" in lowered or "thinking" in lowered or "thought" in lowered


def _reasoning_text(delta: dict[str, Any]) -> str:
    keys = [key for key in _REASONING_FIELDS if key in delta]
    keys += sorted(
        key
        for key in delta
        if key not in _REASONING_FIELDS and key not in _STANDARD_FIELDS and _is_reasoning_key(key)
    )
    for key in keys:
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
