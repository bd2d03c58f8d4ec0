"""The front door of every treadle HTTP surface — the web app, the AG-UI and the Vercel AI
apps — as pure ASGI (streamed answers pass through untouched). Checked in this order:

1. **Peer.** Without a token only loopback peers are served, judged by the connection's
   address (``scope["client"]``), never by a header.
2. **Host.** Without a token (or with ``trusted_hosts``), only loopback names and the
   trusted hosts are answered: a page that points its own name at 127.0.0.1 (DNS
   rebinding) gets nothing.
3. **Token**, when there is one: ``Authorization: Bearer``, the cookie a ``?token=`` visit
   sets (named after the server's port), or ``?token=`` itself — which never stays in the
   URL, nor in the server's access log.
4. **Origin** on every state-changing request: a foreign or ``null`` Origin is refused;
   a POST without one must be ``application/json`` (what a browser cannot send to
   another site without a CORS preflight, which is never granted) or carry the Bearer
   token; other methods (``DELETE``, ``PUT``) always need a preflight, so they pass.
5. **Body**: at most ``max_body_bytes`` (413 past it, never read further) and all of it
   within ``body_timeout`` seconds (408), read before the app runs.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

import anyio

from ..errors import ConfigurationError, TreadleError, UsageError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "treadle_ui_token"
DEFAULT_MAX_BODY_BYTES = 10_000_000
DEFAULT_BODY_TIMEOUT = 60.0
MAX_JSON_DEPTH = 100
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SIMPLE_METHODS = frozenset({"GET", "HEAD", "POST"})
"""What a page may send to another site without a CORS preflight (which is never granted)."""

_NO_TOKEN = (
    "this server has no token, so it answers this machine only; to serve other machines, "
    "give it one: `treadle ui --host 0.0.0.0` prints an address with a new token, "
    "`web_app(agent, token=...)` / `token=` on the app sets your own (clients then send "
    "`Authorization: Bearer <token>`)"
)


def is_loopback_address(host: str) -> bool:
    """An IP address on this machine's loopback (127.0.0.0/8, ::1, IPv4-mapped ones)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def host_name(host: str) -> str:
    """The name part of a ``Host`` header (``[::1]:8000`` → ``[::1]``), lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def is_loopback_name(host: str) -> bool:
    name = host_name(host).rstrip(".")
    return name == "localhost" or is_loopback_address(name)


def cookie_name(scope: Scope) -> str:
    """One cookie per server port: browsers send a host's cookies to all its ports, so two
    servers on one machine would otherwise log each other out."""
    server = scope.get("server")
    port = server[1] if server and len(server) > 1 and server[1] else None
    return f"{COOKIE}_{port}" if port else COOKIE


class BadRequestBody(TreadleError, ValueError):
    """A request body a surface refuses with a 4xx (not JSON, nested too deep)."""


def load_json(body: bytes) -> Any:
    """A request body as JSON; :class:`BadRequestBody` (a ``ValueError``, with what is
    wrong) for one that is not JSON or is nested deeper than :data:`MAX_JSON_DEPTH`."""
    try:
        value = json.loads(body or b"null")
    except RecursionError:
        raise BadRequestBody(f"the request body is nested deeper than {MAX_JSON_DEPTH}") from None
    except ValueError:
        raise BadRequestBody("the request body is not JSON") from None
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise BadRequestBody(f"the request body is nested deeper than {MAX_JSON_DEPTH}")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value


class HTTPGuard:
    """Wraps an ASGI app with the checks above. ``token``: asked of every request
    (``None``: loopback peers only, unless ``allow_remote``). ``origins``: Origins allowed
    besides the server's own (``https://chat.example.com`` behind an HTTPS proxy).
    ``trusted_hosts``: ``Host`` names answered besides loopback names (``"*"``: any).
    ``allow_remote``: serve peers beyond loopback without a token — only when something in
    front (a proxy, your middleware) authenticates them; name the hosts it is reached by
    in ``trusted_hosts`` (``Host`` is still checked)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None = None,
        origins: Iterable[str] = (),
        trusted_hosts: Iterable[str] = (),
        allow_remote: bool = False,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
    ) -> None:
        if token is not None and len(token) < 8:
            raise ConfigurationError(
                "a token must be at least 8 characters (new_token() makes one)"
            )
        if max_body_bytes < 1 or body_timeout <= 0:
            raise ConfigurationError("max_body_bytes and body_timeout must be positive")
        if isinstance(origins, str) or isinstance(trusted_hosts, str):
            raise UsageError("origins and trusted_hosts are lists of strings, not one string")
        self.app = app
        self.token = token
        self.origins = {o.strip().rstrip("/").lower() for o in origins}
        self.trusted_hosts = {h.strip().lower() for h in trusted_hosts}
        self.allow_remote = allow_remote
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        admitted = await self.admit(scope, receive, send)
        if admitted is not None:
            await self.app(scope, admitted, send)

    async def admit(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """Run the checks; ``None`` once a refusal is sent, else the ``receive`` the app
        gets (the body already read, within its limits)."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        given = _take_query_token(scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await respond(send, *refusal)
            return None
        if self.token is not None and not self._bearer(headers):
            if given and self._matches(given) and scope["method"] == "GET":
                await self._set_cookie_and_redirect(scope, send, given)
                return None
            if not self._matches(_cookie(headers, cookie_name(scope))):
                await respond(
                    send,
                    401,
                    "this server needs its token: open the address it printed (with "
                    "?token=...) or send Authorization: Bearer <token>",
                )
                return None
        if scope["method"] not in SAFE_METHODS:
            problem = self._origin_problem(scope, headers)
            if problem is not None:
                await respond(send, 403, problem)
                return None
            return await self._read_body(headers, receive, send)
        return receive

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        if self.token is None and not self.allow_remote:
            client = scope.get("client")
            peer = str(client[0]) if client else ""
            if not is_loopback_address(peer):
                return 403, f"refused a connection from {peer or 'an unknown address'}: {_NO_TOKEN}"
        host = headers.get("host", "")
        if self.token is None or self.trusted_hosts:
            trusted = self.trusted_hosts
            if not (is_loopback_name(host) or host_name(host) in trusted or "*" in trusted):
                return 403, (
                    f"this server does not answer to the name {host!r}: it answers loopback "
                    "names (127.0.0.1, localhost, [::1])"
                    + (" and its trusted hosts" if self.trusted_hosts else "")
                    + (f"; {_NO_TOKEN}" if self.token is None else "")
                )
        return None

    def _origin_problem(self, scope: Scope, headers: dict[str, str]) -> str | None:
        origin = headers.get("origin")
        if origin is None:
            media = headers.get("content-type", "").partition(";")[0].strip().lower()
            if media == "application/json" or self._bearer(headers):
                return None
            if scope["method"] not in SIMPLE_METHODS:
                return None  # a browser sends DELETE, PUT ... elsewhere only after a preflight
            return (
                "a request without an Origin header must be application/json "
                "(or carry Authorization: Bearer <token>)"
            )
        if origin.strip().lower() == "null":
            return "refused a request from Origin 'null' (a sandboxed or opaque page)"
        if not self._allowed_origin(scope, origin, headers.get("host", "")):
            return (
                f"cross-origin request refused (Origin {origin!r}); name the site's origin "
                "in the server's allowed origins (origins=[...], --origin) if it is yours"
            )
        return None

    def _allowed_origin(self, scope: Scope, origin: str, host: str) -> bool:
        origin = origin.strip().rstrip("/").lower()
        if origin in self.origins:
            return True
        scheme = "https" if scope.get("scheme") == "https" else "http"
        own = f"{scheme}://{host.strip().lower()}"
        default = f":{443 if scheme == 'https' else 80}"
        return origin in {own, own.removesuffix(default)} or f"{origin}{default}" == own

    def _bearer(self, headers: dict[str, str]) -> bool:
        scheme, _, value = headers.get("authorization", "").partition(" ")
        return self.token is not None and scheme.lower() == "bearer" and self._matches(value)

    def _matches(self, given: str) -> bool:
        token = self.token
        return token is not None and hmac.compare_digest(given.encode(), token.encode())

    async def _read_body(
        self, headers: dict[str, str], receive: Receive, send: Send
    ) -> Receive | None:
        """The whole body, read here (so the app never meets a partial or oversized one),
        then handed to the app as one message; later messages (a disconnect) pass through."""
        too_large = (
            f"the request body is larger than {self.max_body_bytes} bytes (the server's "
            "max_body_bytes); files attached to a message travel in it, base64-encoded (a "
            "third larger than the file): send smaller files, or raise the server's limit"
        )
        length = headers.get("content-length", "")
        if length.isascii() and length.isdigit() and int(length) > self.max_body_bytes:
            await respond(send, 413, too_large, close=True)
            return None
        chunks: list[bytes] = []
        size = 0
        more = True
        with anyio.move_on_after(self.body_timeout):
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    return None  # the client went away
                chunk = bytes(message.get("body", b""))
                size += len(chunk)
                if size > self.max_body_bytes:
                    await respond(send, 413, too_large, close=True)
                    return None
                chunks.append(chunk)
                more = bool(message.get("more_body", False))
        if more:
            await respond(
                send,
                408,
                f"the request body did not arrive within {self.body_timeout:g} s",
                close=True,
            )
            return None
        body = b"".join(chunks)
        given = False

        async def replay() -> Message:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay

    async def _set_cookie_and_redirect(self, scope: Scope, send: Send, token: str) -> None:
        """``?token=`` is taken once: it becomes a cookie and the URL loses it."""
        rest = urlencode(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        location = scope.get("path", "/") + (f"?{rest}" if rest else "")
        secure = "; Secure" if scope.get("scheme") == "https" else ""
        cookie = f"{cookie_name(scope)}={token}; Path=/; HttpOnly; SameSite=Strict{secure}"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode("latin-1")),
                    (b"set-cookie", cookie.encode("latin-1")),
                    (b"cache-control", b"no-store"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _take_query_token(scope: Scope) -> str:
    """``?token=`` out of the scope: the app, and the server's access log line (written
    from the scope when the response starts), never see it."""
    raw = scope.get("query_string", b"")
    if b"token=" not in raw:
        return ""
    pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
    tokens = [v for k, v in pairs if k == "token"]
    scope["query_string"] = urlencode([(k, v) for k, v in pairs if k != "token"]).encode()
    return tokens[0] if tokens else ""


def _cookie(headers: dict[str, str], name: str) -> str:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:
        return ""
    morsel = jar.get(name)
    return morsel.value if morsel is not None else ""


async def respond(send: Send, status: int, message: str, *, close: bool = False) -> None:
    """A plain-text answer (a refusal); ``close``: the connection is closed after it (the
    rest of an oversized or stalled body is never read)."""
    body = message.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
