"""One assembler for every adapter's stream (docs/architecture.md#an-adapter-in-one-file)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, Literal

from pydantic_core import from_json, to_json

from ..cancellation import CancellationToken
from ..types import (
    AssistantContent,
    AssistantMessage,
    Citation,
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
from ._sse import JSONStreamDecoder, SSEJSONDecoder
from .base import (
    ProviderError,
    StreamDone,
    StreamEvent,
    StreamStart,
    TextEnd,
    TextStart,
    ThinkingEnd,
    ThinkingStart,
)

Kind = Literal["text", "thinking", "tool"]


def parse_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """``(arguments, raw)`` from the model's JSON text (docs/providers.md#stream-events)."""
    try:
        value = from_json(text) if text.strip() else None
    except ValueError:
        return {}, text
    if value is None or isinstance(value, dict):
        return value or {}, None
    return {}, text


def json_object(payload: Any, provider: str) -> dict[str, Any]:
    """A whole (non-streamed) response that must be a JSON object."""
    if not isinstance(payload, dict):
        raise ProviderError("server", "response was not a JSON object", provider=provider)
    return payload


def check_cancel(cancel: CancellationToken | None, provider: str) -> None:
    """Raise ``cancelled`` when the caller asked to stop now."""
    if cancel is not None and cancel.immediate:
        raise _cancelled(provider)


def _cancelled(provider: str) -> ProviderError:
    return ProviderError("cancelled", "cancelled by the caller", provider=provider)


