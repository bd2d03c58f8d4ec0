"""Cassettes: record real HTTP exchanges to a JSON file once, replay them in every later run.

::

    cassette = Cassette("tests/cassettes/weather.json")      # mode="auto"
    provider = OpenAIChat("gpt-4o-mini", api_key=key_or_dummy, client=cassette.client())

With ``mode="auto"`` the first run (no file yet) records through a real
``httpx.AsyncHTTPTransport`` (so it needs a real key); later runs replay from the file and
never touch the network. ``mode="record"`` always records (rewriting the file);
``mode="replay"`` insists on the file. In ``auto`` mode an answer that is not a success
(status outside 2xx: a rate limit, an expired key, an outage) is passed through but never
written, so a passing glitch cannot become the golden answer every later run replays; it
is listed in ``Cassette.not_recorded`` and logged on ``treadle.testing``.

The file holds ``{"treadle_cassette": 1, "exchanges": [...]}``; each exchange has the shape of
the recorded provider exchanges in treadle's own test fixtures: ``request`` {method, url,
headers, body} and ``response`` {status, headers, body}, the body as the JSON value sent
(request) or the raw text received (response). A single fixture file (one exchange at the
top level) or a plain list of exchanges replays too.

Secrets are never written: request headers are kept only from a short allowlist (never
``authorization``, ``x-api-key``, ``x-goog-api-key``, ``api-key``, cookies, organisation or
project ids), response headers likewise (content type and retry hints), ``key=``/``api_key=``/
``token=`` query values and URL credentials become ``REDACTED``, and the values of all those
(plus any ``secrets=`` you pass) are scrubbed from every string in the file, bodies included.
Recording asks for ``accept-encoding: identity`` so bodies are stored as plain text.

Binary content is written once: a string of at least 1 KiB that is base64 (a file or image,
or a ``data:…;base64,`` URL of one) in a request body is kept in the file's ``blobs``
(``{"sha256:<hex>": "<the string>"}``, format 2) and the body holds
``{"treadle_blob": "sha256:<hex>"}`` in its place, so a file sent on every turn of a
recorded conversation is stored once, not once per request. Replaying puts the strings back
(one string in memory per blob) before matching, so bodies still match exactly.

Matching on replay (``match=``): ``"body"`` (default) takes the first unplayed exchange with
the same method, URL path, query (redacted parameters ignored) and JSON-equal body;
``"path"`` ignores the body; ``"order"`` plays the exchanges strictly in sequence and only
checks method and path. Fields missing from a recorded request match anything. Each exchange
plays once. A request with no match raises :class:`NoMatchingExchange`, naming the closest
candidate and where its body differs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, Literal

import httpx

from .._redact import REDACTED, SECRET_PARAMS
from ..errors import ConfigurationError, TreadleError
from ..providers._eventstream import EventStreamDecoder, encode
from .exchange import RecordedRequest, Reply, ReplyStream, streamed

logger = logging.getLogger("treadle.testing")

__all__ = ["Cassette", "CassetteError", "NoMatchingExchange"]

CassetteMode = Literal["auto", "record", "replay"]
MatchMode = Literal["body", "path", "order"]

FORBIDDEN_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "x-goog-api-key",
        "api-key",
        "cookie",
        "set-cookie",
        "openai-organization",
        "openai-project",
        "x-goog-user-project",
        "x-amz-security-token",
    }
)
REQUEST_HEADERS = frozenset(
    {"content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta"}
)
RESPONSE_HEADERS = frozenset({"content-type", "retry-after", "retry-after-ms"})


FORMAT = 2
BLOB_MIN = 1024
"""Base64 strings this long or longer are kept once, in the file's ``blobs``."""
BLOB_KEY = "treadle_blob"
_BASE64 = re.compile(r"(?:data:[\w.+-]+/[\w.+-]+;base64,)?[A-Za-z0-9+/]+={0,2}")


def _is_binary(value: str) -> bool:
    return len(value) >= BLOB_MIN and _BASE64.fullmatch(value) is not None


