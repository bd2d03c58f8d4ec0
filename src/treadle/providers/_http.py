"""What every HTTP adapter shares: one client per instance, the request queue, errors and
secrets, and the one async generator that drives a call from the request to StreamDone."""

from __future__ import annotations

import functools
import os
import re
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypedDict, TypeVar

import anyio.lowlevel
import httpx
from pydantic_core import from_json

from .._redact import redact_http_logs, redact_url
from .._signals import Signal
from ..cancellation import CancellationToken
from ..errors import UsageError
from ._assemble import Assembler, _cancelled, check_cancel, coalesce
from ._auth import Credentials, as_auth, auth_secrets
from ._errors import _STALE_CONNECTION, check_base_url, classify, transport_error
from ._sse import MAX_LINE_CHARS, StreamCut
from .base import ProviderError, StreamEvent

# No pool timeout: a request waits in the adapter's own queue (see ``max_connections``)
# for as long as the run allows (its cancellation, ``max_duration_s``, ``max_idle_s``).
DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=30.0, pool=None)
Body = dict[str, Any] | bytes  # a JSON object, or its JSON already encoded (sent as is)
_parsed = functools.lru_cache(maxsize=64)(httpx.URL)  # the few endpoints, parsed once
_CA_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "SSLKEYLOGFILE")  # what httpx reads for TLS


@functools.lru_cache(maxsize=8)
def _tls_for(_variables: tuple[str | None, ...]) -> ssl.SSLContext:
    return httpx.create_ssl_context(verify=True, trust_env=True)


def _tls_context() -> ssl.SSLContext:
    """The TLS settings of every client an adapter makes, as httpx makes them by default (its
    CA certificates, ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set), made once: reading the
    certificates costs ~50 ms of CPU, which each new adapter paid again. Changed variables
    make a context of their own."""
    return _tls_for(tuple(map(os.environ.get, _CA_VARIABLES)))


def _current_loop() -> object:
    """The running event loop's token: two of one loop are equal (anyio's public value
    type), so no opaque native object is read."""
    try:
        return anyio.lowlevel.current_token()
    except RuntimeError:
        return None


def key_variable(provider: str) -> str:
    """The environment variable a provider's key is read from: ``groq`` -> ``GROQ_API_KEY``."""
    return re.sub(r"[^A-Z0-9]", "_", provider.upper()) + "_API_KEY"


def env_key(*names: str) -> str | None:
    return next(filter(None, map(os.environ.get, names)), None)


_AdapterT = TypeVar("_AdapterT", bound="HTTPAdapter")


class HTTPOptions(TypedDict, total=False):
    """The keyword options every HTTP adapter takes after the model (docs/providers.md)."""

    api_key: str | None
    base_url: str | None
    client: httpx.AsyncClient | None
    timeout: float | httpx.Timeout | None
    headers: Mapping[str, str] | None
    stream: bool
    auth: Credentials | None


