"""Gemini responses (streamed as SSE or a JSON array, or whole) into stream events."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic_core import from_json

from ..types import ErrorInfo
from ..types.usage import StopReason
from ._assemble import Assembler, count, usage
from ._citations import from_gemini
from ._convert import safe_tool_call_id
from ._errors import classify
from ._sse import MAX_LINE_CHARS, SSEDecoder, SSEEvent, StreamLineTooLong
from .base import StreamEvent

# finishReason as a name or, with enum-encoding=int, as its proto number.
_FINISH_NAMES = (
    "FINISH_REASON_UNSPECIFIED STOP MAX_TOKENS SAFETY RECITATION OTHER BLOCKLIST"
    " PROHIBITED_CONTENT SPII MALFORMED_FUNCTION_CALL"
).split()
_FILTERED = frozenset(
    "SAFETY RECITATION BLOCKLIST PROHIBITED_CONTENT SPII IMAGE_SAFETY IMAGE_PROHIBITED_CONTENT"
    " IMAGE_RECITATION LANGUAGE".split()
)


class ChunkDecoder:
    """Response chunks from an SSE body or a streamed JSON array (told by the first byte)."""

    def __init__(self, max_line: int = MAX_LINE_CHARS) -> None:
        self.max_line = max_line
        self._inner: SSEDecoder | _JSONArrayDecoder | None = None
        self._head = b""

    def feed(self, data: bytes) -> list[Any]:
        if self._inner is None:
            self._head += data
            stripped = self._head.lstrip()
            if not stripped:
                return []
            data, self._head = self._head, b""
            array = stripped[:1] in (b"[", b"{")
            self._inner = _JSONArrayDecoder(self.max_line) if array else SSEDecoder(self.max_line)
        if isinstance(self._inner, SSEDecoder):
            return _data(self._inner.feed(data))
        return self._inner.feed(data)

    def close(self) -> list[Any]:
        return _data(self._inner.close()) if isinstance(self._inner, SSEDecoder) else []


def _data(events: list[SSEEvent]) -> list[Any]:
    return [from_json(event.data) for event in events if event.data.strip()]


class _JSONArrayDecoder:
    """Each top-level object of a JSON array (or a lone object) once its brace closes. On bytes:
    UTF-8 never reuses an ASCII byte (every structural character is one) inside a character."""

    def __init__(self, max_line: int = MAX_LINE_CHARS) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._pos = 0
        self._depth = 0
        self._start = -1
        self._in_string = False
        self._escaped = False
        self._array = False

    def feed(self, data: bytes) -> list[Any]:
        buffer = self._buffer
        buffer += data
        if len(buffer) - max(self._start, 0) > self.max_line:
            raise StreamLineTooLong(self.max_line)
        found: list[Any] = []
        i = self._pos
        while i < len(buffer):
            char = buffer[i]
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == 0x5C:  # backslash
                    self._escaped = True
                elif char == 0x22:  # quote
                    self._in_string = False
            elif char == 0x22:
                self._in_string = True
            elif char in (0x7B, 0x5B):  # { [
                if self._depth == 0 and char == 0x5B:
                    self._array = True
                elif self._depth == (1 if self._array else 0):
                    self._start = i
                self._depth += 1
            elif char in (0x7D, 0x5D):  # } ]
                self._depth -= 1
                if self._start >= 0 and self._depth == (1 if self._array else 0):
                    found.append(from_json(bytes(buffer[self._start : i + 1])))
                    self._start = -1
            i += 1
        keep = self._start if self._start >= 0 else i
        del buffer[:keep]
        self._pos = i - keep
        if self._start >= 0:
            self._start = 0
        return found


def _finish_name(value: Any) -> str:
    if isinstance(value, int):
        known = 0 <= value < len(_FINISH_NAMES)
        return _FINISH_NAMES[value] if known else f"FINISH_REASON_{value}"
    return str(value)


class Response(Assembler):
    """Response chunks into the shared assembler's calls."""

    decoder = ChunkDecoder
    stops: dict[str, StopReason] = {"STOP": "stop", "MAX_TOKENS": "length"}
    unfinished = "the Gemini stream ended before a candidate reported its finishReason"

    def __init__(self, provider: str, model: str) -> None:
        super().__init__(provider, model)
        self.finish_message: str | None = None
        self.blocked: str | None = None
        self.usage: dict[str, Any] = {}
        self._id_base = uuid.uuid4().hex[:16]  # for call ids when there is no response id
        self.grounding: dict[str, Any] | None = None  # the candidate's latest groundingMetadata

    def whole(self, payload: Any) -> list[Any]:
        return payload if isinstance(payload, list) else [payload]

    def feed(self, chunk: Any) -> list[StreamEvent]:
        if not isinstance(chunk, dict):
            return []
        if "error" in chunk:
            error = chunk["error"]
            status = error.get("code") if isinstance(error, dict) else None
            raise classify(status if isinstance(status, int) else 0, chunk, provider=self.provider)
        if isinstance(chunk.get("responseId"), str):
            self.response_id = chunk["responseId"]
        if isinstance(chunk.get("modelVersion"), str):
            self.model = chunk["modelVersion"]
        self.start()
        if isinstance(chunk.get("usageMetadata"), dict):
            self.usage = chunk["usageMetadata"]
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            self.blocked = str(feedback["blockReason"])
            self.reason = self.reason or self.blocked
            self.complete = True
        candidates = chunk.get("candidates") or []
        candidate = next(
            (c for c in candidates if isinstance(c, dict) and c.get("index", 0) == 0), None
        )
        if not isinstance(candidate, dict):
            return self.take()
        if isinstance(candidate.get("groundingMetadata"), dict):
            self.grounding = candidate["groundingMetadata"]
        content = candidate.get("content") or {}
        for part in content.get("parts") or []:
            if isinstance(part, dict):
                self._part(part)
        reason = candidate.get("finishReason")
        if reason not in (None, 0, "FINISH_REASON_UNSPECIFIED"):
            self.reason = _finish_name(reason)
            self.complete = True
            if isinstance(candidate.get("finishMessage"), str):
                self.finish_message = candidate["finishMessage"]
        return self.take()

    def _part(self, part: dict[str, Any]) -> None:
        signature = part.get("thoughtSignature")
        call = part.get("functionCall")
        text = part.get("text")
        if isinstance(signature, str) and signature:
            self.close_current()
            self.close(self.open("thinking", signature=signature))
        if isinstance(call, dict):
            self.whole_tool(self._call_id(call), str(call.get("name", "")), call.get("args"))
        elif isinstance(text, str) and text:
            self.text("thinking" if part.get("thought") else "text", text)

    def _call_id(self, call: dict[str, Any]) -> str:
        given = call.get("id")
        if isinstance(given, str) and given:
            return given
        # Gemini gives no call ids: derive one from the response id, unique per call.
        n = sum(block.kind == "tool" for block in self.blocks)
        return safe_tool_call_id(f"call_{self.response_id or self._id_base}_{n}")

    def _ground(self) -> None:
        """Grounding (Search, a RAG corpus, Maps) as the citations of the answer's text: it
        comes with the last chunks, and its offsets count in the text of the last text block."""
        texts = [at for at, block in enumerate(self.blocks) if block.kind == "text"]
        if self.grounding is None or not texts:
            return
        block = self.blocks[texts[-1]]
        block.citations = from_gemini(self.grounding, "".join(block.parts))

    def end(self) -> list[StreamEvent]:
        self._ground()
        meta = self.usage  # tool-use prompt tokens are input that promptTokenCount leaves out
        prompt = count(meta, "promptTokenCount") + count(meta, "toolUsePromptTokenCount")
        thoughts = count(meta, "thoughtsTokenCount")
        output = count(meta, "candidatesTokenCount") + thoughts
        cached, total = count(meta, "cachedContentTokenCount"), count(meta, "totalTokenCount")
        totals = usage(prompt, output, cache_read=cached, reasoning=thoughts, total=total)
        stop = self.stop_for(self.reason, self.stops, default="error")
        if self.blocked is not None:
            error = ErrorInfo(
                kind="content_filter", message=f"Gemini blocked the prompt: {self.blocked}"
            )
        elif stop == "error":
            kind = "content_filter" if self.reason in _FILTERED else "model_error"
            detail = f": {self.finish_message}" if self.finish_message else ""
            error = ErrorInfo(kind=kind, message=f"Gemini stopped with {self.reason}{detail}")
        else:
            return self.closing(stop, totals)
        return self.closing("error", totals, error)