def count(values: Any, key: str) -> int:
    """An integer token count from a usage object (0 for anything else, or no object)."""
    value = values.get(key) if isinstance(values, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage(
    prompt: int,
    output: int,
    *,
    cache_read: int = 0,
    cache_write: int = 0,
    cache_write_long: int = 0,
    reasoning: int = 0,
    total: int = 0,
    cost: Any = None,
) -> Usage:
    """Usage from what a provider reports. ``prompt`` counts every input token, cached ones
    included (``Usage.input`` is the uncached rest); ``total`` defaults to prompt + output."""
    return Usage(
        input=max(0, prompt - cache_read - cache_write),
        output=output,
        reasoning=reasoning,
        cache_read=cache_read,
        cache_write=cache_write,
        cache_write_long=min(cache_write_long, cache_write),
        total_tokens=total or prompt + output,
        cost_usd=float(cost)
        if isinstance(cost, (int, float)) and not isinstance(cost, bool)
        else None,
    )


@dataclass(slots=True)
class Block:
    """One content block while it streams."""

    kind: Kind
    parts: list[str] = field(default_factory=list)
    signature: str | None = None
    redacted: bool = False
    id: str = ""
    name: str = ""
    announced: bool = False  # a tool call's ToolCallStart was sent
    done: bool = False
    call: ToolCall | None = None
    citations: list[Citation] = field(default_factory=list)  # a text block's sources


class Assembler:
    """The message being assembled block by block, and the stream events it makes (:meth:`take`).
    A subclass maps wire events in ``feed``, keeping the stop ``reason`` and the ``totals``."""

    feed: Callable[[Any], Sequence[StreamEvent]]
    decoder: Callable[[int], JSONStreamDecoder] = SSEJSONDecoder
    """What turns the body's bytes into wire events (given the longest line allowed)."""
    stops: Mapping[str, StopReason] = {}
    """The API's stop reasons, for :meth:`end` (one not in it is ``"stop"``)."""
    unfinished = "the stream ended before the response was complete"
    """The ``truncated_stream`` message for a response without the API's end marker."""

    def whole(self, payload: Any) -> list[Any]:
        """A non-streamed response's JSON as the wire events that would have streamed it."""
        return [payload]

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.response_id: str | None = None
        self.started = False
        self.blocks: list[Block] = []
        self.current: int | None = None  # the text / thinking block ``text`` feeds
        self.out: list[StreamEvent] = []
        self.complete = False  # the API's end marker came: the response is whole
        self.done = False  # nothing more to read: the rest of the body is drained unread
        self.failed: ProviderError | None = None  # raised after the events before it
        self.reason: str | None = None
        self.totals: Usage | None = None
        self.merge = False  # the request's coalesce_deltas: one event per block and read

    def read(self, values: list[Any]) -> Sequence[StreamEvent]:
        """The stream events of one read's wire events, coalesced; an error a wire event
        raises is kept in ``failed``, to raise after the events before it."""
        events: list[StreamEvent] = []
        try:
            for value in values:
                events += self.feed(value)
        except ProviderError as exc:
            self.failed = exc
        return coalesce(events) if len(events) > 1 and self.merge else events

    def take(self) -> list[StreamEvent]:
        """The events made since the last call."""
        out, self.out = self.out, []
        return out

    def start(self) -> None:
        """Send ``StreamStart`` (once), with the model and response id known so far."""
        if not self.started:
            self.started = True
            self.out.append(StreamStart(model=self.model, response_id=self.response_id))

    def open(
        self,
        kind: Kind,
        *,
        signature: str | None = None,
        redacted: bool = False,
        id: str = "",
        name: str = "",
        announce: bool = True,
    ) -> int:
        """Open a block; returns its index. A tool call is announced (``ToolCallStart``) at
        once unless ``announce=False`` (its name is not known yet: see :meth:`announce`)."""
        at = len(self.blocks)
        block = Block(kind, signature=signature, redacted=redacted, id=id, name=name)
        self.blocks.append(block)
        if kind == "text":
            self.out.append(TextStart(index=at))
        elif kind == "thinking":
            self.out.append(ThinkingStart(index=at, redacted=redacted))
        elif announce:
            self.announce(at)
        return at

    def announce(self, at: int) -> None:
        """Send a tool call's ``ToolCallStart``, and the arguments it has so far."""
        block = self.blocks[at]
        if block.announced:
            return
        block.announced = True
        self.out.append(ToolCallStart(index=at, id=block.id, name=block.name))
        if block.parts:
            self.out.append(ToolCallDelta(index=at, arguments="".join(block.parts)))

    def add(self, at: int, text: str) -> None:
        """Append to block ``at`` (a tool call's arguments are sent once it is announced)."""
        block = self.blocks[at]
        block.parts.append(text)
        if block.kind != "tool" or block.announced:
            self.out.append(_BY_KIND[block.kind](at, text))

    def text(self, kind: Literal["text", "thinking"], text: str) -> None:
        """Streamed text or thinking: a new block (the current one closed) when the kind changes."""
        at = self.current
        if at is None or self.blocks[at].kind != kind:
            self.close_current()
            at = self.current = self.open(kind)
        self.add(at, text)

    def cite(self, at: int, citation: Citation) -> None:
        """A source the model cited for text block ``at``: on its ``TextEnd`` and on the
        final message (one cited after the block ended reaches the final message only)."""
        self.blocks[at].citations.append(citation)

    def close_current(self) -> None:
        """End the block :meth:`text` feeds, if any."""
        at, self.current = self.current, None
        if at is not None:
            self.close(at)

    def close(self, at: int) -> None:
        """End block ``at`` (once); a tool call gets its parsed arguments."""
        block = self.blocks[at]
        if block.done:
            return
        block.done = True
        if block.kind == "text":
            cited = block.citations
            self.out.append(
                TextEnd(index=at, citations=list(cited)) if cited else TextEnd(index=at)
            )
        elif block.kind == "thinking":
            self.out.append(ThinkingEnd(index=at, signature=block.signature))
        else:
            self.announce(at)
            arguments, raw = parse_arguments("".join(block.parts))
            block.call = ToolCall(
                id=block.id, name=block.name, arguments=arguments, raw_arguments=raw
            )
            self.out.append(ToolCallEnd(index=at, tool_call=block.call))

    def end_all(self) -> None:
        """End every block still open: the current one first, then the rest in order."""
        self.close_current()
        for at in range(len(self.blocks)):
            self.close(at)

    def whole_tool(self, id: str, name: str, arguments: Any) -> None:
        """A tool call that arrives in one piece (arguments: an object, JSON text or None)."""
        self.close_current()
        at = self.open("tool", id=id, name=name)
        if isinstance(arguments, str) or arguments is None:
            parsed, raw = parse_arguments(arguments or "")
            text = raw if raw is not None else to_json(parsed).decode()
        else:  # an object, or JSON that is not one (the error path)
            text = to_json(arguments).decode()
        self.add(at, text)
        self.close(at)

    def has_calls(self) -> bool:
        return any(block.kind == "tool" for block in self.blocks)

    def stop_for(
        self, reason: str | None, table: Mapping[str, StopReason], default: StopReason = "stop"
    ) -> StopReason:
        """The provider's stop reason through ``table`` (``default`` for one not in it);
        ``"stop"`` becomes ``"tool_use"`` when the message has calls: they need answering."""
        stop = table.get(reason or "", default)
        return "tool_use" if stop == "stop" and self.has_calls() else stop

    def end(self) -> list[StreamEvent]:
        """The last events, once the body is read: ``reason`` through ``stops``, ``totals``."""
        return self.closing(self.stop_for(self.reason, self.stops), self.totals)

    def closing(
        self, stop_reason: StopReason, usage: Usage | None, error: ErrorInfo | None = None
    ) -> list[StreamEvent]:
        """The last events: ``StreamStart`` if none went yet, blocks ended, ``StreamDone``."""
        self.start()
        self.end_all()
        content: list[AssistantContent] = []
        for block in self.blocks:
            text = "".join(block.parts)
            if block.kind == "text":
                cited = block.citations
                content.append(
                    TextContent(text=text, citations=cited) if cited else TextContent(text=text)
                )
            elif block.kind == "thinking":
                signature, redacted = block.signature, block.redacted
                content.append(
                    ThinkingContent(thinking=text, signature=signature, redacted=redacted)
                )
            elif block.call is not None:  # set when the block closed
                content.append(block.call)
        message = AssistantMessage(
            content=content,
            stop_reason=stop_reason,
            model=self.model,
            provider=self.provider,
            usage=usage or Usage(),
            response_id=self.response_id,
            error=error,
        )
        return [*self.take(), StreamDone(message=message)]


def coalesce(events: Sequence[StreamEvent]) -> Sequence[StreamEvent]:
    """``events`` with each run of deltas to one block merged into one delta (for a request
    with ``coalesce_deltas``: :attr:`Assembler.merge`)."""
    out: list[StreamEvent] = []
    for (kind, at), group in groupby(events, lambda e: (type(e), getattr(e, "index", -1))):
        run = list(group)
        if kind not in _DELTAS or len(run) == 1:
            out += run
        else:
            make, field = _DELTAS[kind]
            out.append(make(at, "".join(getattr(event, field) for event in run)))
    return out


def _maker(cls: type, kind: str, field: str) -> Callable[[int, str], Any]:
    """Deltas of ``cls`` built without validation (the hot path: one per streamed chunk)."""
    return lambda at, text: trusted(cls, {"type": kind, "index": at, field: text}, {"index", field})


text_delta = _maker(TextDelta, "text", "text")
# How each delta type is made, and the field its text is in; and the maker by block kind.
_DELTAS: dict[type, tuple[Callable[[int, str], StreamEvent], str]] = {
    TextDelta: (text_delta, "text"),
    ThinkingDelta: (_maker(ThinkingDelta, "thinking", "text"), "text"),
    ToolCallDelta: (_maker(ToolCallDelta, "tool_call_delta", "arguments"), "arguments"),
}
_BY_KIND = dict(
    zip(("text", "thinking", "tool"), [make for make, _ in _DELTAS.values()], strict=True)
)
