"""Several agent-serving surfaces as one ASGI app, at the paths clients expect when they are
served together: the OpenAI API under ``/v1``, MCP at ``/mcp``, and anything else (the A2A
app: its card at ``/.well-known/agent-card.json``) at the root. ``treadle serve`` serves
this app. Each surface keeps its own guard (docs/security.md); each sub-app's lifespan runs
inside this app's."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import anyio

from ..errors import ConfigurationError, UsageError
from ._guard import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    ASGIApp,
    HTTPGuard,
    Message,
    Receive,
    Scope,
    Send,
    respond,
)

__all__ = ["agent_server_app", "app_lifespan"]


@contextlib.asynccontextmanager
async def app_lifespan(app: ASGIApp, state: dict[str, Any] | None = None) -> AsyncIterator[None]:
    """Run ``app``'s ASGI lifespan (startup on entry, shutdown on exit), as a server would.
    An app that does not speak the lifespan protocol is simply called for nothing."""
    to_app, from_server = anyio.create_memory_object_stream[Message](math.inf)
    started = anyio.Event()
    stopped = anyio.Event()
    failed: list[str] = []

    async def send(message: Message) -> None:
        kind = message["type"]
        if kind.endswith(".failed"):
            failed.append(str(message.get("message", "")))
        if kind.startswith("lifespan.startup"):
            started.set()
        elif kind.startswith("lifespan.shutdown"):
            stopped.set()

    async def run() -> None:
        scope = {
            "type": "lifespan",
            "asgi": {"version": "3.0"},
            "state": {} if state is None else state,
        }
        try:
            await app(scope, from_server.receive, send)
        except Exception:  # an app that does not speak the lifespan protocol raises here
            started.set()
            stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await to_app.send({"type": "lifespan.startup"})
        await started.wait()
        if failed:
            tg.cancel_scope.cancel()
            raise ConfigurationError(f"a served app failed to start: {failed[0]}")
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await to_app.send({"type": "lifespan.shutdown"})
                await stopped.wait()
            tg.cancel_scope.cancel()


class AgentServer:
    """The dispatcher: a path prefix to each surface."""

    def __init__(self, mounts: Sequence[tuple[str, ASGIApp]], root: ASGIApp | None) -> None:
        self.mounts = list(mounts)
        self.root = root
        self.apps = [app for _, app in self.mounts] + ([root] if root is not None else [])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        path = scope.get("path", "")
        for prefix, app in self.mounts:
            if path == prefix or path.startswith(prefix + "/"):
                await app(scope, receive, send)
                return
        if self.root is not None:
            await self.root(scope, receive, send)
        elif scope["type"] == "http":
            await respond(send, 404, f"nothing is served at {path}")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        async with contextlib.AsyncExitStack() as stack:
            try:
                for app in self.apps:
                    await stack.enter_async_context(app_lifespan(app))
            except Exception as exc:
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
            message = await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})


def agent_server_app(
    agents: Any,
    *,
    openai: bool = True,
    mcp: bool = True,
    root: ASGIApp | None = None,
    token: str | None = None,
    origins: Iterable[str] = (),
    trusted_hosts: Iterable[str] = (),
    allow_remote: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
) -> Any:
    """One ASGI app serving ``agents`` (an Agent, a list, or ``{name: agent}``): the OpenAI
    API under ``/v1`` (``openai``), MCP's streamable HTTP at ``/mcp`` (``mcp``), and ``root``
    — another ASGI app, such as the A2A app — for every other path, behind the same guard
    (``token`` asked of every request, ``Host``, ``Origin``, body limits: docs/security.md)."""
    guard: dict[str, Any] = {
        "token": token,
        "origins": origins,
        "trusted_hosts": trusted_hosts,
        "allow_remote": allow_remote,
        "max_body_bytes": max_body_bytes,
        "body_timeout": body_timeout,
    }
    mounts: list[tuple[str, ASGIApp]] = []
    if openai:
        from .openai_api import openai_app

        mounts.append(("/v1", openai_app(agents, **guard)))
    if mcp:
        from .mcp_server import mcp_app

        mounts.append(("/mcp", mcp_app(agents, **guard)))
    if not mounts and root is None:
        raise UsageError("serve at least one surface: openai=True, mcp=True, or a root app (A2A)")
    return AgentServer(mounts, HTTPGuard(root, **guard) if root is not None else None)
