"""The Gemini generateContent wire format (SSE and JSON arrays, Google errors)."""

from __future__ import annotations

import json
import re
from typing import Any

from ...types import AssistantMessage, TextContent, ThinkingContent, ToolCall, Usage
from .base import (
    Context,
    Encoded,
    Format,
    FormatName,
    StreamErrorKind,
    google_dumps,
    sse,
)

# ---------------------------------------------------------------- Gemini

_GOOGLE_STATUS = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: ("UNAUTHENTICATED", "Request had invalid authentication credentials."),
    403: ("PERMISSION_DENIED", "The caller does not have permission."),
    404: ("NOT_FOUND", "Requested entity was not found."),
    429: (
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    500: (
        "INTERNAL",
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
    ),
    503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
    504: ("DEADLINE_EXCEEDED", "Deadline expired before operation could complete."),
}

_GOOGLE_EVENTS: dict[StreamErrorKind, int] = {"overloaded": 503, "rate_limit": 429, "server": 500}
_GEMINI_MODEL = re.compile(r"/((?:models|tunedModels)/[^/:]+):")


class GeminiFormat(Format):
    """``models/{model}:streamGenerateContent?alt=sse`` (SSE with ``\\r\\n\\r\\n``), the same
    without ``alt=sse`` (one JSON array, streamed), and ``:generateContent``.

    Signatures follow the adapter's convention: an empty ThinkingContent carrying a signature
    puts it on the next part (``thoughtSignature``); a thinking block with text and a signature
    carries it on its first part (and comes back as a carrier plus the thinking)."""

    name: FormatName = "gemini"
    label = "Gemini"
    endpoint = re.compile(r":(?:stream)?[gG]enerateContent$")
    endpoint_hint = "POST .../models/{model}:streamGenerateContent"
    default_model = "gemini-2.5-flash"
    stream_content_type = "text/event-stream"
    json_content_type = "application/json; charset=UTF-8"

    def is_stream(self, url_path: str, query: str, body: Any) -> bool:
        return url_path.endswith(":streamGenerateContent")

    def model_of(self, url_path: str, body: Any) -> str:
        found = _GEMINI_MODEL.search(url_path)
        if found is None:
            return self.default_model
        return found.group(1).removeprefix("models/")

    def response_id(self, serial: int) -> str:
        return f"wirefake{serial:06d}"

    def check(self, message: AssistantMessage) -> None:
        self.finish(message)
        for block in message.content:
            if isinstance(block, ToolCall) and block.raw_arguments is not None:
                raise self._unsupported(message, "raw (invalid JSON) tool arguments")

    def finish(self, message: AssistantMessage) -> str:
        if message.stop_reason == "aborted":
            raise self._unsupported(message, 'stop_reason="aborted"')
        if message.stop_reason == "length":
            return "MAX_TOKENS"
        if message.stop_reason == "error":
            return "SAFETY"
        return "STOP"

    def _usage(self, usage: Usage, *, final: bool) -> dict[str, Any]:
        prompt = usage.input + usage.cache_read
        if not final:
            return {"promptTokenCount": prompt, "totalTokenCount": prompt}
        candidates = max(0, usage.output - usage.reasoning)
        out: dict[str, Any] = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": candidates,
            "totalTokenCount": usage.total_tokens or prompt + candidates + usage.reasoning,
        }
        if usage.cache_read:
            out["cachedContentTokenCount"] = usage.cache_read
        out["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": prompt}]
        if usage.reasoning:
            out["thoughtsTokenCount"] = usage.reasoning
        return out

    def _parts(self, message: AssistantMessage, ctx: Context, *, split: bool) -> list[Any]:
        """The parts, one per delta (``split``) or one per block."""
        parts: list[dict[str, Any]] = []
        pending: str | None = None

        def emit(part: dict[str, Any], signature: str | None = None) -> None:
            nonlocal pending
            signature = signature or pending
            pending = None
            if signature:
                part["thoughtSignature"] = signature
            parts.append(part)

        for block in message.content:
            if isinstance(block, ThinkingContent):
                if block.redacted:
                    continue
                if not block.thinking:
                    if block.signature:
                        if pending:
                            emit({"text": ""})
                        pending = block.signature
                    continue
                texts = ctx.pieces(block.thinking) if split else [block.thinking]
                for i, text in enumerate(texts):
                    emit({"text": text, "thought": True}, block.signature if i == 0 else None)
            elif isinstance(block, TextContent):
                texts = ctx.pieces(block.text) if split else [block.text]
                for text in texts or ([""] if pending else []):
                    emit({"text": text})
            else:
                emit(
                    {"functionCall": {"id": block.id, "name": block.name, "args": block.arguments}}
                )
        if pending:
            emit({"text": ""})
        return parts

    def _chunk(
        self, ctx: Context, parts: list[Any], usage: dict[str, Any], finish: str | None = None
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        if finish is not None:
            candidate["finishReason"] = finish
        candidate["index"] = 0
        return {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": ctx.model,
            "responseId": ctx.response_id or self.response_id(ctx.serial),
        }

    def stream(self, message: AssistantMessage, ctx: Context) -> Encoded:
        """SSE with ``alt=sse``; without it, one JSON array whose elements stream."""
        partial = self._usage(message.usage, final=False)
        chunks = [
            self._chunk(ctx, [part], partial) for part in self._parts(message, ctx, split=True)
        ]
        final = self._chunk(
            ctx, [{"text": ""}], self._usage(message.usage, final=True), self.finish(message)
        )
        if "alt=sse" in ctx.query:
            events = [sse(google_dumps(c), sep="\r\n\r\n") for c in chunks]
            return Encoded(
                events, [sse(google_dumps(final), sep="\r\n\r\n")], self.stream_content_type
            )
        texts = [google_dumps(c) for c in chunks]
        array = [("[" if i == 0 else ",\r\n") + t for i, t in enumerate(texts)]
        last = ("[" if not texts else ",\r\n") + google_dumps(final) + "]"
        return Encoded([e.encode() for e in array], [last.encode()], self.json_content_type)

    def whole(self, message: AssistantMessage, ctx: Context) -> bytes:
        parts = self._parts(message, ctx, split=False)
        payload = self._chunk(
            ctx, parts, self._usage(message.usage, final=True), self.finish(message)
        )
        return google_dumps(payload).encode()

    def error_body(self, status: int, message: str | None, ctx: Context) -> Any:
        code, text = _GOOGLE_STATUS.get(
            status, ("INTERNAL" if status >= 500 else "FAILED_PRECONDITION", f"HTTP {status}")
        )
        if status == 404 and message is None:
            text = (
                f"models/{ctx.model} is not found for API version v1beta, or is not supported "
                "for generateContent."
            )
        return {"error": {"code": status, "message": message or text, "status": code}}

    def error_bytes(self, payload: Any) -> bytes:
        return (json.dumps(payload, ensure_ascii=False, indent=2) + "\n").encode()

    def error_event(self, kind: StreamErrorKind, message: str | None, ctx: Context) -> bytes:
        body = self.error_body(_GOOGLE_EVENTS[kind], message, ctx)
        return sse(google_dumps(body), sep="\r\n\r\n")
