"""``a2a_app(agent)``: a treadle agent as an A2A server (JSON-RPC over HTTP, A2A 1.0, the
0.3 method names too), on the official a2a-sdk, every route behind treadle's HTTP guard."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import AgentCard
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, request_response

from ..agent import Agent
from ..errors import ConfigurationError
from ..ui import DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES, HTTPGuard
from ._card import SkillSpec, build_card, offered_tools, skill, tool_skills
from ._executor import AgentSource, TreadleExecutor
from ._handler import TreadleRequestHandler
from ._rpc import rpc_front


class A2AServer:
    """What :func:`a2a_app` serves: the executor (conversations, runs), the sdk's request
    handler (tasks, streams) and the card. ``await server.aclose()`` at shutdown (the
    app's lifespan does it)."""

    def __init__(
        self,
        agent: AgentSource,
        *,
        url: str | None,
        rpc_path: str,
        name: str | None,
        description: str | None,
        skills: Sequence[SkillSpec] | None,
        version: str,
        token: bool,
        task_store: TaskStore | None,
        max_contexts: int,
    ) -> None:
        template = agent if isinstance(agent, Agent) else None
        self.name = name or getattr(template, "name", None) or "agent"
        self.description = (
            description
            or getattr(template, "description", "")
            or f"The treadle agent {self.name!r}."
        )
        self.skills = [skill(s) for s in skills] if skills is not None else None
        self.template = template
        self.url = url
        self.rpc_path = rpc_path
        self.version = version
        self.token = token
        self.executor = TreadleExecutor(agent, max_contexts=max_contexts)
        self.handler = TreadleRequestHandler(
            agent_executor=self.executor,
            task_store=task_store or InMemoryTaskStore(),
            agent_card=self.card("http://localhost/", []),
        )
        self._tool_skills: list[Any] | None = None

    def card(self, url: str, skills: Sequence[Any]) -> AgentCard:
        return build_card(
            name=self.name,
            description=self.description,
            url=url,
            skills=self.skills if self.skills is not None else skills,
            version=self.version,
            token=self.token,
        )

    async def card_for(self, base_url: str) -> AgentCard:
        """The card as served at ``base_url``: its JSON-RPC address is there (the scheme
        and ``Host`` the request came with, which the guard has checked), unless ``url``
        was given; the skills are the template's tools, toolsets opened once."""
        url = self.url or base_url.rstrip("/") + self.rpc_path
        if self._tool_skills is None:
            found: list[Any] = []
            if self.skills is None and self.template is not None:
                found = tool_skills(await offered_tools(self.template.context.tools))
            self._tool_skills = found
        return self.card(url, self._tool_skills)

    async def aclose(self) -> None:
        try:
            await self.handler.aclose()
        finally:
            await self.executor.aclose()


def a2a_app(
    agent: AgentSource,
    *,
    token: str | None = None,
    origins: Iterable[str] = (),
    trusted_hosts: Iterable[str] = (),
    allow_remote: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    url: str | None = None,
    rpc_path: str = "/",
    name: str | None = None,
    description: str | None = None,
    skills: Sequence[SkillSpec] | None = None,
    version: str = "1.0.0",
    task_store: TaskStore | None = None,
    max_contexts: int = 1000,
) -> Starlette:
    """An ASGI app serving ``agent`` over A2A: the agent card at
    ``/.well-known/agent-card.json`` and JSON-RPC (``SendMessage``, ``SendStreamingMessage``,
    ``GetTask``, ``CancelTask``, ``SubscribeToTask``, ``ListTasks``; and the 0.3 names,
    ``message/send`` ...) at ``rpc_path``.

    ``agent`` is a template (each A2A context runs on ``agent.fork(context_id)``: with a
    store, one session per context) or a function ``context_id -> Agent``. Every route,
    the card included, is behind the guard of treadle's web surfaces: ``token`` (asked as
    ``Authorization: Bearer`` and named in the card), ``origins``, ``trusted_hosts``,
    ``allow_remote``, ``max_body_bytes``, ``body_timeout`` (docs/security.md). ``url``:
    the address clients reach the JSON-RPC endpoint by (default: the one the card was
    fetched from). ``skills``: the card's skills (``AgentSkill``\\ s or dicts; default,
    one per tool). ``task_store``: an a2a-sdk ``TaskStore`` (default: in memory).
    """
    if not rpc_path.startswith("/"):
        raise ConfigurationError(f"rpc_path must start with '/', not {rpc_path!r}")
    if max_contexts < 1:
        raise ConfigurationError("max_contexts must be at least 1")
    guard: dict[str, Any] = {
        "token": token,
        "origins": origins,
        "trusted_hosts": trusted_hosts,
        "allow_remote": allow_remote,
        "max_body_bytes": max_body_bytes,
        "body_timeout": body_timeout,
    }
    HTTPGuard(_nothing, **guard)  # bad options fail here, with the guard's own message
    server = A2AServer(
        agent,
        url=url,
        rpc_path=rpc_path,
        name=name,
        description=description,
        skills=skills,
        version=version,
        token=token is not None,
        task_store=task_store,
        max_contexts=max_contexts,
    )

    async def card(request: Request) -> Response:
        found = await server.card_for(str(request.base_url))
        return JSONResponse(agent_card_to_dict(found), headers={"cache-control": "no-store"})

    def guarded(endpoint: Any) -> HTTPGuard:
        # on each route, so the guard goes wherever the routes are mounted
        return HTTPGuard(request_response(endpoint), **guard)

    (rpc,) = create_jsonrpc_routes(server.handler, rpc_path, enable_v0_3_compat=True)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await server.aclose()

    app = Starlette(
        routes=[
            Route(AGENT_CARD_WELL_KNOWN_PATH, guarded(card), methods=["GET"]),
            Route(rpc_path, HTTPGuard(rpc_front(rpc.endpoint), **guard), methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    app.state.a2a = server
    return app


async def _nothing(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover
    return None
