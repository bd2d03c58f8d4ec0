"""The AWS Bedrock Converse wire format: ConverseStream's eventstream frames, Converse's JSON,
and Bedrock's errors (the exception's name in ``x-amzn-ErrorType``, ``{"message"}`` bodies,
exception frames mid-stream). boto3's ``bedrock-runtime`` client reads these bytes
(tests/testing/test_bedrock_boto3.py)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from ...providers._eventstream import encode
from ...types import AssistantMessage, TextContent, ThinkingContent, ToolCall, Usage
from .base import Context, Encoded, Format, FormatName, StreamErrorKind, arguments_text, dumps

# HTTP statuses as Bedrock's exceptions, with the messages Bedrock sends for them.
ERRORS: dict[int, tuple[str, str]] = {
    400: ("ValidationException", "Malformed input request, please reformat your input and try "
          "again."),
    401: ("UnrecognizedClientException", "The security token included in the request is invalid."),
    403: ("AccessDeniedException", "You don't have access to the model with the specified model "
          "ID."),
    404: ("ResourceNotFoundException", "The provided model identifier is invalid."),
    408: ("ModelTimeoutException", "Model has timed out in processing the request. Try your "
          "request again."),
    424: ("ModelErrorException", "The model encountered an error processing the request."),
    429: ("ThrottlingException", "Too many requests, please wait before trying again."),
    500: ("InternalServerException", "The server encountered an internal error while processing "
          "the request."),
    503: ("ServiceUnavailableException", "The service is overloaded right now. Try your request "
          "again later."),
}  # fmt: skip
_EVENTS: dict[StreamErrorKind, int] = {"overloaded": 503, "rate_limit": 429, "server": 500}
_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_use": "tool_use"}
_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_MODEL = re.compile(r"/model/(.+)/converse(?:-stream)?$")  # an ARN's "/" arrives decoded
ERROR_NAMESPACE = ":http://internal.amazon.com/coral/com.amazon.bedrock/"


def exception_name(status: int) -> str:
    """The Bedrock exception an HTTP status stands for."""
    if status in ERRORS:
        return ERRORS[status][0]
    return "InternalServerException" if status >= 500 else "ValidationException"


def frame(event: str, body: dict[str, Any], serial: int = 0) -> bytes:
    """One ConverseStream event frame, its body padded with ``p`` as Bedrock pads them."""
    padded = {**body, "p": _PADDING[: 1 + (serial * 7 + len(event)) % len(_PADDING)]}
    headers = {":event-type": event, ":content-type": "application/json", ":message-type": "event"}
    return encode(headers, dumps(padded).encode())


def exception_frame(name: str, message: str) -> bytes:
    """A mid-stream exception frame (``throttlingException`` …) with its ``{"message"}``."""
    headers = {":exception-type": name, ":content-type": "application/json",
               ":message-type": "exception"}  # fmt: skip
    return encode(headers, dumps({"message": message}).encode())


def _usage(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {"inputTokens": usage.input, "outputTokens": usage.output}
    if usage.cache_read:
        out["cacheReadInputTokens"] = usage.cache_read
    if usage.cache_write:
        out["cacheWriteInputTokens"] = usage.cache_write
    out["totalTokens"] = usage.total_tokens
    if usage.cache_write_long:
        out["cacheDetails"] = _cache_details(usage)
    return out


def _cache_details(usage: Usage) -> list[dict[str, Any]]:
    """The cache writes by retention, as Bedrock details them (none without writes)."""
    short = usage.cache_write - usage.cache_write_long
    spans = (("5m", short), ("1h", usage.cache_write_long))
    return [{"ttl": ttl, "inputTokens": n} for ttl, n in spans if n]


class BedrockFormat(Format):
    """``POST /model/{modelId}/converse-stream`` (eventstream frames: messageStart, blocks as
    contentBlockStart / Delta / Stop, messageStop, metadata) and ``/converse`` (JSON)."""

    name: FormatName = "bedrock"
    label = "Bedrock Converse"
    endpoint = _MODEL
    endpoint_hint = "POST .../model/{modelId}/converse or .../converse-stream"
    default_model = "anthropic.claude-3-5-sonnet-20241022-v2:0"
    stream_content_type = "application/vnd.amazon.eventstream"

    def is_stream(self, url_path: str, query: str, body: Any) -> bool:
        return url_path.endswith("/converse-stream")

    def model_of(self, url_path: str, body: Any) -> str:
        found = _MODEL.search(url_path)
        return unquote(found.group(1)) if found else self.default_model

    def extra_headers(self, ctx: Context) -> dict[str, str]:
        return {"x-amzn-requestid": f"00000000-0000-4000-8000-{ctx.serial:012d}"}

    def error_headers(self, status: int) -> dict[str, str]:
        return {"x-amzn-errortype": exception_name(status) + ERROR_NAMESPACE}

    def finish(self, message: AssistantMessage) -> str:
        if message.stop_reason == "error" and message.error is not None:
            if message.error.kind == "content_filter":
                return "content_filtered"
        if message.stop_reason in ("error", "aborted"):
            raise self._unsupported(message, f"stop_reason={message.stop_reason!r}")
        if message.stop_reason == "stop" and any(isinstance(b, ToolCall) for b in message.content):
            return "tool_use"
        return _STOP[message.stop_reason]

    def stream(self, message: AssistantMessage, ctx: Context) -> Encoded:
        stop = self.finish(message)
        events = [frame("messageStart", {"role": "assistant"}, ctx.serial)]
        for index, block in enumerate(message.content):
            events.extend(self._block(index, block, ctx))
        metadata = {"usage": _usage(message.usage), "metrics": {"latencyMs": 120 + ctx.serial}}
        tail = [
            frame("messageStop", {"stopReason": stop}, ctx.serial),
            frame("metadata", metadata, ctx.serial),
        ]
        return Encoded(events, tail, self.stream_content_type)

    def _block(
        self, index: int, block: TextContent | ThinkingContent | ToolCall, ctx: Context
    ) -> list[bytes]:
        def delta(body: dict[str, Any]) -> bytes:
            return frame("contentBlockDelta", {"contentBlockIndex": index, "delta": body}, index)

        out: list[bytes] = []
        if isinstance(block, TextContent):
            out.extend(delta({"text": piece}) for piece in ctx.pieces(block.text))
        elif isinstance(block, ThinkingContent) and block.redacted:
            out.append(delta({"reasoningContent": {"redactedContent": block.signature or ""}}))
        elif isinstance(block, ThinkingContent):
            out.extend(
                delta({"reasoningContent": {"text": piece}}) for piece in ctx.pieces(block.thinking)
            )
            if block.signature:
                out.append(delta({"reasoningContent": {"signature": block.signature}}))
        else:
            start = {"toolUse": {"toolUseId": block.id, "name": block.name}}
            body = {"start": start, "contentBlockIndex": index}
            out.append(frame("contentBlockStart", body, index))
            out.extend(
                delta({"toolUse": {"input": piece}}) for piece in ctx.pieces(arguments_text(block))
            )
        out.append(frame("contentBlockStop", {"contentBlockIndex": index}, index))
        return out

    def whole(self, message: AssistantMessage, ctx: Context) -> bytes:
        content: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextContent):
                content.append({"text": block.text})
            elif isinstance(block, ThinkingContent) and block.redacted:
                content.append({"reasoningContent": {"redactedContent": block.signature or ""}})
            elif isinstance(block, ThinkingContent):
                text: dict[str, Any] = {"text": block.thinking}
                if block.signature:
                    text["signature"] = block.signature
                content.append({"reasoningContent": {"reasoningText": text}})
            else:
                use = {"toolUseId": block.id, "name": block.name, "input": block.arguments}
                content.append({"toolUse": use})
        payload = {
            "metrics": {"latencyMs": 120 + ctx.serial},
            "output": {"message": {"content": content, "role": "assistant"}},
            "stopReason": self.finish(message),
            "usage": _usage(message.usage),
        }
        return dumps(payload).encode()

    def error_body(self, status: int, message: str | None, ctx: Context) -> Any:
        text = ERRORS.get(status, ("", f"The request failed with status {status}."))[1]
        if status == 404 and message is None:
            text = f"The provided model identifier is invalid: {ctx.model}"
        return {"message": message or text}

    def error_event(self, kind: StreamErrorKind, message: str | None, ctx: Context) -> bytes:
        name, text = ERRORS[_EVENTS[kind]]
        return exception_frame(name[:1].lower() + name[1:], message or text)