def _blob_digest(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


def _shared(value: Any, table: dict[str, str]) -> Any:
    """``value`` with each binary string replaced by the one equal string in ``table``."""
    if isinstance(value, str):
        return table.setdefault(_blob_digest(value), value) if _is_binary(value) else value
    if isinstance(value, list):
        return [_shared(item, table) for item in value]
    if isinstance(value, dict):
        return {key: _shared(item, table) for key, item in value.items()}
    return value


def _to_refs(value: Any, blobs: dict[str, str]) -> Any:
    """``value`` with each binary string replaced by a reference, the string put in ``blobs``."""
    if isinstance(value, str):
        if not _is_binary(value):
            return value
        digest = _blob_digest(value)
        blobs[digest] = value
        return {BLOB_KEY: digest}
    if isinstance(value, list):
        return [_to_refs(item, blobs) for item in value]
    if isinstance(value, dict):
        return {key: _to_refs(item, blobs) for key, item in value.items()}
    return value


def _from_refs(value: Any, blobs: dict[str, str], where: str) -> Any:
    if isinstance(value, list):
        return [_from_refs(item, blobs, where) for item in value]
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(BLOB_KEY), str):
            found = blobs.get(value[BLOB_KEY])
            if found is None:
                raise CassetteError(
                    f"cassette {where}: a request body refers to blob {value[BLOB_KEY]!r}, "
                    "which its 'blobs' does not hold; record it again"
                )
            return found
        return {key: _from_refs(item, blobs, where) for key, item in value.items()}
    return value


class CassetteError(TreadleError):
    """A cassette cannot be used as asked (missing file, bad format)."""


class NoMatchingExchange(CassetteError):
    """A replayed request matched no unplayed exchange of the cassette."""


def _json_or_text(data: bytes) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


def _redact_url(url: httpx.URL, secrets: set[str]) -> str:
    if url.userinfo:
        for part in (url.username, url.password):
            if part:
                secrets.add(part)
        url = url.copy_with(username=None, password=None)
    params = []
    for name, value in url.params.multi_items():
        if name.lower() in SECRET_PARAMS:
            if value:
                secrets.add(value)
            value = REDACTED
        params.append((name, value))
    if params:
        url = url.copy_with(params=params)
    return str(url)


def _scrub(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, list):
        return [_scrub(item, secrets) for item in value]
    if isinstance(value, dict):
        return {key: _scrub(item, secrets) for key, item in value.items()}
    return value


