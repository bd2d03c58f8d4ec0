"""OpenAI Responses streams, assembled: output-item events into stream events and the final
AssistantMessage (also for a whole, non-streamed response)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_core import from_json, to_json

from ..types import (
    AssistantContent,
    AssistantMessage,
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
from ..types.usage import StopReason
from ._http import classify
from .base import (
    ProviderError,
    StreamEvent,
    StreamStart,
    TextEnd,
    TextStart,
    ThinkingEnd,
    ThinkingStart,
)


def events_from_response(response: dict[str, Any]) -> list[dict[str, Any]]:
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


class StreamState:
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
