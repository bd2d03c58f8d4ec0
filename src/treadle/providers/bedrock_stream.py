"""Bedrock ConverseStream frames (and whole Converse responses) into stream events, and
Bedrock's errors (an exception's name in a header or a frame) as ProviderErrors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import from_json, to_json

from ..types import ErrorInfo
from ..types.usage import StopReason
from ._assemble import Assembler, count, json_object, usage
from ._citations import from_bedrock
from ._errors import classify, parse_retry_after
from ._eventstream import EventStreamDecoder, Frame
from .base import ErrorKind, ProviderError, StreamEvent

# Bedrock's exceptions (lower-cased, without "exception") as error kinds; an exception not
# here is read from its status and message as any other error (a context overflow is a
# ValidationException whose message says so).
_KINDS: dict[str, ErrorKind] = {
    "throttling": "rate_limit",
    "servicequotaexceeded": "rate_limit",
    "serviceunavailable": "overloaded",
    "modelnotready": "overloaded",
    "internalserver": "server",
    "internalfailure": "server",
    "modelstreamerror": "server",
    "modelerror": "server",
    "modeltimeout": "timeout",
    "accessdenied": "auth",
    "unrecognizedclient": "auth",
    "invalidsignature": "auth",
    "incompletesignature": "auth",
    "expiredtoken": "auth",
    "missingauthenticationtoken": "auth",
    "resourcenotfound": "bad_request",
}
# The status each exception has in the service model, for one that arrives in a frame.
_STATUS = {"throttling": 429, "serviceunavailable": 503, "internalserver": 500,
           "modelstreamerror": 424, "validation": 400}  # fmt: skip
_FILTERED = {"guardrail_intervened", "content_filtered"}


def error_type(raw: str) -> str:
    """``ThrottlingException:http://internal.amazon.com/...`` -> ``ThrottlingException``."""
    return raw.split(":", 1)[0].strip()


def bedrock_error(
    name: str,
    payload: Any,
    *,
    status: int,
    provider: str,
    headers: Mapping[str, str] | None = None,
    fallback: str = "",
) -> ProviderError:
    """A Bedrock exception (its name, its ``{"message": ...}`` body) as a ProviderError; the
    message starts with the exception's name, as AWS's SDKs show it."""
    key = name.lower().removesuffix("exception")
    generic = classify(status, payload, provider=provider, headers=headers, fallback=fallback)
    kind = _KINDS.get(key, generic.kind)
    message = f"{name}: {generic.message}" if name else generic.message
    retry_after = generic.retry_after
    if retry_after is None and kind == "rate_limit" and headers:
        retry_after = parse_retry_after(headers)
    return ProviderError(
        kind, message, status_code=status or None, retry_after=retry_after, provider=provider
    )


class BedrockResponse(Assembler):
    """ConverseStream events into the shared assembler's calls."""

    stops: dict[str, StopReason] = {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "tool_use": "tool_use",
        "max_tokens": "length",
        "model_context_window_exceeded": "length",
        "guardrail_intervened": "error",
        "content_filtered": "error",
        "malformed_model_output": "error",
        "malformed_tool_use": "error",
    }
    unfinished = "the stream ended before messageStop"

    def __init__(self, provider: str, model: str) -> None:
        super().__init__(provider, model)
        self.index_map: dict[int, int] = {}  # Bedrock's contentBlockIndex -> treadle's index
        self.totals = usage(0, 0)

    def decoder(self, max_line: int) -> EventStreamDecoder:
        return EventStreamDecoder(max_line)

    def whole(self, payload: Any) -> list[Any]:
        """A Converse response as the stream events that would have carried it."""
        body = json_object(payload, self.provider)
        message = (body.get("output") or {}).get("message") or {}
        events: list[Any] = [("messageStart", {"role": "assistant"})]
        for index, block in enumerate(message.get("content") or []):
            events.extend(_whole_block(index, block))
        events.append(("messageStop", {"stopReason": body.get("stopReason")}))
        events.append(("metadata", {"usage": body.get("usage")}))
        return events

    def feed(self, value: Frame | tuple[str, dict[str, Any]]) -> list[StreamEvent]:
        name, event = _unframe(value, self.provider) if isinstance(value, Frame) else value
        if name != "metadata":
            self.start()
        if name == "contentBlockStart":
            start = (event.get("start") or {}).get("toolUse")
            if isinstance(start, dict):
                at = self.open("tool", id=start.get("toolUseId", ""), name=start.get("name", ""))
                self.index_map[event.get("contentBlockIndex", at)] = at
        elif name == "contentBlockDelta":
            self._delta(event.get("contentBlockIndex", -1), event.get("delta") or {})
        elif name == "contentBlockStop":
            stopped = self.index_map.get(event.get("contentBlockIndex", -1))
            if stopped is not None:
                self.close(stopped)
        elif name == "messageStop":
            self.reason = event.get("stopReason")
            self.end_all()
            self.complete = True  # metadata (the usage) follows, read before the end
        elif name == "metadata":
            raw = event.get("usage")
            read, write = count(raw, "cacheReadInputTokens"), count(raw, "cacheWriteInputTokens")
            prompt = count(raw, "inputTokens") + read + write  # inputTokens leaves the cache out
            details = raw.get("cacheDetails") if isinstance(raw, dict) else None
            long = sum(count(d, "inputTokens") for d in details or () if _ttl(d) == "1h")
            self.totals = usage(prompt, count(raw, "outputTokens"), cache_read=read,
                                cache_write=write, cache_write_long=long,
                                total=count(raw, "totalTokens"))  # fmt: skip
        return self.take()

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        """A delta to block ``index``, opening it on its first (text and reasoning blocks
        have no contentBlockStart)."""
        at = self.index_map.get(index)
        if "toolUse" in delta:
            if at is not None and self.blocks[at].kind == "tool":
                piece = (delta["toolUse"] or {}).get("input")
                if isinstance(piece, str) and piece:
                    self.add(at, piece)
            return
        if "text" in delta or isinstance(delta.get("citation"), dict):
            kind, text = "text", delta.get("text")  # a cited block: citations and its text
        elif isinstance(delta.get("reasoningContent"), dict):
            kind, text = "thinking", ""
        else:
            return  # other kinds have no treadle content type
        if at is None:
            at = self.index_map[index] = self.open(kind)  # type: ignore[arg-type]
        block = self.blocks[at]
        if block.kind != kind:
            return
        if kind == "text":
            if isinstance(delta.get("citation"), dict):
                self.cite(at, from_bedrock(delta["citation"]))
            if isinstance(text, str) and text:
                self.add(at, text)
            return
        reasoning = delta["reasoningContent"]
        if isinstance(reasoning.get("text"), str) and reasoning["text"] and not block.redacted:
            self.add(at, reasoning["text"])
        if isinstance(reasoning.get("signature"), str):
            block.signature = (block.signature or "") + reasoning["signature"]
        if isinstance(reasoning.get("redactedContent"), str):  # base64, kept as the signature
            block.redacted = True
            block.signature = (block.signature or "") + reasoning["redactedContent"]

    def end(self) -> list[StreamEvent]:
        stop = self.stop_for(self.reason, self.stops)
        if stop != "error":
            return self.closing(stop, self.totals)
        kind = "content_filter" if self.reason in _FILTERED else "model_error"
        error = ErrorInfo(kind=kind, message=f"Bedrock stopped with {self.reason}")
        return self.closing("error", self.totals, error)


