"""Wire-level fakes: real provider HTTP responses from a script, through an httpx transport.

``ScriptedProvider`` replaces the provider; these fakes replace the *server*, so the real
adapter (request building, SSE/NDJSON decoding, tool-call assembly, error mapping, retries)
runs exactly as in production::

    fake = WireFake.openai(["Hello!", Fail(429, retry_after=0.01), "Hi again"])
    provider = OpenAIChat("gpt-4o-mini", api_key="test", client=fake.client())
    ...
    assert fake.requests[0].json["messages"][-1]["content"] == "hi"

A script item is an :class:`~treadle.types.AssistantMessage` (or a plain string: a text
answer), an injected failure (:class:`Fail`, :class:`Truncate`, :class:`StreamError`), a
pacing wrapper (:class:`Slow`), raw bytes (:class:`Raw`), or a callable that receives the
:class:`RecordedRequest` and returns one of those. Each request takes the next item.

For code that needs a real socket, :func:`treadle.testing.serve` puts the same fake behind a
local HTTP/1.1 server.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import anyio
import anyio.lowlevel
import httpx

from ..errors import UsageError
from ..types import AssistantMessage, TextContent, Usage
from .exchange import RecordedRequest, Reply, ReplyStream, rechunk, streamed
from .formats import Context, Format, FormatName, StreamErrorKind, get_format, number

if TYPE_CHECKING:
    from ..providers.anthropic import Anthropic
    from ..providers.bedrock import Bedrock
    from ..providers.gemini import Gemini
    from ..providers.ollama import Ollama
    from ..providers.openai_chat import OpenAIChat
    from ..providers.openai_responses import OpenAIResponses
    from ..providers.vertex import VertexAnthropic, VertexGemini

    WireAdapter = Union[
        OpenAIChat,
        OpenAIResponses,
        Anthropic,
        Gemini,
        Ollama,
        Bedrock,
        VertexGemini,
        VertexAnthropic,
    ]

__all__ = [
    "Fail",
    "FakeTransport",
    "Raw",
    "RecordedRequest",
    "Slow",
    "StreamError",
    "Truncate",
    "WireFake",
    "WireItem",
]

MessageLike = Union[AssistantMessage, str]


def _message(value: MessageLike) -> AssistantMessage:
    if isinstance(value, str):
        return AssistantMessage(content=[TextContent(text=value)])
    return value


# ---------------------------------------------------------------- script items


def _with_usage(message: AssistantMessage, request: RecordedRequest) -> AssistantMessage:
    """A message scripted without usage reports a plausible estimate, as a real API would
    (about 4 bytes of request JSON per input token), so tests of limits and cost through a
    fake mean something. Usage given in the script is sent as it is."""
    if message.usage != Usage():
        return message
    prompt = max(1, len(request.body) // 4)
    output = max(1, sum(len(block.model_dump_json()) for block in message.content) // 4)
    usage = Usage(input=prompt, output=output, total_tokens=prompt + output)
    return message.model_copy(update={"usage": usage})


@dataclass(frozen=True)
class Fail:
    """An HTTP error response in the provider's own error shape.

    ``retry_after`` (seconds) adds a ``retry-after`` header (and, for Gemini, a RetryInfo
    ``retryDelay``; for OpenAI a "try again in" hint in the message). ``message`` replaces the
    default error text; ``body`` replaces the whole body (a dict is sent as JSON, a string or
    bytes as they are). ``headers`` are added to the response.
    """

    status: int = 500
    retry_after: float | None = None
    body: Any = None
    message: str | None = None
    headers: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Truncate:
    """A streamed answer cut short: the first ``after`` events of ``message``, then the
    connection closes cleanly, without the events that complete a response (finish chunk and
    ``[DONE]``, ``message_delta``/``message_stop``, ``response.completed``, Gemini's
    ``finishReason`` chunk, Ollama's ``done`` line). Adapters report ``truncated_stream``.

    ``mid_event=True`` also sends the first half of the next event (a partial line).
    ``reset=True`` drops the connection instead of ending the body (a network error: httpx
    raises ``RemoteProtocolError``). For a non-streamed request the JSON body is cut in half.
    """

    message: MessageLike = "This answer is cut off before it"
    after: int = 3
    mid_event: bool = False
    reset: bool = False


@dataclass(frozen=True)
class StreamError:
    """HTTP 200, the first ``after`` events of ``message``, then the provider's mid-stream
    error event (Anthropic ``event: error`` with ``overloaded_error``, OpenAI
    ``data: {"error": ...}``, a Responses ``error`` event, a Gemini error chunk, an Ollama
    ``{"error": ...}`` line) and the end of the stream. ``kind`` picks the error:
    ``"overloaded"``, ``"rate_limit"`` or ``"server"``; ``error`` replaces its message text.
    A non-streamed request gets the matching HTTP error instead (503, or Anthropic's 529;
    429; 500)."""

    message: MessageLike = "Let me think about"
    after: int = 2
    kind: StreamErrorKind = "overloaded"
    error: str | None = None


@dataclass(frozen=True)
class Slow:
    """``item`` streamed with ``delay`` seconds (``anyio.sleep``) before each event, after
    ``start_delay`` seconds before the response headers. ``item`` may be a message, a string,
    a :class:`Truncate`, a :class:`StreamError` or a :class:`Raw`."""

    item: Any = "This answer takes its time to arrive."
    delay: float = 0.05
    start_delay: float = 0.0


@dataclass(frozen=True)
class Raw:
    """A response sent exactly as given: ``body`` as bytes (a string is UTF-8 encoded; a list
    of chunks is sent chunk by chunk, otherwise line by line)."""

    body: str | bytes | Sequence[bytes] = b""
    status: int = 200
    headers: Mapping[str, str] = field(
        default_factory=lambda: {"content-type": "text/event-stream; charset=utf-8"}
    )

    @classmethod
    def from_fixture(cls, source: str | Path | Mapping[str, Any]) -> Raw:
        """The response of a recorded exchange (a ``shared/fixtures/wire`` file or a
        cassette exchange): status, headers and body as recorded."""
        data: Mapping[str, Any]
        if isinstance(source, Mapping):
            data = source
        else:
            data = json.loads(Path(source).read_text(encoding="utf-8"))
        response = data["response"]
        body = response.get("body", "")
        if not isinstance(body, str):
            body = json.dumps(body)
        return cls(body=body, status=int(response["status"]), headers=dict(response["headers"]))


WireItem = Union[AssistantMessage, str, Fail, Truncate, StreamError, Slow, Raw]
"""What one request is answered with."""

Responder = Callable[["RecordedRequest"], Union[WireItem, Awaitable[WireItem]]]
Gate = Callable[["RecordedRequest"], Union[WireItem, None]]
"""Sees each request to the endpoint first: an item (a :class:`Fail`) answers it without
taking a script item; None lets it through (``WireFake.vertex(..., gate=tokens.check)``)."""
ScriptEntry = Union[WireItem, Responder]


# ---------------------------------------------------------------- the fake


class FakeTransport(httpx.AsyncBaseTransport):
    """An httpx transport that answers like a provider's API, from a script.

    ``format`` is ``"openai"`` (Chat Completions), ``"anthropic"``, ``"responses"`` (OpenAI
    Responses), ``"gemini"``, ``"ollama"``, ``"vertex"`` (Gemini on Vertex AI) or
    ``"vertex-anthropic"`` (Claude on Vertex AI). Every request is kept in :attr:`requests`; each
    one that reaches the API's endpoint takes the next script item and gets a streamed
    answer when it asked for one (``"stream": true``; Gemini's ``:streamGenerateContent``,
    with or without ``alt=sse``; Ollama unless ``"stream": false``), else the JSON body.
    A single string is a one-answer script: ``WireFake.openai("Hello!")``.

    When the script runs out, ``default`` answers (if given); otherwise the request gets an
    HTTP 400 in the provider's error shape whose message says the script is exhausted: an
    adapter raises a non-retryable ``bad_request`` ProviderError, the loop ends the turn with
    that text in ``error``, and :meth:`assert_done` fails. A request to another path gets a
    404 that names the expected endpoint and takes no item.

    ``chunk_size`` cuts text and tool arguments into pieces of that many characters (default:
    word-like tokens, as models stream them); ``split`` re-cuts every body chunk into pieces
    of at most that many bytes (anywhere, even inside a UTF-8 character) to exercise
    decoders; ``delay`` paces every streamed event (like :class:`Slow`).

    ``gate`` sees each request to the endpoint before the script does (a credentials
    check: :meth:`~treadle.testing.GoogleOAuthFake.check` accepts only live tokens); an
    item it returns is the answer, and no script item is taken.

    httpx applies no timeouts to a custom transport; use :func:`serve` to test timeouts.
    """

    def __init__(
        self,
        format: FormatName | str,
        script: Iterable[ScriptEntry] | str = (),
        *,
        default: ScriptEntry | None = None,
        chunk_size: int | None = None,
        split: int | None = None,
        delay: float = 0.0,
        reasoning_field: str | None = None,
        gate: Gate | None = None,
    ) -> None:
        self.format: Format = get_format(format)
        self.gate = gate
        if reasoning_field is not None:
            self.format.reasoning_field = reasoning_field
        self.script: list[ScriptEntry] = []
        self.default = default
        self.chunk_size = chunk_size
        self.split = split
        self.delay = delay
        self.requests: list[RecordedRequest] = []
        self.unanswered: list[RecordedRequest] = []
        self._next = 0
        self._serial = 0
        self._lock = threading.Lock()
        self.add(*([script] if isinstance(script, str) else script))
        if default is not None:
            self._check(default)

    # -- construction helpers --

    @classmethod
    def openai(cls, script: Iterable[ScriptEntry] | str = (), **options: Any) -> FakeTransport:
        """A fake OpenAI Chat Completions API (``OpenAIChat``)."""
        return cls("openai", script, **options)

    @classmethod
    def anthropic(cls, script: Iterable[ScriptEntry] | str = (), **options: Any) -> FakeTransport:
        """A fake Anthropic Messages API (``Anthropic``)."""
        return cls("anthropic", script, **options)

    @classmethod
    def responses(cls, script: Iterable[ScriptEntry] | str = (), **options: Any) -> FakeTransport:
        """A fake OpenAI Responses API (``OpenAIResponses``)."""
        return cls("responses", script, **options)

    @classmethod
    def gemini(cls, script: Iterable[ScriptEntry] | str = (), **options: Any) -> FakeTransport:
        """A fake Gemini API (``Gemini``)."""
        return cls("gemini", script, **options)

    @classmethod
    def ollama(cls, script: Iterable[ScriptEntry] | str = (), **options: Any) -> FakeTransport:
        """A fake Ollama server (``Ollama``)."""
        return cls("ollama", script, **options)

    @classmethod
    def bedrock(cls, script: Iterable[ScriptEntry] | str = (), **options: Any) -> FakeTransport:
        """A fake AWS Bedrock Runtime, Converse and ConverseStream (``Bedrock``)."""
        return cls("bedrock", script, **options)

    @classmethod
    def vertex(cls, script: Iterable[ScriptEntry] | str = (), **options: Any) -> FakeTransport:
        """A fake Vertex AI serving Gemini (``VertexGemini``)."""
        return cls("vertex", script, **options)

    @classmethod
    def vertex_anthropic(
        cls, script: Iterable[ScriptEntry] | str = (), **options: Any
    ) -> FakeTransport:
        """A fake Vertex AI serving Claude (``VertexAnthropic``)."""
        return cls("vertex-anthropic", script, **options)

    def add(self, *items: ScriptEntry) -> None:
        """Append items to the script (messages are checked against the format now)."""
        for item in items:
            self._check(item)
        with self._lock:
            self.script.extend(items)

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        """A new ``httpx.AsyncClient`` that sends everything to this fake."""
        return httpx.AsyncClient(transport=self, **kwargs)

    def provider(self, model: str | None = None, **kwargs: Any) -> WireAdapter:
        """The matching treadle adapter, wired to this fake with a dummy key (a fixed token
        and the project ``wirefake-project`` for Vertex).

        Keyword arguments go to the adapter. Pass ``client=None, base_url=url`` to talk to
        the fake through :func:`serve` over a real socket instead."""
        from ..providers.anthropic import Anthropic
        from ..providers.bedrock import Bedrock
        from ..providers.gemini import Gemini
        from ..providers.ollama import Ollama
        from ..providers.openai_chat import OpenAIChat
        from ..providers.openai_responses import OpenAIResponses

        kwargs.setdefault("client", self.client())
        name = model or self.format.default_model
        if self.format.name in ("vertex", "vertex-anthropic"):
            from ..providers.vertex import VertexAnthropic, VertexGemini

            if "credentials" not in kwargs:
                kwargs.setdefault("auth", lambda: "wirefake-token")
            kwargs.setdefault("project", "wirefake-project")
            kwargs.setdefault("location", "us-central1")
            if self.format.name == "vertex":
                return VertexGemini(name, **kwargs)
            return VertexAnthropic(name, **kwargs)
        if self.format.name == "openai":
            kwargs.setdefault("api_key", "wirefake-key")
            return OpenAIChat(name, **kwargs)
        if self.format.name == "responses":
            kwargs.setdefault("api_key", "wirefake-key")
            return OpenAIResponses(name, **kwargs)
        if self.format.name == "anthropic":
            kwargs.setdefault("api_key", "wirefake-key")
            return Anthropic(name, **kwargs)
        if self.format.name == "gemini":
            kwargs.setdefault("api_key", "wirefake-key")
            return Gemini(name, **kwargs)
        if self.format.name == "bedrock":  # a Bedrock API key: no AWS credentials needed
            if kwargs.get("auth") is None:
                kwargs.setdefault("api_key", "wirefake-key")
            kwargs.setdefault("region", "us-east-1")
            return Bedrock(name, **kwargs)
        kwargs.setdefault("base_url", "http://localhost:11434")
        return Ollama(name, **kwargs)

    # -- state --

    @property
    def remaining(self) -> int:
        """Script items not yet used."""
        return len(self.script) - self._next

    def assert_done(self) -> None:
        """Fail unless every item was used and no request found the script exhausted."""
        problems = []
        if self.remaining:
            problems.append(f"{self.remaining} script item(s) were never requested")
        if self.unanswered:
            paths = ", ".join(f"{r.method} {r.path}" for r in self.unanswered)
            problems.append(f"{len(self.unanswered)} request(s) found no item: {paths}")
        if problems:
            raise AssertionError(f"{self!r}: " + "; ".join(problems))

    def __repr__(self) -> str:
        return (
            f"FakeTransport({self.format.name!r}, requests={len(self.requests)}, "
            f"remaining={self.remaining})"
        )

    # -- answering --

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        recorded = RecordedRequest.build(
            request.method, str(request.url), request.headers.multi_items(), body
        )
        reply = await self.respond(recorded)
        if reply.start_delay:
            await anyio.sleep(reply.start_delay)
        return httpx.Response(
            reply.status,
            headers=reply.headers,
            stream=ReplyStream(reply),
            request=request,
        )

    async def respond(self, request: RecordedRequest) -> Reply:
        """Record ``request`` and work out its answer (used by the transport and the server)."""
        with self._lock:
            self.requests.append(request)
            self._serial += 1
            serial = self._serial
            ctx = Context(
                model=self.format.model_of(request.path, request.json),
                response_id=None,
                serial=serial,
                chunk_size=self.chunk_size,
                include_usage=self._include_usage(request),
                query=request.query,
            )
            if request.method != "POST" or not self.format.endpoint.search(request.path):
                return self._not_here(request, ctx)
            refused = self.format.refuse(request.path, request.json)
            if refused is not None:
                return self._error_reply(refused[0], refused[1], ctx, "refused")
            barred = self.gate(request) if self.gate is not None else None
            if barred is not None:
                return self._render(barred, request, ctx, delay=0.0, start_delay=0.0)
            if self._next < len(self.script):
                item: ScriptEntry | None = self.script[self._next]
                self._next += 1
            else:
                item = self.default
            if item is None:
                self.unanswered.append(request)
                return self._exhausted(request, ctx)
        if callable(item):
            produced = item(request)
            item = await produced if inspect.isawaitable(produced) else produced
            self._check(item)
        return self._render(item, request, ctx, delay=self.delay, start_delay=0.0)

    def _include_usage(self, request: RecordedRequest) -> bool:
        if self.format.name != "openai" or not isinstance(request.json, dict):
            return True
        if request.json.get("stream") is not True:
            return True
        options = request.json.get("stream_options")
        return isinstance(options, dict) and options.get("include_usage") is True

    def _check(self, item: Any) -> None:
        if isinstance(item, Slow):
            self._check(item.item)
        elif isinstance(item, (Truncate, StreamError)):
            self.format.check(_message(item.message))
        elif isinstance(item, (AssistantMessage, str)):
            self.format.check(_message(item))
        elif not isinstance(item, (Fail, Raw)) and not callable(item):
            raise UsageError(
                f"not a wire script item: {item!r} (use an AssistantMessage, a string, Fail, "
                "Truncate, StreamError, Slow, Raw or a callable)"
            )

    def _render(
        self, item: Any, request: RecordedRequest, ctx: Context, *, delay: float, start_delay: float
    ) -> Reply:
        if isinstance(item, Slow):
            return self._render(
                item.item, request, ctx, delay=item.delay, start_delay=item.start_delay
            )
        if isinstance(item, Fail):
            reply = self._fail(item, ctx)
        elif isinstance(item, Raw):
            reply = self._raw(item)
        else:
            reply = self._answer(item, request, ctx)
        reply.delay = delay
        reply.start_delay = start_delay
        reply.chunks = rechunk(reply.chunks, self.split)
        return reply

    def _headers(self, content_type: str, ctx: Context) -> list[tuple[str, str]]:
        headers = [("content-type", content_type)]
        headers.extend(self.format.extra_headers(ctx).items())
        return headers

    def _answer(self, item: Any, request: RecordedRequest, ctx: Context) -> Reply:
        cut: Truncate | None = item if isinstance(item, Truncate) else None
        failure: StreamError | None = item if isinstance(item, StreamError) else None
        message = _with_usage(_message(item.message if cut or failure else item), request)
        if message.model:
            ctx.model = message.model
        ctx.response_id = message.response_id
        fmt = self.format
        if not fmt.is_stream(request.path, request.query, request.json):
            body = fmt.whole(message, ctx)
            if failure is not None:
                overloaded = 529 if "anthropic" in fmt.name else 503
                status = {"overloaded": overloaded, "rate_limit": 429}.get(failure.kind, 500)
                error = fmt.error_body(status, failure.error, ctx)
                headers = self._headers(fmt.json_content_type, ctx)
                headers.extend(fmt.error_headers(status).items())
                return Reply(status, headers, [fmt.error_bytes(error)])
            if cut is not None:
                return Reply(
                    200,
                    self._headers(fmt.json_content_type, ctx),
                    [body[: len(body) // 2]],
                    reset=cut.reset,
                )
            return Reply(200, self._headers(fmt.json_content_type, ctx), [body])
        encoded = fmt.stream(message, ctx)
        headers = self._headers(encoded.content_type, ctx)
        if cut is not None:
            chunks = encoded.events[: max(0, cut.after)]
            if cut.mid_event:
                rest = encoded.events[len(chunks) :] + encoded.tail
                if rest:
                    chunks.append(rest[0][: max(1, len(rest[0]) // 2)])
            return Reply(200, headers, chunks, chunked=True, reset=cut.reset)
        if failure is not None:
            chunks = encoded.events[: max(0, failure.after)]
            chunks.append(fmt.error_event(failure.kind, failure.error, ctx))
            return Reply(200, headers, chunks, chunked=True)
        return Reply(200, headers, encoded.events + encoded.tail, chunked=True)

    def _fail(self, item: Fail, ctx: Context) -> Reply:
        fmt = self.format
        headers = self._headers(fmt.json_content_type, ctx)
        if item.body is None:
            message = item.message
            if (
                message is None
                and item.retry_after is not None
                and fmt.name
                in (
                    "openai",
                    "responses",
                )
            ):
                message = (
                    "Rate limit reached for requests. "
                    f"Please try again in {number(item.retry_after)}s."
                )
            payload = fmt.error_body(item.status, message, ctx)
            if fmt.name in ("gemini", "vertex") and item.retry_after is not None:
                payload["error"]["details"] = [
                    {
                        "@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": f"{number(item.retry_after)}s",
                    }
                ]
            body = fmt.error_bytes(payload)
        elif isinstance(item.body, bytes):
            body = item.body
        elif isinstance(item.body, str):
            body = item.body.encode()
        else:
            body = json.dumps(item.body).encode()
        given = {name.lower() for name in item.headers or {}}  # the item's own win
        headers.extend((k, v) for k, v in fmt.error_headers(item.status).items() if k not in given)
        if item.retry_after is not None:
            headers.append(("retry-after", number(item.retry_after)))
        if item.headers:
            headers.extend(item.headers.items())
        return Reply(item.status, headers, [body])

    def _raw(self, item: Raw) -> Reply:
        if isinstance(item.body, (str, bytes)):
            data = item.body.encode() if isinstance(item.body, str) else item.body
            chunks = data.splitlines(keepends=True) or [b""]
        else:
            chunks = list(item.body)
        content_type = next((v for k, v in item.headers.items() if k.lower() == "content-type"), "")
        return Reply(
            item.status, list(item.headers.items()), chunks, chunked=streamed(content_type)
        )

    def _error_reply(self, status: int, message: str, ctx: Context, why: str = "") -> Reply:
        body = self.format.error_bytes(self.format.error_body(status, message, ctx))
        headers = self._headers(self.format.json_content_type, ctx)
        headers.extend(self.format.error_headers(status).items())
        why = why or ("script-exhausted" if status == 400 else "no-route")
        headers.append(("x-wirefake-error", why))
        return Reply(status, headers, [body])

    def _not_here(self, request: RecordedRequest, ctx: Context) -> Reply:
        message = (
            f"WireFake({self.format.name}): no such endpoint: {request.method} {request.path}; "
            f"this fake answers {self.format.endpoint_hint}"
        )
        return self._error_reply(404, message, ctx)

    def _exhausted(self, request: RecordedRequest, ctx: Context) -> Reply:
        message = (
            f"WireFake({self.format.name}): the script is exhausted: it held "
            f"{len(self.script)} response(s) and this is request "
            f"{self._next + len(self.unanswered)}. "
            "Add more items to the script (or give default=)."
        )
        return self._error_reply(400, message, ctx)


WireFake = FakeTransport
"""The name the examples use: ``WireFake.openai([...])`` makes a :class:`FakeTransport`."""