def _scrubbing(stream: Any) -> Any:
    """``stream`` with every ProviderError it raises passed through :meth:`HTTPAdapter.scrub`
    (the stream ``_events`` makes scrubs its own: it is returned as it is)."""

    @functools.wraps(stream)
    def scrubbed(
        self: HTTPAdapter, request: Any, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[Any]:
        try:
            events = stream(self, request, cancel=cancel)  # an adapter may check before I/O
        except Exception as exc:  # raised at the first step, as from any async generator
            return _failed(self.scrub(exc) if isinstance(exc, ProviderError) else exc)
        if getattr(events, "ag_code", None) is HTTPAdapter._events.__code__:
            return events  # type: ignore[no-any-return]
        return _scrub_each(self, events)

    return scrubbed


async def _failed(error: Exception) -> AsyncIterator[Any]:
    raise error
    yield  # an async generator  # pragma: no cover


async def _scrub_each(adapter: HTTPAdapter, events: Any) -> AsyncIterator[Any]:
    try:
        async for event in events:
            yield event
    except ProviderError as exc:
        raise adapter.scrub(exc) from None
    finally:
        await events.aclose()


# The prefixes of model strings (providers/registry.py): a model name given to an adapter
# with one of them is a model string passed to the wrong place.
MODEL_STRING_PREFIXES = frozenset(
    {
        "openai", "openai-responses", "anthropic", "gemini", "google", "ollama", "groq",
        "deepseek", "openrouter", "together", "mistral", "vllm", "lmstudio",
        "openai-compatible", "bedrock", "vertex",
        "azure", "azure-responses",
    }
)  # fmt: skip


class HTTPAdapter:
    """Base for adapters: one ``httpx.AsyncClient`` (owned or borrowed) for connection reuse;
    every subclass's ``stream`` is wrapped so that its errors are scrubbed of the key."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("stream")
        if own is not None:  # (a stream wrapped twice is scrubbed twice: no harm)
            setattr(cls, "stream", _scrubbing(own))  # noqa: B010

    name: str = "http"
    max_connections: int = 100
    """Requests in flight at once; more wait in a first-come queue, not in the HTTP pool."""
    max_line_chars: int = MAX_LINE_CHARS
    """The longest line a streamed response may send (a hostile server cannot flood us)."""
    connect_hint: str = ""
    """What to check when the server cannot be reached (empty: a generic hint)."""
    default_base_url: str = ""
    key_variables: tuple[str, ...] = ()
    """Environment variables the key is read from at construction, without ``api_key``."""
    key_header: tuple[str, str] | None = None
    """The header the key goes in, after the caller's headers, and its prefix (``Bearer ``)."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = True,
        auth: Credentials | None = None,
    ) -> None:
        vendor, colon, rest = model.partition(":")
        if colon and rest and vendor.strip().lower() in MODEL_STRING_PREFIXES:
            raise UsageError(
                f"{type(self).__name__}(model={model!r}) takes the model's own name, "
                f"without the provider prefix: {type(self).__name__}({rest!r}), or "
                f"get_provider({model!r}) / Agent({model!r}) for a model string"
            )
        self.model = model
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        check_base_url(self.base_url)
        if api_key and auth is not None:
            raise UsageError(
                f"{type(self).__name__} got both api_key= and auth=: pass one (auth= for "
                "refreshable credentials, api_key= for a fixed key)"
            )
        self._auth = as_auth(auth)  # asked by httpx on each request (providers/_auth.py)
        # With auth= no key is read from the environment: the two would fight over a header.
        from_env = None if self._auth is not None else env_key(*self.key_variables)
        self._api_key = api_key or from_env  # never in a repr or error
        self._read_key = ""  # a key read from the environment for a request
        self.streaming = stream
        self._extra_headers = dict(headers or {})
        self._owns_client = client is None
        self._client = client
        redact_http_logs()  # httpx logs request URLs: keep keys in a query string out of logs
        self._slots: anyio.Semaphore | None = None
        self._loop: object = None  # the event loop the queue (and an owned client) belong to
        self._timeout = timeout if timeout is not None else DEFAULT_TIMEOUT

    @property
    def _send_options(self) -> dict[str, Any]:
        """``client.send`` options: no redirects (they would carry the credentials), and
        ``auth=`` when given (else the client's own, for a client the user made)."""
        if self._auth is None:
            return {"follow_redirects": False}
        return {"follow_redirects": False, "auth": self._auth}

    @property
    def client(self) -> httpx.AsyncClient:
        """The shared client; an owned one is made anew on another event loop (``run_sync``)."""
        return self._bound()[0]

    def _bound(self) -> tuple[httpx.AsyncClient, anyio.Semaphore]:
        """The client and the queue in front of its pool for the running event loop: on
        another loop the queue, and an owned client, are made anew."""
        loop = _current_loop()
        if self._slots is None or loop != self._loop:
            self._slots, self._loop = anyio.Semaphore(self.max_connections), loop
            self._client = None if self._owns_client else self._client
        if self._client is None:  # owned: made here (again after aclose)
            n = self.max_connections
            limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
            self._client = httpx.AsyncClient(
                timeout=self._timeout, limits=limits, verify=_tls_context()
            )
        return self._client, self._slots

    async def aclose(self) -> None:
        """Close the HTTP client if this adapter created it."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self: _AdapterT) -> _AdapterT:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        where = redact_url(self.base_url)
        return f"{type(self).__name__}(model={self.model!r}, base_url={where!r})"

    def _required_key(self, variable: str, label: str) -> str:
        """The key given, else the one in ``variable`` (read now); ``auth`` error without one
        (``""`` when ``auth=`` supplies the credentials: see :meth:`_key_header`)."""
        if self._auth is not None:
            return ""
        key = self._api_key or env_key(variable)
        if not key:
            raise self._no_key(f"no {label} API key", variable)
        self._read_key = key  # scrubbed from errors, like a key given
        return key

    def _no_key(self, what: str, variable: str) -> ProviderError:
        message = f"{what}: set the {variable} environment variable or pass api_key="
        return ProviderError("auth", message, provider=self.name)

    def _headers(self) -> dict[str, str]:
        """Request headers, the key in ``key_header`` included (or a subclass's own scheme)."""
        headers = self._headers_with({})
        if self.key_header is not None and self._api_key:
            headers[self.key_header[0]] = self.key_header[1] + self._api_key
        return headers

    def _key_header(self, name: str, value: str) -> dict[str, str]:
        """``{name: value}`` for a key's header, or nothing when ``auth=`` sets its own."""
        return {} if self._auth is not None else {name: value}

    @property
    def has_credentials(self) -> bool:
        """Whether a key or ``auth=`` was given (or a key found in the environment)."""
        return bool(self._api_key) or self._auth is not None

    def _headers_with(self, auth: Mapping[str, str]) -> dict[str, str]:
        """The JSON content type, ``auth`` (the adapter's scheme), then the caller's headers."""
        return {"content-type": "application/json", **auth, **self._extra_headers}

    @asynccontextmanager
    async def _response(
        self, url: str, body: Body, headers: Mapping[str, str] | None
    ) -> AsyncIterator[httpx.Response]:
        """POST ``body`` and give the response once its status says success; a request a stale
        kept-alive connection fails is sent again once (docs/providers.md#errors-and-retries)."""
        content = {"content": body} if isinstance(body, bytes) else {"json": body}
        try:
            client, slots = self._bound()
            try:  # a free slot is taken at once: no checkpoint (the send makes its own)
                slots.acquire_nowait()
            except anyio.WouldBlock:
                await slots.acquire()
            try:
                merged = {**self._headers(), **(headers or {})}
                request = client.build_request("POST", _parsed(url), **content, headers=merged)
                try:
                    response = await client.send(request, stream=True, **self._send_options)
                except _STALE_CONNECTION:
                    response = await client.send(request, stream=True, **self._send_options)
                try:
                    if 300 <= response.status_code < 400:
                        raise self._redirected(response)
                    if response.status_code >= 400:
                        raise self._http_error(response, await response.aread())
                    yield response
                finally:
                    await response.aclose()
            finally:
                slots.release()
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            raise transport_error(exc, self.name, self.base_url, self.connect_hint) from None

    async def _events(
        self,
        state: Assembler,
        url: str,
        body: Body,
        cancel: CancellationToken | None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """One call's stream events, from the response's wire events fed to ``state``: the one
        async generator between the socket and the loop (each layer costs per event)."""
        try:
            check_cancel(cancel, self.name)
            if self.streaming:
                decoder = state.decoder(self.max_line_chars)
                async with self._response(url, body, headers) as response:
                    # Without a content-encoding the raw bytes are the body: one layer fewer.
                    plain = "content-encoding" not in response.headers
                    chunks = response.aiter_raw() if plain else response.aiter_bytes()
                    async for chunk in chunks:
                        if state.done:
                            continue  # read to the end so the connection is reused
                        if cancel is not None and cancel.immediate:
                            raise _cancelled(self.name)
                        try:
                            values = decoder.feed(chunk)
                        except ValueError as exc:
                            raise self._undecodable(exc) from None
                        if len(values) == 1:  # the common read: one wire event
                            events = state.feed(values[0])
                            if len(events) > 1 and state.merge:
                                events = coalesce(events)
                        elif values:
                            events = state.read(values)
                        else:
                            continue
                        for event in events:
                            yield event
                        if state.failed is not None:
                            raise state.failed
                try:
                    values = [] if state.done else decoder.close()
                except ValueError as exc:
                    raise self._undecodable(exc, at_end=True) from None
            else:
                async with self._response(url, body, headers) as response:
                    content = await response.aread()
                try:
                    payload = from_json(content)
                except ValueError:
                    text = f"response was not JSON: {content.decode('utf-8', 'replace')[:200]!r}"
                    raise ProviderError("server", text, provider=self.name) from None
                values = state.whole(payload)
                check_cancel(cancel, self.name)
            for event in state.read(values):
                yield event
            if state.failed is not None:
                raise state.failed
            if not state.complete:
                raise ProviderError("truncated_stream", state.unfinished, provider=self.name)
            for event in state.end():
                yield event
        except ProviderError as exc:
            raise self.scrub(exc) from None

    def _undecodable(self, exc: ValueError, at_end: bool = False) -> ProviderError:
        if isinstance(exc, StreamCut):  # a binary frame cut short: the connection dropped
            return ProviderError("truncated_stream", str(exc), provider=self.name)
        if isinstance(exc, Signal):  # the decoder's own, said plainly (a line too long)
            return ProviderError("server", str(exc), provider=self.name)
        if at_end:  # a part of a value: the connection dropped inside it
            message = "the stream ended inside an event"
            return ProviderError("truncated_stream", message, provider=self.name)
        message = f"{self.name} sent data that is not JSON: {exc}"
        return ProviderError("server", message, provider=self.name)

    def scrub(self, error: ProviderError) -> ProviderError:
        """``error`` with this adapter's key and custom header values blanked out: a server
        that echoes the key in its error body must not put it into events or the history."""
        secrets = [
            self._api_key or "",
            self._read_key,
            *self._extra_headers.values(),
            *auth_secrets(self._auth),
        ]
        message = error.message
        for secret in secrets:
            if len(secret) >= 8 and secret in message:
                message = message.replace(secret, "***")
        if message != error.message:
            error.message = message
            error.args = (message,)
        return error

    def _redirected(self, response: httpx.Response) -> ProviderError:
        """A redirect is never an answer, and never followed: the request carries the key,
        which must not go to another host. The user points ``base_url`` at the real place."""
        status = response.status_code
        where = redact_url(response.headers.get("location", "")) or "(no location)"
        message = (
            f"{self.name} answered HTTP {status}, a redirect to {where}; treadle does not "
            "follow redirects with your credentials: set base_url to the final address"
        )
        return ProviderError("bad_request", message, status_code=status, provider=self.name)

    def _http_error(self, response: httpx.Response, raw: bytes) -> ProviderError:
        try:
            payload: Any = from_json(raw) if raw else None
        except ValueError:
            payload = None
        status = response.status_code
        fallback = raw.decode("utf-8", "replace").strip()[:500] or f"HTTP {status}"
        headers = response.headers
        return classify(status, payload, provider=self.name, headers=headers, fallback=fallback)
