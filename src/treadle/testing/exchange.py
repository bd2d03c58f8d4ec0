"""One HTTP exchange with a fake provider: the request as received, and the reply to send
(status, headers, body chunks, pacing, a cut connection)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

import anyio
import anyio.lowlevel
import httpx

if TYPE_CHECKING:
    from ..providers.anthropic import Anthropic
    from ..providers.bedrock import Bedrock
    from ..providers.gemini import Gemini
    from ..providers.ollama import Ollama
    from ..providers.openai_chat import OpenAIChat
    from ..providers.openai_responses import OpenAIResponses

    WireAdapter = Union[OpenAIChat, OpenAIResponses, Anthropic, Gemini, Ollama, Bedrock]


# ---------------------------------------------------------------- requests and replies

_STATUS_TEXT = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Site Overloaded",
}


@dataclass
class RecordedRequest:
    """One request the fake received. ``json`` is the parsed body (``None`` if not JSON).
    ``connection`` numbers the TCP connection it came on when served by :func:`serve`."""

    method: str
    url: str
    path: str
    query: str
    body: bytes = field(repr=False)
    headers: httpx.Headers = field(repr=False)
    json: Any = field(repr=False, default=None)
    connection: int | None = None

    @property
    def stream(self) -> bool | None:
        """The body's ``stream`` field, when there is one."""
        value = self.json.get("stream") if isinstance(self.json, dict) else None
        return value if isinstance(value, bool) else None

    @classmethod
    def build(
        cls,
        method: str,
        url: str,
        headers: Iterable[tuple[str, str]],
        body: bytes,
        connection: int | None = None,
    ) -> RecordedRequest:
        parsed = httpx.URL(url)
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = None
        return cls(
            method=method.upper(),
            url=url,
            path=parsed.path,
            query=parsed.query.decode("ascii", "replace"),
            body=body,
            headers=httpx.Headers(list(headers)),
            json=payload,
            connection=connection,
        )


@dataclass
class Reply:
    """How to answer one request: status, headers, body chunks and their pacing.

    Shared by :class:`FakeTransport` and the local server; ``chunked`` says whether the body
    is a stream (sent with chunked transfer encoding by the server)."""

    status: int
    headers: list[tuple[str, str]]
    chunks: list[bytes]
    chunked: bool = False
    delay: float = 0.0
    start_delay: float = 0.0
    reset: bool = False

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        """The body, paced: ``delay`` before each chunk (a checkpoint when there is none)."""
        for chunk in self.chunks:
            if self.delay:
                await anyio.sleep(self.delay)
            else:
                await anyio.lowlevel.checkpoint()
            yield chunk

    @property
    def reason(self) -> str:
        return _STATUS_TEXT.get(self.status, "Unknown")


class ReplyStream(httpx.AsyncByteStream):
    def __init__(self, reply: Reply) -> None:
        self._reply = reply

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._reply.iter_chunks():
            yield chunk
        if self._reply.reset:
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body "
                "(incomplete chunked read)"
            )

    async def aclose(self) -> None:
        return None


def streamed(content_type: str) -> bool:
    """Whether a body of ``content_type`` is a stream (sent chunked): SSE, NDJSON, AWS's
    eventstream."""
    lowered = content_type.lower()
    return any(kind in lowered for kind in ("event-stream", "ndjson", "vnd.amazon.eventstream"))


def rechunk(chunks: list[bytes], size: int | None) -> list[bytes]:
    if not size:
        return chunks
    out: list[bytes] = []
    for chunk in chunks:
        out.extend(chunk[i : i + size] for i in range(0, len(chunk), size))
    return out
