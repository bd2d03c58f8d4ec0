"""OpenAI Responses streams (and whole responses) into stream events."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_json

from ..types.usage import ErrorInfo, StopReason
from ._assemble import Assembler, count, json_object, usage
from ._citations import from_openai
from ._errors import classify
from .base import ProviderError, StreamEvent

_FILTERED = "the provider's content filter stopped the response"
# The API reference's spelling, and the one some SDK versions give the event.
_ANNOTATION_ADDED = (
    "response.output_text.annotation.added",
    "response.output_text_annotation.added",
)


def _stream_error(payload: dict[str, Any], provider: str) -> ProviderError:
    """An ``error`` event or a failed response's ``error`` object as a ProviderError."""
    error = payload.get("error")
    if not isinstance(error, dict):
        # The event itself is the error: {"type": "error", "code": ..., "message": ...}
        error = {k: v for k, v in payload.items() if k not in ("type", "sequence_number")}
    if not error.get("type") and error.get("code"):
        error = {**error, "type": error["code"]}
    return classify(0, {"error": error}, provider=provider, fallback="stream error")


class StreamState(Assembler):
    """Responses stream events into the shared assembler's calls."""

    stops: dict[str, StopReason] = {"max_output_tokens": "length", "content_filter": "error"}
    unfinished = "the stream ended before response.completed"

    def __init__(self, provider: str, model: str) -> None:
        super().__init__(provider, model)
        self.totals = usage(0, 0)
        self.items: dict[int, int] = {}  # output_index -> content index (reasoning, calls)
        self.item_ids: dict[str, int] = {}  # item id -> content index
        self.parts: dict[tuple[int, int], int] = {}  # (output_index, content_index) -> text
        self.summary_index: dict[int, int] = {}  # content index -> reasoning summary part

    def whole(self, payload: Any) -> list[Any]:
        """A non-streamed Response as the stream events that would have produced it."""
        response = json_object(payload, self.provider)
        events: list[dict[str, Any]] = [{"type": "response.created", "response": response}]
        for index, item in enumerate(response.get("output") or []):
            for step in ("added", "done"):
                events.append(
                    {"type": f"response.output_item.{step}", "output_index": index, "item": item}
                )
        status = response.get("status")
        final = status if status in ("failed", "incomplete") else "completed"
        events.append({"type": f"response.{final}", "response": response})
        return events

    def feed(self, event: dict[str, Any]) -> list[StreamEvent]:
        kind = event.get("type")
        if kind == "error":
            raise _stream_error(event, self.provider)
        response = event.get("response")
        if isinstance(response, dict):
            self.model = response.get("model") or self.model
            self.response_id = response.get("id") or self.response_id
        self.start()
        if kind == "response.output_item.added":
            self._item_added(event)
        elif kind == "response.output_item.done":
            self._item_done(event)
        elif kind == "response.content_part.added":
            part = event.get("part") or {}
            if part.get("type") in ("output_text", "refusal"):
                at = self._text_block(event)
                initial = part.get("text") or part.get("refusal")
                if initial:
                    self.add(at, initial)
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            if event.get("delta"):
                self.add(self._text_block(event), event["delta"])
        elif kind in _ANNOTATION_ADDED:
            self._annotate(self._text_block(event), [event.get("annotation")])
        elif kind in ("response.output_text.done", "response.refusal.done"):
            self._text_done(event, event.get("text") or event.get("refusal"))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            self._reasoning_delta(event)
        elif kind == "response.function_call_arguments.delta":
            found = self._find(event)
            if found is not None and self.blocks[found].kind == "tool" and event.get("delta"):
                self.add(found, event["delta"])
        elif kind == "response.failed":
            error = response.get("error") if isinstance(response, dict) else None
            raise _stream_error({"error": error or {"message": "response failed"}}, self.provider)
        elif kind in ("response.completed", "response.incomplete"):
            if isinstance(response, dict):
                raw = response.get("usage")
                if isinstance(raw, dict):
                    self.totals = usage(
                        count(raw, "input_tokens"),
                        count(raw, "output_tokens"),
                        cache_read=count(raw.get("input_tokens_details"), "cached_tokens"),
                        reasoning=count(raw.get("output_tokens_details"), "reasoning_tokens"),
                        total=count(raw, "total_tokens"),
                    )
                if kind == "response.incomplete":
                    details = response.get("incomplete_details") or {}
                    self.reason = details.get("reason") or "incomplete"
            self.end_all()
            self.complete = True
        return self.take()

    def end(self) -> list[StreamEvent]:
        stop = self.stop_for(self.reason, self.stops)
        error = None
        if stop == "error":  # incomplete_details.reason "content_filter"
            error = ErrorInfo(kind="content_filter", message=_FILTERED)
        return self.closing(stop, self.totals, error)

    def _text_done(self, key: dict[str, Any], final: Any) -> None:
        at = self._text_block(key)
        if final and not self.blocks[at].parts:
            self.add(at, final)
        self.close(at)

    def _annotate(self, at: int, annotations: list[Any]) -> None:
        for raw in annotations:
            cited = from_openai(raw) if isinstance(raw, dict) else None
            if cited is not None:
                self.cite(at, cited)

    def _reasoning_delta(self, event: dict[str, Any]) -> None:
        at = self._find(event)
        if at is None or self.blocks[at].kind != "thinking" or not event.get("delta"):
            return
        summary_index = event.get("summary_index", 0)
        if summary_index != self.summary_index.get(at, 0) and self.blocks[at].parts:
            self.add(at, "\n\n")  # summary parts are separate paragraphs
        self.summary_index[at] = summary_index
        self.add(at, event["delta"])

    def _find(self, event: dict[str, Any]) -> int | None:
        item_id = event.get("item_id")
        if isinstance(item_id, str) and item_id in self.item_ids:
            return self.item_ids[item_id]
        return self.items.get(event.get("output_index", -1))

    def _text_block(self, event: dict[str, Any]) -> int:
        key = (event.get("output_index", -1), event.get("content_index", 0))
        at = self.parts.get(key)
        if at is None:
            at = self.parts[key] = self.open("text")
        return at

    def _item_added(self, event: dict[str, Any]) -> int | None:
        item = event.get("item") or {}
        kind = item.get("type")
        if kind == "reasoning":
            at = self.open("thinking")
        elif kind == "function_call":
            call_id = item.get("call_id") or item.get("id") or ""
            at = self.open("tool", id=call_id, name=item.get("name") or "")
        else:
            return None  # messages open per content part; other item kinds are not mapped
        self.items[event.get("output_index", at)] = at
        if isinstance(item.get("id"), str):
            self.item_ids[item["id"]] = at
        return at

    def _item_done(self, event: dict[str, Any]) -> None:
        item = event.get("item") or {}
        kind = item.get("type")
        output_index = event.get("output_index", -1)
        if kind == "message":
            for content_index, part in enumerate(item.get("content") or []):
                text = part.get("text") if part.get("type") == "output_text" else None
                text = text if text is not None else part.get("refusal")
                if text is not None:
                    key = {"output_index": output_index, "content_index": content_index}
                    annotations = part.get("annotations")
                    if annotations and isinstance(annotations, list):  # the final word
                        cited = self._text_block(key)
                        self.blocks[cited].citations = []
                        self._annotate(cited, annotations)
                    self._text_done(key, text)
            return
        if kind not in ("reasoning", "function_call"):
            return
        at = self._find({"item_id": item.get("id"), "output_index": output_index})
        at = self._item_added(event) if at is None else at
        assert at is not None  # a reasoning item or function call always opens a block
        block = self.blocks[at]
        if kind == "reasoning":
            texts = [part.get("text", "") for part in item.get("summary") or []]
            text = "\n\n".join(t for t in texts if t)
            if text and not block.parts:
                self.add(at, text)
            signature: dict[str, Any] = {"type": "reasoning", "id": item.get("id")}
            if item.get("encrypted_content"):
                signature["encrypted_content"] = item["encrypted_content"]
            block.signature = to_json(signature).decode()
        else:
            arguments = item.get("arguments")
            if isinstance(arguments, str) and arguments:
                if not block.parts:
                    self.add(at, arguments)
                block.parts = [arguments]  # the item's final text is authoritative
        self.close(at)
