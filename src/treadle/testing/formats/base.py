"""What every wire format shares: the encoder base class, the request context, helpers."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from ...types import AssistantMessage, ToolCall

FormatName = Literal[
    "openai", "anthropic", "responses", "gemini", "ollama", "bedrock", "vertex", "vertex-anthropic"
]
StreamErrorKind = Literal["overloaded", "rate_limit", "server"]

_TOKEN = re.compile(r"\s*(?:\w+|[^\w\s]+)|\s+")


def pieces(text: str, size: int | None) -> list[str]:
    """``text`` cut into deltas: word-like tokens (``"Hello"``, ``" world"``, ``"!"``), the
    way models stream, or fixed ``size``-character pieces. Joined, they give ``text``."""
    if not text:
        return []
    if size:
        return [text[i : i + size] for i in range(0, len(text), size)]
    return _TOKEN.findall(text)


def dumps(value: Any) -> str:
    """Compact JSON with raw UTF-8, as OpenAI and Anthropic send it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def google_dumps(value: Any) -> str:
    """Gemini's JSON layout: ``": "`` after keys, ``","`` between items."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ": "))


def sse(data: Any, event: str | None = None, *, sep: str = "\n\n") -> bytes:
    text = data if isinstance(data, str) else dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}{sep}".encode()


def arguments_text(call: ToolCall) -> str:
    return call.raw_arguments if call.raw_arguments is not None else dumps(call.arguments)


def number(value: float) -> str:
    """``2``, ``0.5``, ``0.001``: a plain decimal, never an exponent."""
    if value == int(value):
        return str(int(value))
    return f"{value:.6f}".rstrip("0").rstrip(".")


@dataclass
class Context:
    """What an encoder needs besides the message."""

    model: str
    response_id: str | None
    serial: int
    chunk_size: int | None = None
    include_usage: bool = True
    query: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def pieces(self, text: str) -> list[str]:
        return pieces(text, self.chunk_size)


@dataclass
class Encoded:
    """A streamed response: ``events`` then ``tail`` (the events that complete it)."""

    events: list[bytes]
    tail: list[bytes]
    content_type: str


class Format:
    """The wire format of one API."""

    name: FormatName
    label: str
    endpoint: re.Pattern[str]
    endpoint_hint: str
    default_model: str
    reasoning_field = "reasoning_content"  # only Chat Completions uses it
    stream_content_type = "text/event-stream; charset=utf-8"
    json_content_type = "application/json"

    def is_stream(self, url_path: str, query: str, body: Any) -> bool:
        return isinstance(body, dict) and body.get("stream") is True

    def model_of(self, url_path: str, body: Any) -> str:
        if isinstance(body, dict) and isinstance(body.get("model"), str) and body["model"]:
            return str(body["model"])
        return self.default_model

    def response_id(self, serial: int) -> str:
        return f"resp_wirefake{serial:06d}"

    def refuse(self, url_path: str, body: Any) -> tuple[int, str] | None:
        """``(status, message)`` for a request the API rejects whatever the script says (a
        body it does not accept), answered before a script item is taken; None: accepted."""
        return None

    def check(self, message: AssistantMessage) -> None:
        """Raise ValueError when ``message`` cannot be said in this format."""
        self.finish(message)

    def finish(self, message: AssistantMessage) -> str:
        raise NotImplementedError

    def stream(self, message: AssistantMessage, ctx: Context) -> Encoded:
        raise NotImplementedError

    def whole(self, message: AssistantMessage, ctx: Context) -> bytes:
        raise NotImplementedError

    def error_body(self, status: int, message: str | None, ctx: Context) -> Any:
        raise NotImplementedError

    def error_event(self, kind: StreamErrorKind, message: str | None, ctx: Context) -> bytes:
        raise NotImplementedError

    def extra_headers(self, ctx: Context) -> dict[str, str]:
        return {}

    def error_headers(self, status: int) -> dict[str, str]:
        """Headers an error response of ``status`` carries (Bedrock names its exception in one)."""
        return {}

    def error_bytes(self, payload: Any) -> bytes:
        """An HTTP error body laid out as the API sends it."""
        return dumps(payload).encode()

    def _unsupported(self, message: AssistantMessage, what: str) -> ValueError:
        return ValueError(
            f"a {self.label} response cannot carry {what} (message {message.text[:40]!r}); "
            "use Fail or StreamError for failures"
        )


def has_calls(message: AssistantMessage) -> bool:
    return any(isinstance(block, ToolCall) for block in message.content)