def _first_difference(recorded: Any, sent: Any, where: str = "$") -> str | None:
    """Where two JSON values first differ, as ``$.messages[1].content: 'a' != 'b'``."""
    if isinstance(recorded, dict) and isinstance(sent, dict):
        for key in list(recorded) + [k for k in sent if k not in recorded]:
            if key not in sent:
                return f"{where}.{key}: recorded but not sent"
            if key not in recorded:
                return f"{where}.{key}: sent but not recorded"
            found = _first_difference(recorded[key], sent[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(sent, list):
        for i, (a, b) in enumerate(zip(recorded, sent, strict=False)):
            found = _first_difference(a, b, f"{where}[{i}]")
            if found:
                return found
        if len(recorded) != len(sent):
            return f"{where}: {len(recorded)} items recorded, {len(sent)} sent"
        return None
    if recorded != sent:
        return f"{where}: {_short(recorded)} recorded, {_short(sent)} sent"
    return None


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _query(url: httpx.URL) -> list[tuple[str, str]]:
    return sorted((k, v) for k, v in url.params.multi_items() if k.lower() not in SECRET_PARAMS)


class Cassette:
    """Record / replay HTTP exchanges through an httpx transport (see the module docs).

    ``keep_headers`` adds header names to the allowlists (the forbidden ones can never be
    kept); ``secrets`` are strings scrubbed from everything written."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: CassetteMode = "auto",
        match: MatchMode = "body",
        keep_headers: Iterable[str] = (),
        secrets: Iterable[str] = (),
    ) -> None:
        if mode not in ("auto", "record", "replay"):
            raise ConfigurationError(f"mode must be 'auto', 'record' or 'replay', not {mode!r}")
        if match not in ("body", "path", "order"):
            raise ConfigurationError(f"match must be 'body', 'path' or 'order', not {match!r}")
        self.path = Path(path)
        self.match = match
        self.recording = mode == "record" or (mode == "auto" and not self.path.exists())
        self._keep_failures = mode == "record"
        extra = {h.lower() for h in keep_headers} - FORBIDDEN_HEADERS
        self._request_headers = REQUEST_HEADERS | extra
        self._response_headers = RESPONSE_HEADERS | extra
        self._secrets = {s for s in secrets if s}
        self._lock = threading.Lock()
        self._blobs: dict[str, str] = {}  # binary strings of request bodies, one per content
        self.exchanges: list[dict[str, Any]] = []
        self.played: list[bool] = []
        self.requests: list[RecordedRequest] = []
        self.not_recorded: list[tuple[str, int]] = []
        """``(url, status)`` of answers ``auto`` mode passed through without recording."""
        if not self.recording:
            self.exchanges = self._load()
            self.played = [False] * len(self.exchanges)

    def __repr__(self) -> str:
        state = "recording" if self.recording else f"replaying, {len(self.unplayed)} unplayed"
        return f"Cassette({str(self.path)!r}, {state}, {len(self.exchanges)} exchanges)"

    # ---- transports ----

    def transport(self, inner: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncBaseTransport:
        """The transport to give an ``httpx.AsyncClient``. Recording forwards to ``inner``
        (default: a real ``httpx.AsyncHTTPTransport``); replaying ignores it."""
        if self.recording:
            return _RecordingTransport(self, inner or httpx.AsyncHTTPTransport())
        return _ReplayTransport(self)

    def client(
        self, inner: httpx.AsyncBaseTransport | None = None, **kwargs: Any
    ) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` over :meth:`transport`."""
        return httpx.AsyncClient(transport=self.transport(inner), **kwargs)

    # ---- replay ----

    @property
    def unplayed(self) -> list[dict[str, Any]]:
        """Exchanges not replayed yet."""
        return [e for e, done in zip(self.exchanges, self.played, strict=True) if not done]

    def assert_all_played(self) -> None:
        """Fail when some recorded exchange was never requested."""
        left = self.unplayed
        if left:
            names = ", ".join(self._describe(e) for e in left)
            raise AssertionError(f"{self!r}: {len(left)} exchange(s) never replayed: {names}")

    async def respond(self, request: RecordedRequest) -> Reply:
        """The recorded answer to ``request`` (also what :func:`serve` calls)."""
        if self.recording:
            raise CassetteError(f"{self!r} is recording; it has nothing to replay")
        with self._lock:
            self.requests.append(request)
            index = self._find(request)
            self.played[index] = True
            exchange = self.exchanges[index]
        return self._reply(exchange)

    def _find(self, request: RecordedRequest) -> int:
        candidates = [i for i, done in enumerate(self.played) if not done]
        if self.match == "order":
            if candidates and self._same_route(self.exchanges[candidates[0]], request):
                return candidates[0]
            candidates = candidates[:1]
        else:
            for i in candidates:
                exchange = self.exchanges[i]
                if self._same_route(exchange, request) and (
                    self.match == "path" or self._same_body(exchange, request)
                ):
                    return i
        raise NoMatchingExchange(self._mismatch(request, candidates))

    def _same_route(self, exchange: dict[str, Any], request: RecordedRequest) -> bool:
        recorded = exchange.get("request") or {}
        method = recorded.get("method")
        if method and str(method).upper() != request.method:
            return False
        url = recorded.get("url")
        if not url:
            return True
        want = httpx.URL(url)
        got = httpx.URL(request.url)
        return want.path == got.path and _query(want) == _query(got)

    def _same_body(self, exchange: dict[str, Any], request: RecordedRequest) -> bool:
        recorded = exchange.get("request") or {}
        if "body" not in recorded:
            return True
        sent = request.json if request.json is not None else _json_or_text(request.body)
        return bool(recorded["body"] == sent)

    def _describe(self, exchange: dict[str, Any]) -> str:
        recorded = exchange.get("request") or {}
        path = httpx.URL(recorded["url"]).path if recorded.get("url") else "*"
        return f"{recorded.get('method', '*')} {path}"

    def _mismatch(self, request: RecordedRequest, candidates: list[int]) -> str:
        sent = f"{request.method} {_redact_url(httpx.URL(request.url), set())}"
        lines = [
            f"cassette {str(self.path)!r} has no unplayed exchange for {sent} "
            f"(match={self.match!r}; {len(self.exchanges)} recorded, "
            f"{len(candidates) if self.match != 'order' else len(self.unplayed)} unplayed)."
        ]
        for i in candidates[:5]:
            exchange = self.exchanges[i]
            why = "method or path differs"
            if self._same_route(exchange, request):
                body = (exchange.get("request") or {}).get("body")
                sent_body = (
                    request.json if request.json is not None else _json_or_text(request.body)
                )
                why = f"body differs at {_first_difference(body, sent_body)}"
            lines.append(f"  #{i}: {self._describe(exchange)}: {why}")
        if not candidates:
            lines.append("  every exchange has been played already")
        lines.append(
            "Record it again (mode='record', with a real key) or change the test's request."
        )
        return "\n".join(lines)

    def _reply(self, exchange: dict[str, Any]) -> Reply:
        response = exchange.get("response") or {}
        headers = [(str(k), str(v)) for k, v in (response.get("headers") or {}).items()]
        if "frames" in response:  # AWS eventstream, kept readable (and scrubbed) as frames
            data = b"".join(encode(f["headers"], f["payload"].encode()) for f in response["frames"])
        elif "body_base64" in response:
            data = base64.b64decode(response["body_base64"])
        else:
            body = response.get("body", "")
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
        streaming = streamed(content_type)
        lines = streaming and "eventstream" not in content_type  # frames are binary: no lines
        chunks = data.splitlines(keepends=True) if lines else [data]
        return Reply(int(response.get("status", 200)), headers, chunks or [b""], chunked=streaming)

    def _load(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            raise CassetteError(
                f"cassette {str(self.path)!r} does not exist; record it first "
                "(mode='record' or 'auto')"
            )
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise CassetteError(f"cassette {str(self.path)!r} is not JSON: {exc}") from None
        if isinstance(data, dict) and isinstance(data.get("exchanges"), list):
            version = data.get("treadle_cassette", 1)
            if not isinstance(version, int) or version > FORMAT:
                raise CassetteError(
                    f"cassette {str(self.path)!r} is format {version!r}, newer than this "
                    f"treadle reads ({FORMAT}): upgrade treadle or record it again"
                )
            blobs = data.get("blobs") or {}
            if not isinstance(blobs, dict):
                raise CassetteError(f"cassette {str(self.path)!r}: 'blobs' is not an object")
            exchanges = _from_refs(data["exchanges"], blobs, repr(str(self.path)))
        elif isinstance(data, dict) and "response" in data:
            exchanges = [data]  # one recorded fixture
        elif isinstance(data, list):
            exchanges = data
        else:
            raise CassetteError(
                f"cassette {str(self.path)!r} holds neither 'exchanges' nor one exchange"
            )
        for exchange in exchanges:
            if not isinstance(exchange, dict) or not isinstance(exchange.get("response"), dict):
                raise CassetteError(f"cassette {str(self.path)!r}: an exchange has no response")
        return list(exchanges)

    # ---- record ----

    def _record(
        self, request: httpx.Request, status: int, headers: httpx.Headers, body: bytes
    ) -> None:
        if not self._keep_failures and not 200 <= status < 300:
            url = _redact_url(request.url, set(self._secrets))
            with self._lock:
                self.not_recorded.append((url, status))
            logger.warning(
                "cassette %s: not recording the HTTP %d answer from %s (auto mode records "
                "successes only; use mode='record' to keep failures)",
                self.path,
                status,
                url,
            )
            return
        secrets = set(self._secrets)
        for name, value in request.headers.multi_items():
            if name.lower() in FORBIDDEN_HEADERS and value:
                secrets.add(value)
                scheme, _, token = value.partition(" ")
                if token and scheme.lower() in ("bearer", "basic", "token"):
                    secrets.add(token)
        url = _redact_url(request.url, secrets)
        kept_request = {
            k.lower(): v
            for k, v in request.headers.multi_items()
            if k.lower() in self._request_headers and k.lower() not in FORBIDDEN_HEADERS
        }
        kept_response = {
            k.lower(): v
            for k, v in headers.multi_items()
            if k.lower() in self._response_headers and k.lower() not in FORBIDDEN_HEADERS
        }
        response: dict[str, Any] = {"status": status, "headers": kept_response}
        frames = _frames(body) if "eventstream" in headers.get("content-type", "") else None
        if frames is not None:
            response["frames"] = frames
        else:
            try:
                response["body"] = body.decode("utf-8")
            except UnicodeDecodeError:
                response["body_base64"] = base64.b64encode(body).decode("ascii")
        exchange = {
            "request": {
                "method": request.method,
                "url": url,
                "headers": kept_request,
                "body": _json_or_text(request.content),
            },
            "response": response,
        }
        # Longest first, so a token inside a longer header value is not half-replaced.
        ordered = sorted(secrets, key=len, reverse=True)
        exchange = _scrub(exchange, ordered)
        with self._lock:
            exchange = _shared(exchange, self._blobs)  # a file sent again is one string
            self.exchanges.append(exchange)
            self.played.append(True)
            self._write()

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        blobs: dict[str, str] = {}
        exchanges = _to_refs(self.exchanges, blobs)
        document: dict[str, Any] = {"treadle_cassette": FORMAT if blobs else 1}
        if blobs:
            document["blobs"] = blobs
        document["exchanges"] = exchanges
        text = json.dumps(document, ensure_ascii=False, indent=2)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _frames(body: bytes) -> list[dict[str, Any]] | None:
    """An eventstream body as its frames (text headers, UTF-8 payloads), so a recording is
    readable and its secrets scrubbed as in any text; None when it is not that (a frame cut
    short, a binary header or payload): it is kept in base64 then."""
    decoder = EventStreamDecoder()
    try:
        frames = decoder.feed(body) + decoder.close()
        if any(isinstance(v, bytes) for f in frames for v in f.headers.values()):
            return None
        return [{"headers": dict(f.headers), "payload": f.payload.decode("utf-8")} for f in frames]
    except (ValueError, UnicodeDecodeError):
        return None


class _TeeStream(httpx.AsyncByteStream):
    """Passes the body through as it streams and records the exchange when it ends."""

    def __init__(
        self, cassette: Cassette, request: httpx.Request, response: httpx.Response
    ) -> None:
        self._cassette = cassette
        self._request = request
        self._status = response.status_code
        self._headers = response.headers
        self._inner = response.stream
        self._data = bytearray()
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        assert isinstance(self._inner, httpx.AsyncByteStream)
        async for chunk in self._inner:
            self._data += chunk
            yield chunk
        self._finish()

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self._cassette._record(self._request, self._status, self._headers, bytes(self._data))

    async def aclose(self) -> None:
        try:
            if isinstance(self._inner, httpx.AsyncByteStream):
                await self._inner.aclose()
        finally:
            self._finish()


class _RecordingTransport(httpx.AsyncBaseTransport):
    def __init__(self, cassette: Cassette, inner: httpx.AsyncBaseTransport) -> None:
        self._cassette = cassette
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        request.headers["accept-encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_TeeStream(self._cassette, request, response),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _ReplayTransport(httpx.AsyncBaseTransport):
    def __init__(self, cassette: Cassette) -> None:
        self._cassette = cassette

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        recorded = RecordedRequest.build(
            request.method, str(request.url), request.headers.multi_items(), body
        )
        reply = await self._cassette.respond(recorded)
        return httpx.Response(
            reply.status, headers=reply.headers, stream=ReplyStream(reply), request=request
        )
