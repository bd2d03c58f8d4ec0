"""The OpenAI Responses wire format (output items, sequence numbers, errors)."""

from __future__ import annotations

import json
import re
from typing import Any

from ...types import AssistantMessage, TextContent, ThinkingContent, Usage
from .base import (
    Context,
    Encoded,
    Format,
    FormatName,
    StreamErrorKind,
    arguments_text,
    dumps,
    sse,
)
from .openai import OPENAI_STREAM_ERRORS, openai_error

# ---------------------------------------------------------------- OpenAI Responses


def _reasoning_ids(block: ThinkingContent, serial: int, index: int) -> tuple[str, str | None]:
    """The item id and encrypted content for a thinking block. A signature in the adapter's
    own form (``{"type": "reasoning", "id", "encrypted_content"}``) is unpacked; any other
    signature is sent as the encrypted content."""
    if block.signature:
        try:
            data = json.loads(block.signature)
        except ValueError:
            data = None
        if isinstance(data, dict) and data.get("type") == "reasoning":
            item_id = data.get("id") if isinstance(data.get("id"), str) else None
            encrypted = data.get("encrypted_content")
            return (
                item_id or f"rs_wirefake{serial:06d}_{index}",
                encrypted if isinstance(encrypted, str) else None,
            )
        return f"rs_wirefake{serial:06d}_{index}", block.signature
    return f"rs_wirefake{serial:06d}_{index}", None


