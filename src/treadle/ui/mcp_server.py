"""Serve treadle agents as an MCP server (the official ``mcp`` SDK's server side, extra
``mcp``): each agent is one tool, named after it, taking a ``prompt``.

- **Progress**: while the agent runs, a client that asked for progress (a
  ``progressToken``) gets ``notifications/progress``: each turn, each tool call starting and
  ending.
- **Cancellation**: a client's ``notifications/cancelled`` aborts the run the way
  ``agent.abort()`` does — the model call stops, running tools are cancelled, every call gets
  its result, the run ends ``cancelled``.
- **Approvals**: a call the agent's hooks ask a person about (``Ask``) is put to the client
  as an elicitation (``{approved, reason}``) when the client supports elicitation; without
  it, the call is denied and the model is told why. Calls of the agent's external tools have
  no one to answer them here: they are answered with an error.

Each call runs on a fresh branch of the agent (same model, tools, hooks and settings, an
empty conversation). ``mcp_server(agents)`` is the SDK's ``MCPServer``;
``mcp_app(agents)`` the streamable HTTP transport at ``/mcp`` as a guarded ASGI app;
``serve_mcp_stdio(agents)`` the stdio transport. See docs/serve.md.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterable
from typing import Annotated, Any

from ..agent import Agent, RunResult
from ..errors import MissingExtra, install_hint
from ..types import AgentEvent, ToolExecutionEnd, ToolExecutionStart, TurnStart, UserMessage
from ._drive import drive
from ._guard import DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES, HTTPGuard
from .openai_api import agents_by_name

__all__ = ["mcp_app", "mcp_server", "serve_mcp_stdio"]

NO_ELICITATION = (
    "Not run: this call needs a person's approval, and the MCP client that asked cannot be "
    "asked (it does not support elicitation)."
)
NO_CLIENT_TOOLS = "Not run: this tool is answered by a client, and an MCP client cannot answer it."
MAX_ROUNDS = 16


def _sdk() -> Any:
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtra(
            f"serving agents over MCP needs the mcp SDK: {install_hint('mcp')}"
        ) from exc
    return MCPServer


def _answer(result: RunResult[Any]) -> str:
    if result.output is not None:
        output = result.output
        dump = getattr(output, "model_dump", None)
        return json.dumps(dump(mode="json") if dump else output, ensure_ascii=False, default=str)
    return result.text


class _Progress:
    """``notifications/progress`` for one call: a number that only grows, and what is
    happening."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.count = 0

    async def __call__(self, event: AgentEvent) -> None:
        if event.depth != 0:
            return
        if isinstance(event, TurnStart):
            message = f"turn {event.turn_index + 1}"
        elif isinstance(event, ToolExecutionStart):
            message = f"calling {event.tool_name}"
        elif isinstance(event, ToolExecutionEnd):
            message = f"{event.tool_name} {'failed' if event.is_error else 'done'}"
        else:
            return
        self.count += 1
        await self.ctx.report_progress(self.count, None, message)


async def _decide(agent: Agent[Any], ctx: Any) -> bool:
    """Decide the calls a suspended run waits on: approvals by elicitation (when the client
    supports it), the rest denied. Whether there was anything to decide."""
    from mcp.types import ClientCapabilities, ElicitationCapability
    from pydantic import BaseModel

    class Approval(BaseModel):
        approved: bool
        reason: str = ""

    context = agent.context
    waiting = list(context.waiting_tool_calls)
    can_ask = ctx.session.check_client_capability(
        ClientCapabilities(elicitation=ElicitationCapability())
    )
    for call_id in waiting:
        record = context.suspended[call_id]
        if record.external:
            context.deny(call_id, NO_CLIENT_TOOLS)
            continue
        if not can_ask:
            context.deny(call_id, NO_ELICITATION)
            continue
        question = record.prompt or "Allow this tool call?"
        arguments = json.dumps(record.arguments, ensure_ascii=False)
        answer = await ctx.elicit(f"{question}\n{record.name}({arguments})", Approval)
        data = getattr(answer, "data", None)
        if answer.action == "accept" and data is not None and data.approved:
            context.approve(call_id)
        else:
            reason = (data.reason if data is not None else "") or "The user denied this tool call."
            context.deny(call_id, reason)
    return bool(waiting)


def _tool_for(template: Agent[Any]) -> Any:
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import Field

    async def ask(prompt: str, ctx: Context) -> str:
        agent = template.branch(0)
        progress = _Progress(ctx)
        messages: list[Any] = [UserMessage.of(prompt)]
        for _ in range(MAX_ROUNDS):
            result = await drive(agent, messages, progress)
            if result.reason != "suspended" or not await _decide(agent, ctx):
                break
            messages = []
        if result.reason == "error":
            raise ToolError(result.error.message if result.error else "the run failed")
        if result.reason in ("limit", "rejected", "vetoed"):
            raise ToolError(f"the agent stopped ({result.reason}): {result.text}".rstrip(": "))
        return _answer(result)

    # real objects, not the strings this module's annotations are: the SDK reads them
    what = "What to ask the agent: a task or a question, in words."
    ask.__annotations__ = {
        "prompt": Annotated[str, Field(description=what)],
        "ctx": Context,
        "return": str,
    }
    return ask


def mcp_server(
    agents: Any,
    *,
    name: str = "treadle",
    instructions: str | None = None,
) -> Any:
    """An ``mcp.server.mcpserver.MCPServer`` offering each agent (an Agent, a list, or
    ``{name: agent}``) as a tool named after it, whose description is the agent's
    ``description``."""
    MCPServer = _sdk()
    server = MCPServer(name, instructions=instructions, log_level="WARNING")
    for tool_name, template in agents_by_name(agents).items():
        description = template.description or f"Ask the agent {tool_name!r}; it answers in text."
        server.add_tool(_tool_for(template), name=tool_name, description=description)
    return server


async def serve_mcp_stdio(agents: Any, *, name: str = "treadle") -> None:
    """Serve ``agents`` over MCP on standard input and output until the client closes them."""
    await mcp_server(agents, name=name).run_stdio_async()


def mcp_app(
    agents: Any,
    *,
    path: str = "/mcp",
    name: str = "treadle",
    token: str | None = None,
    origins: Iterable[str] = (),
    trusted_hosts: Iterable[str] = (),
    allow_remote: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
) -> Any:
    """An ASGI app (Starlette) serving ``agents`` over MCP's streamable HTTP transport at
    ``path``. Guarded as every treadle HTTP surface is (docs/security.md): ``token`` asked of
    every request as ``Authorization: Bearer``; without one, loopback peers asking for a
    loopback name only; foreign and ``null`` Origins refused; bodies bounded."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    server = mcp_server(agents, name=name)
    # the guard checks Host and Origin (and knows the trusted hosts); the SDK's own check
    # would refuse a host the guard lets through
    server.streamable_http_app(
        streamable_http_path=path,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=max_body_bytes,
    )
    manager = server.session_manager
    guard = HTTPGuard(
        manager.handle_request,
        token=token,
        origins=origins,
        trusted_hosts=trusted_hosts,
        allow_remote=allow_remote,
        max_body_bytes=max_body_bytes,
        body_timeout=body_timeout,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(
        routes=[Route(path, guard, methods=["GET", "POST", "DELETE"])], lifespan=lifespan
    )
    app.state.mcp = server
    return app