def _ttl(detail: Any) -> Any:
    return detail.get("ttl") if isinstance(detail, dict) else None


def _unframe(frame: Frame, provider: str) -> tuple[str, dict[str, Any]]:
    """A frame's event name and JSON body; an exception or error frame raised."""
    headers = frame.headers
    kind = headers.get(":message-type")
    if kind == "exception":
        name = str(headers.get(":exception-type", ""))
        payload = _json(frame.payload, provider) or {}
        status = _STATUS.get(name.lower().removesuffix("exception"), 0)
        label = name[:1].upper() + name[1:]  # throttlingException -> ThrottlingException
        raise bedrock_error(label, payload, status=status, provider=provider)
    if kind == "error":
        code = str(headers.get(":error-code", "")) or "Error"
        text = str(headers.get(":error-message", "")) or "the stream reported an error"
        raise bedrock_error(code, {"message": text}, status=0, provider=provider)
    body = _json(frame.payload, provider)
    return str(headers.get(":event-type", "")), body if isinstance(body, dict) else {}


def _json(data: bytes, provider: str) -> Any:
    try:
        return from_json(data) if data else None
    except ValueError:
        message = f"an event's payload is not JSON: {data[:200]!r}"
        raise ProviderError("server", message, provider=provider) from None


def _whole_block(index: int, block: Any) -> list[tuple[str, dict[str, Any]]]:
    """One content block of a Converse response as the events that would have streamed it."""
    if not isinstance(block, dict):
        return []
    at = {"contentBlockIndex": index}
    if isinstance(block.get("text"), str):
        deltas = [{"text": block["text"]}]
    elif isinstance(block.get("citationsContent"), dict):  # text with the sources it cites
        cited = block["citationsContent"]
        deltas = [{"citation": c} for c in cited.get("citations") or () if isinstance(c, dict)]
        parts = [p.get("text") for p in cited.get("content") or () if isinstance(p, dict)]
        deltas.append({"text": "".join(p for p in parts if isinstance(p, str))})
    elif isinstance(block.get("reasoningContent"), dict):
        reasoning = block["reasoningContent"]
        if "redactedContent" in reasoning:
            deltas = [{"reasoningContent": {"redactedContent": reasoning["redactedContent"]}}]
        else:
            text = reasoning.get("reasoningText") or {}
            deltas = [{"reasoningContent": {"text": text.get("text", "")}}]
            if text.get("signature"):
                deltas.append({"reasoningContent": {"signature": text["signature"]}})
    elif isinstance(block.get("toolUse"), dict):
        use = block["toolUse"]
        start = {"toolUse": {"toolUseId": use.get("toolUseId", ""), "name": use.get("name", "")}}
        arguments = to_json(use.get("input", {})).decode()
        return [
            ("contentBlockStart", {**at, "start": start}),
            ("contentBlockDelta", {**at, "delta": {"toolUse": {"input": arguments}}}),
            ("contentBlockStop", at),
        ]
    else:
        return []
    return [*(("contentBlockDelta", {**at, "delta": d}) for d in deltas), ("contentBlockStop", at)]