class ResponsesFormat(Format):
    """``POST /v1/responses``: typed events with sequence numbers; reasoning items with a
    summary, message items with output_text parts, function_call items with argument deltas."""

    name: FormatName = "responses"
    label = "OpenAI Responses"
    endpoint = re.compile(r"/responses$")
    endpoint_hint = "POST .../v1/responses"
    default_model = "gpt-4o-mini"

    def extra_headers(self, ctx: Context) -> dict[str, str]:
        return {"x-request-id": f"req_wirefake{ctx.serial:06d}"}

    def finish(self, message: AssistantMessage) -> str:
        if message.stop_reason == "aborted":
            raise self._unsupported(message, f"stop_reason={message.stop_reason!r}")
        return "incomplete" if message.stop_reason in ("length", "error") else "completed"

    def _incomplete(self, message: AssistantMessage) -> str:
        """Why an incomplete response stopped: a content filter (an ``error`` stop)."""
        return "content_filter" if message.stop_reason == "error" else "max_output_tokens"

    def _usage(self, usage: Usage) -> dict[str, Any]:
        prompt = usage.input + usage.cache_read
        return {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": usage.cache_read},
            "output_tokens": usage.output,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning},
            "total_tokens": usage.total_tokens or prompt + usage.output,
        }

    def _response(
        self,
        ctx: Context,
        status: str,
        output: list[Any],
        usage: Any,
        reason: str = "max_output_tokens",
    ) -> dict[str, Any]:
        return {
            "id": ctx.response_id or self.response_id(ctx.serial),
            "object": "response",
            "created_at": ctx.created,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": ({"reason": reason} if status == "incomplete" else None),
            "instructions": None,
            "max_output_tokens": None,
            "model": ctx.model,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": False,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": {},
        }

    def _items(self, message: AssistantMessage, ctx: Context) -> list[dict[str, Any]]:
        """The finished output items, one per content block."""
        items: list[dict[str, Any]] = []
        for index, block in enumerate(message.content):
            if isinstance(block, ThinkingContent):
                item_id, encrypted = _reasoning_ids(block, ctx.serial, index)
                item: dict[str, Any] = {"id": item_id, "type": "reasoning"}
                if encrypted is not None:
                    item["encrypted_content"] = encrypted
                item["summary"] = (
                    [{"type": "summary_text", "text": block.thinking}] if block.thinking else []
                )
                items.append(item)
            elif isinstance(block, TextContent):
                items.append(
                    {
                        "id": f"msg_wirefake{ctx.serial:06d}_{index}",
                        "type": "message",
                        "status": "completed",
                        "content": [
                            {
                                "type": "output_text",
                                "annotations": [],
                                "logprobs": [],
                                "text": block.text,
                            }
                        ],
                        "role": "assistant",
                    }
                )
            else:
                items.append(
                    {
                        "id": f"fc_wirefake{ctx.serial:06d}_{index}",
                        "type": "function_call",
                        "status": "completed",
                        "arguments": arguments_text(block),
                        "call_id": block.id,
                        "name": block.name,
                    }
                )
        return items

    def stream(self, message: AssistantMessage, ctx: Context) -> Encoded:
        status = self.finish(message)
        seq = 0

        def event(kind: str, **fields: Any) -> bytes:
            nonlocal seq
            payload = {"type": kind, "sequence_number": seq, **fields}
            seq += 1
            return sse(payload, kind)

        events = [
            event("response.created", response=self._response(ctx, "in_progress", [], None)),
            event("response.in_progress", response=self._response(ctx, "in_progress", [], None)),
        ]
        items = self._items(message, ctx)
        for at, (block, item) in enumerate(zip(message.content, items, strict=True)):
            where = {"item_id": item["id"], "output_index": at}
            if isinstance(block, ThinkingContent):
                added = {**item, "summary": []}
                events.append(event("response.output_item.added", output_index=at, item=added))
                if block.thinking:
                    summary_part = {"type": "summary_text", "text": ""}
                    events.append(
                        event(
                            "response.reasoning_summary_part.added",
                            **where,
                            summary_index=0,
                            part=summary_part,
                        )
                    )
                    for piece in ctx.pieces(block.thinking):
                        events.append(
                            event(
                                "response.reasoning_summary_text.delta",
                                **where,
                                summary_index=0,
                                delta=piece,
                            )
                        )
                    events.append(
                        event(
                            "response.reasoning_summary_text.done",
                            **where,
                            summary_index=0,
                            text=block.thinking,
                        )
                    )
                    done_part = {"type": "summary_text", "text": block.thinking}
                    events.append(
                        event(
                            "response.reasoning_summary_part.done",
                            **where,
                            summary_index=0,
                            part=done_part,
                        )
                    )
            elif isinstance(block, TextContent):
                added = {**item, "status": "in_progress", "content": []}
                events.append(event("response.output_item.added", output_index=at, item=added))
                part: dict[str, Any] = {
                    "type": "output_text",
                    "annotations": [],
                    "logprobs": [],
                    "text": "",
                }
                events.append(
                    event("response.content_part.added", **where, content_index=0, part=part)
                )
                for piece in ctx.pieces(block.text):
                    events.append(
                        event(
                            "response.output_text.delta",
                            **where,
                            content_index=0,
                            delta=piece,
                            logprobs=[],
                        )
                    )
                events.append(
                    event(
                        "response.output_text.done",
                        **where,
                        content_index=0,
                        text=block.text,
                        logprobs=[],
                    )
                )
                events.append(
                    event(
                        "response.content_part.done",
                        **where,
                        content_index=0,
                        part=item["content"][0],
                    )
                )
            else:
                added = {**item, "status": "in_progress", "arguments": ""}
                events.append(event("response.output_item.added", output_index=at, item=added))
                for piece in ctx.pieces(item["arguments"]):
                    events.append(
                        event("response.function_call_arguments.delta", **where, delta=piece)
                    )
                events.append(
                    event(
                        "response.function_call_arguments.done",
                        **where,
                        arguments=item["arguments"],
                    )
                )
            events.append(event("response.output_item.done", output_index=at, item=item))
        usage = self._usage(message.usage)
        final = self._response(ctx, status, items, usage, self._incomplete(message))
        tail = [event(f"response.{status}", response=final)]
        return Encoded(events, tail, self.stream_content_type)

    def whole(self, message: AssistantMessage, ctx: Context) -> bytes:
        status = self.finish(message)
        items = self._items(message, ctx)
        usage = self._usage(message.usage)
        payload = self._response(ctx, status, items, usage, self._incomplete(message))
        return dumps(payload).encode()

    def error_body(self, status: int, message: str | None, ctx: Context) -> Any:
        return openai_error(status, message, ctx.model)

    def error_bytes(self, payload: Any) -> bytes:
        return (json.dumps(payload, ensure_ascii=False, indent=4) + "\n").encode()

    def error_event(self, kind: StreamErrorKind, message: str | None, ctx: Context) -> bytes:
        error_type, code, text = OPENAI_STREAM_ERRORS[kind]
        payload = {
            "type": "error",
            "code": code or error_type,
            "message": message or text,
            "param": None,
            "sequence_number": 0,
        }
        return sse(payload, "error")
