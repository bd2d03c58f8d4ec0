"""The transports: a server started over stdio, or reached over streamable HTTP or SSE."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from anyio.abc import Process

from ..providers import redact_url
from .client import MCPClient


class MCPStdioClient(MCPClient):
    """A client of a server it starts as a subprocess, speaking MCP on its stdin/stdout.

    ``MCPStdioClient("files", command="npx", args=["-y", "@mcp/server-files", "."])``;
    ``env`` is merged over a safe default environment; ``cwd`` is its working folder.
    The server's stderr goes to this process's stderr (``errlog`` to change it).
    :attr:`pid`, :attr:`alive` and :attr:`returncode` tell about its process."""

    _opening = "could not start"

    def __init__(
        self,
        name: str,
        *,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        errlog: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(name, **options)
        self.command = command
        self.args = list(args)
        self._env = dict(env) if env is not None else None
        self.cwd = cwd
        self.errlog = errlog or sys.stderr
        self._process: Process | None = None

    @property
    def pid(self) -> int | None:
        """The server process's id: the latest one (a restart starts a new process), or
        ``None`` before the first start (and on Windows, where the SDK starts it)."""
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        """Whether that process is running now (it has not exited)."""
        return self._process is not None and self._process.returncode is None

    @property
    def returncode(self) -> int | None:
        """The process's exit status once it has exited (negative: killed by that
        signal), ``None`` while it runs or before it started."""
        return self._process.returncode if self._process is not None else None

    def _state_note(self) -> str:
        code = self.returncode
        return "" if code is None else f"the server process exited with status {code}"

    def _started(self, process: Process | None) -> None:
        self._process = process

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        from .stdio import stdio_transport

        return stdio_transport(
            self.command, self.args, self._env, self.cwd, self.errlog, self._started
        )

    def _secrets(self) -> list[str]:
        return list((self._env or {}).values())

    def _where(self) -> str:
        return f"command={self.command!r}"


class _HTTPClient(MCPClient):
    _noted = frozenset({"POST"})  # the requests whose failure an error reports

    def __init__(
        self,
        name: str,
        *,
        url: str,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        http_timeout: float = 30.0,
        **options: Any,
    ) -> None:
        super().__init__(name, **options)
        self.url = url
        self.__headers = dict(headers or {})
        self.__auth = auth
        self.http_timeout = http_timeout

    @property
    def header_names(self) -> list[str]:
        """The names of the headers sent (their values, often credentials, stay private)."""
        return sorted(self.__headers)

    def _headers(self) -> dict[str, str]:
        return dict(self.__headers)

    def _auth(self) -> Any:
        return self.__auth

    def _secrets(self) -> list[str]:
        values = list(self.__headers.values())
        values += [v.partition(" ")[2] for v in values if " " in v]
        parts = urlsplit(self.url)  # a password or a key in the URL itself
        if parts.password:
            values.append(parts.password)
        kept = dict(parse_qsl(urlsplit(redact_url(self.url)).query))
        values += [v for k, v in parse_qsl(parts.query) if kept.get(k) != v]
        if redact_url(self.url) != self.url:
            values.append(self.url)
        return values

    def _where(self) -> str:
        names = f", headers={self.header_names}" if self.__headers else ""
        auth = f", auth={type(self.__auth).__name__}" if self.__auth is not None else ""
        return f"url={redact_url(self.url)!r}{names}{auth}"

    def _client(
        self, headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None
    ) -> Any:
        """The HTTP client the SDK's transport uses: our headers, timeouts and ``auth``
        (or those the SDK passes), and a hook noting a failed request's status for the
        error messages."""
        import httpx2

        async def note_status(response: httpx2.Response) -> None:
            if response.request.method in self._noted:
                failed = response.status_code >= 400
                self._http_status = (
                    (response.status_code, response.reason_phrase) if failed else None
                )

        return httpx2.AsyncClient(
            headers=self._headers() if headers is None else headers,
            timeout=timeout or httpx2.Timeout(self.http_timeout, read=max(self.timeout, 300.0)),
            auth=self._auth() if auth is None else auth,
            event_hooks={"response": [note_status]},
        )


class MCPHTTPClient(_HTTPClient):
    """A client of a server reached over streamable HTTP (the current MCP transport).

    ``MCPHTTPClient("docs", url="https://example.com/mcp", headers={"Authorization":
    f"Bearer {token}"})``; header values never appear in reprs, events or errors.
    ``auth=`` takes an ``httpx2.Auth`` — the SDK's OAuth providers
    (``mcp.client.auth.OAuthClientProvider``, the client-credentials ones in
    ``mcp.client.auth.extensions``) get, refresh and send tokens themselves."""

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        from mcp.client.streamable_http import streamable_http_client

        client = self._client()
        return _owning(client, streamable_http_client(self.url, http_client=client))


class MCPSSEClient(_HTTPClient):
    """A client of a server reached over the older HTTP+SSE transport (deprecated by MCP;
    for servers that have not moved to streamable HTTP). Same options as
    :class:`MCPHTTPClient`."""

    _noted = frozenset({"GET", "POST"})  # the GET is its connection

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        from mcp.client.sse import sse_client

        return sse_client(
            self.url,
            headers=self._headers(),
            timeout=self.http_timeout,
            sse_read_timeout=max(self.timeout, 300.0),
            httpx_client_factory=self._client,
            auth=self._auth(),
        )


@contextlib.asynccontextmanager
async def _owning(client: Any, transport: Any) -> AsyncIterator[Any]:
    """Enter ``transport`` and close ``client`` (which we made for it) afterwards."""
    async with client, transport as streams:
        yield streams
