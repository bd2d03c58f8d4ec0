"""The web app's front door (pure ASGI, so streamed answers pass through untouched): the
``Host`` a loopback server answers to, the token a non-loopback one asks for, ``Origin`` on
every POST, and secrets from the server's environment masked in every data response, on the
stream (``treadle.ui._mask``: any spelling, split between chunks too; with as many ``*``, so
lengths hold; the page's own assets are left as they are)."""

from __future__ import annotations

import hmac
import os
import re
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlencode

from .._mask import Secrets, masking_send

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "treadle_ui_token"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


def environment_secrets(environ: MutableMapping[str, str] | None = None) -> list[bytes]:
    """Values of the environment variables named like credentials (``OPENAI_API_KEY``,
    ``GITHUB_TOKEN`` ...), longest first; short values (under 8 characters) are left out,
    since they would match ordinary text."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v.strip()) >= 8}
    return sorted((v.encode("utf-8", "surrogateescape") for v in values), key=len, reverse=True)


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if host.count(":") == 1 else host


class Guard:
    """Wraps the app. ``token`` (``None``: a loopback-only server) is asked of every
    request: ``Authorization: Bearer``, the cookie a ``?token=`` visit sets, or ``?token=``
    itself. Without a token, only loopback ``Host`` names are answered (a page on another
    site that points its own name at 127.0.0.1 gets nothing). A POST must come with an
    ``Origin`` equal to the server's own (or one of ``origins``); a client that is not a
    browser may instead send the token as ``Authorization: Bearer``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        origins: Iterable[str] = (),
        secrets: Iterable[bytes] | None = None,
    ) -> None:
        self.app = app
        self.state: Any = None  # the app's state (the web app sets it)
        self.token = token
        self.origins = {o.rstrip("/") for o in origins}
        self.secrets = list(environment_secrets() if secrets is None else secrets)
        if token:
            self.secrets = [s for s in self.secrets if s != token.encode()]
        self.mask = Secrets(self.secrets)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if self.token is None and _host_name(host) not in LOOPBACK_HOSTS:
            await _deny(send, 403, f"this server answers on loopback names only, not {host!r}")
            return
        bearer = self._bearer(headers)
        if self.token is not None and not bearer:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given = (query.get("token") or [""])[0]
            if given and self._matches(given) and scope["method"] == "GET":
                await _set_cookie_and_redirect(scope, send, given, query)
                return
            if not self._matches(_cookie(headers)):
                await _deny(
                    send,
                    401,
                    "this server needs its token: open the URL it printed (with ?token=...) "
                    "or send Authorization: Bearer <token>",
                )
                return
        if scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            origin = headers.get("origin")
            if origin is None and not bearer:
                await _deny(send, 403, "a POST needs an Origin header (or the Bearer token)")
                return
            if origin is not None and not self._same_origin(scope, origin, host):
                await _deny(send, 403, f"cross-origin request refused (Origin {origin!r})")
                return
        await self.app(scope, receive, masking_send(send, self.mask))

    def _bearer(self, headers: dict[str, str]) -> bool:
        scheme, _, value = headers.get("authorization", "").partition(" ")
        return self.token is not None and scheme.lower() == "bearer" and self._matches(value)

    def _matches(self, given: str) -> bool:
        return bool(self.token) and hmac.compare_digest(given.encode(), str(self.token).encode())

    def _same_origin(self, scope: Scope, origin: str, host: str) -> bool:
        scheme = "https" if scope.get("scheme") == "https" else "http"
        return origin.rstrip("/") in {f"{scheme}://{host}", *self.origins}


def _cookie(headers: dict[str, str]) -> str:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:
        return ""
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else ""


async def _deny(send: Send, status: int, message: str) -> None:
    body = message.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _set_cookie_and_redirect(
    scope: Scope, send: Send, token: str, query: dict[str, list[str]]
) -> None:
    """``?token=`` is taken once: it becomes a cookie and the URL loses it."""
    rest = {k: v for k, v in query.items() if k != "token"}
    location = scope.get("path", "/") + (("?" + urlencode(rest, doseq=True)) if rest else "")
    cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode()),
                (b"set-cookie", cookie.encode()),
                (b"content-length", b"0"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
