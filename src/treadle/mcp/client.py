"""A client of an MCP server as a toolset (the transports are in ``transports.py``), over the
official ``mcp`` SDK.

A server's session lives in a task of the client's own task group, opened by the first
``async with client:`` (or ``async with agent:``), which owns it; later ones borrow it. The
SDK's transports are async context managers bound to the task that entered them, so one
task owns the connection and every call — from any task of the same event loop — goes
through it. When the connection drops (the server died, the network went away) that task
notices, closes it, and reconnects on the next call (``restart=True``, the default) or
leaves the server reported as stopped. Every failure is an :class:`MCPError` naming the
server, where it is, the HTTP status and the cause.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from ..providers import ModelRequest, Provider, StreamDone
from ..tools import ToolCategory, ToolContext, ToolTraits
from ..types import AssistantMessage, TextContent, ToolResult, UserMessage
from .convert import tool_result, with_defaults
from .errors import MCPError, describe

logger = logging.getLogger("treadle.mcp")

DEFAULT_TIMEOUT = 120.0
"""Seconds a tool call may take (the MCP tool category's default)."""

ElicitationHandler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]
"""``(message, requested_schema) -> answer`` (a dict) or ``None`` to decline."""


class MCPTool:
    """One tool of an MCP server, as a treadle :class:`~treadle.tools.Tool`: its description
    and input schema pass through unchanged; a call goes to the server."""

    def __init__(
        self, server: MCPClient, name: str, remote_name: str, description: str, schema: Any
    ) -> None:
        self.server = server
        self.name = name
        self.remote_name = remote_name
        self.description = description
        self.parameters: dict[str, Any] = dict(schema or {"type": "object", "properties": {}})
        self.traits = ToolTraits(
            category=ToolCategory.MCP,
            timeout=server.timeout,
            validates_arguments=True,  # the server checks its own arguments
            source=f"MCP server {server.name!r}",
        )

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> ToolResult:
        return await self.server.call_tool(self.remote_name, arguments)

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r}, server={self.server.name!r})"


class MCPClient:
    """A client of one MCP server: a toolset whose tools are the server's. The base of the
    transports (:class:`MCPStdioClient`, :class:`MCPHTTPClient`, :class:`MCPSSEClient`).

    ``name`` names the server (``mcp__{name}__{tool}`` by default: ``prefix`` is a template
    with ``{server}``, or ``""`` for the bare tool names); ``timeout`` bounds each call
    (seconds); ``restart`` reconnects on the next call after the server died (otherwise
    calls report it stopped); ``include`` / ``exclude`` filter tools by their MCP name;
    ``sampling_provider`` answers the server's sampling requests with that provider
    (opt-in); ``elicitation_handler`` answers its form elicitation requests. treadle
    announces itself to the server as ``treadle`` and its version, and advertises sampling
    and elicitation only when it has a provider / handler for them.

    One client is one connection, which several agents may share: the first
    ``async with`` opens it and owns it; an ``async with`` (or ``async with agent:``) while
    it is open borrows it and leaves it open; it closes when the owner's block ends."""

    def __init__(
        self,
        name: str,
        *,
        prefix: str = "mcp__{server}__",
        timeout: float = DEFAULT_TIMEOUT,
        restart: bool = True,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        sampling_provider: Provider | None = None,
        elicitation_handler: ElicitationHandler | None = None,
        connect_timeout: float = 30.0,
    ) -> None:
        self.name = name
        self.prefix = prefix.format(server=name)
        ToolTraits(timeout=timeout)  # a bad timeout (0, negative) is refused now, not per call
        self.timeout = timeout
        self.restart = restart
        self.include = set(include) if include is not None else None
        self.exclude = set(exclude)
        self.sampling_provider = sampling_provider
        self.elicitation_handler = elicitation_handler
        self.connect_timeout = connect_timeout
        self._tg: TaskGroup | None = None
        self._owner: int | None = None  # the task that opened the connection
        self._borrows: dict[int, int] = {}  # task -> `async with` depth while open
        self._session: Any = None
        self._tools: list[MCPTool] | None = None
        self._drop = anyio.Event()
        self._want = anyio.Event()
        self._up = anyio.Event()
        self._settled = anyio.Event()  # the (re)connect attempt a call waits on has ended
        self._closing = False
        self._restart_wanted = False
        self._failure: str | None = None
        self._http_status: tuple[int, str] | None = None  # the last failed HTTP request's
        self.restarts = 0

    # ---- what a transport provides ----

    _opening = "could not connect"  # what failing to open the connection is called

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    def _secrets(self) -> list[str]:
        return []

    def _where(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self._where()})"

    # ---- errors ----

    def _reason(self, exc: BaseException | None, detail: str = "") -> str:
        """The HTTP status of the request that failed (if one did) and the cause."""
        status = self._http_status
        cause = describe(exc, self._secrets()) if exc is not None else detail
        parts = [f"HTTP {status[0]} {status[1]}".rstrip()] if status else []
        parts += [cause] if cause else []
        current = exc is not None or self._tg is not None  # not a closed client's past
        parts += [note] if current and (note := self._state_note()) else []
        return " — ".join(parts)

    def _state_note(self) -> str:
        """What the transport adds to an error (a stdio server's exit status)."""
        return ""

    def _error(self, doing: str, exc: BaseException | None = None, detail: str = "") -> MCPError:
        """An :class:`MCPError` for a failure while ``doing``: the server, where it is, the
        HTTP status of the request that failed (if one did) and the cause."""
        reason = self._reason(exc, detail)
        message = f"MCP server {self.name!r} ({self._where()}): {doing}"
        return MCPError(
            f"{message}: {reason}" if reason else message,
            server=self.name,
            where=self._where(),
            status=self._http_status[0] if self._http_status else None,
            cause=describe(exc, self._secrets()) if exc is not None else detail,
        )

    # ---- lifecycle ----

    async def __aenter__(self) -> MCPClient:
        task = anyio.get_current_task().id
        if self._tg is not None:  # already open: borrow the connection
            self._borrows[task] = self._borrows.get(task, 0) + 1
            return self
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._closing = False
        try:
            await tg.start(self._keep_connected)
        except BaseException:
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)
            raise
        self._tg, self._owner = tg, task
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        task = anyio.get_current_task().id
        depth = self._borrows.get(task, 0)
        if depth:  # a borrower leaves; the connection stays open
            if depth == 1:
                del self._borrows[task]
            else:
                self._borrows[task] = depth - 1
            return
        await self.aclose()  # the owner closes; another task is told it cannot

    async def aclose(self) -> None:
        """Close the connection (stops a stdio server's process), whoever borrowed it.
        Call it from the task that opened it (as ``async with`` does)."""
        if self._tg is None:
            return
        if self._owner != anyio.get_current_task().id:
            raise MCPError(
                f"MCP server {self.name!r}: aclose() from a task that did not open the "
                "connection; leave a borrowed client with the end of its `async with` block "
                "(the task that opened it closes it)",
                server=self.name,
                where=self._where(),
            )
        tg, self._tg = self._tg, None
        self._owner = None
        self._borrows.clear()
        self._closing = True
        self._drop.set()
        self._want.set()
        await tg.__aexit__(None, None, None)

    @property
    def running(self) -> bool:
        """Whether the connection is open and up."""
        return self._session is not None

    @property
    def shared(self) -> bool:
        """Whether agents (or other blocks) currently borrow this open connection."""
        return bool(self._borrows)

    async def _keep_connected(self, *, task_status: TaskStatus[None]) -> None:
        first = True
        while not self._closing:
            self._drop = anyio.Event()
            connected = False
            try:
                async with contextlib.AsyncExitStack() as stack:
                    session = await stack.enter_async_context(self._connect())
                    connected = True
                    self._session, self._tools, self._failure = session, None, None
                    self._up.set()
                    self._settled.set()
                    if first:
                        first = False
                        task_status.started()
                    await self._drop.wait()
            except Exception as exc:
                doing = "connection lost" if connected else "could not reconnect"
                error = self._error(self._opening if first else doing, exc)
                self._failure = self._reason(exc)
                if not connected:  # a call waiting for this reconnect gets the failure now
                    self._settled.set()
                logger.warning("%s", error)
                if first:
                    raise error from None
            self._mark_down()
            if self._closing:
                return
            if not self._restart_wanted:
                self._want = anyio.Event()
                await self._want.wait()  # until a call asks for a restart, or close
            self._restart_wanted = False
            if not self._closing:
                self.restarts += 1

    def _mark_down(self) -> None:
        self._session = None
        if self._up.is_set():
            self._up = anyio.Event()

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[Any]:
        from mcp.types import Implementation

        from .session import Session

        self._http_status = None
        async with self._transport() as streams:
            read, write = streams[0], streams[1]
            session = Session(
                read,
                write,
                message_handler=self._on_message,
                sampling_callback=self._sample if self.sampling_provider else None,
                elicitation_callback=self._elicit if self.elicitation_handler else None,
                client_info=Implementation(name="treadle", version=_version()),
            )
            async with session:
                with anyio.fail_after(self.connect_timeout):
                    await session.initialize()
                yield session

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._tools = None  # listed again before the next model call
        elif isinstance(message, Exception):
            logger.debug("MCP server %r sent an error: %s", self.name, message)

    async def _ready(self) -> Any:
        if self._tg is None:
            raise self._error(
                "not open",
                detail="open it with `async with client:` (or `async with agent:` for the "
                "agent's servers) before a run",
            )
        if self._session is None:
            if not self.restart:
                raise self._error(
                    "stopped", detail=f"{self._failure or 'disconnected'}; restart=False"
                )
            if self._settled.is_set():  # a fresh attempt: wait for it, not an earlier one
                self._settled = anyio.Event()
            settled = self._settled
            self._restart_wanted = True
            self._want.set()
            with anyio.move_on_after(self.connect_timeout):
                await settled.wait()
            if self._session is None:
                raise self._error("could not reconnect", detail=self._failure or "")
        return self._session

    async def _request(self, doing: str, send: Callable[[Any], Awaitable[Any]]) -> Any:
        """``await send(session)``; any failure (but cancellation) as an :class:`MCPError`."""
        return await self._send(await self._ready(), doing, send)

    async def _send(self, session: Any, doing: str, send: Callable[[Any], Awaitable[Any]]) -> Any:
        self._http_status = None
        try:
            return await send(session)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            error = self._error(doing, exc)
            if self._session is session and _connection_lost(exc):
                self._failure = self._reason(exc)
                self._drop.set()  # the connection is gone: close it; restart on demand
                self._mark_down()
            raise error from None

    # ---- tools ----

    async def get_tools(self) -> Sequence[MCPTool]:
        """The server's tools (listed once, again after ``tools/list_changed``). Raises
        :class:`MCPError` (with the HTTP status and the cause) when they cannot be listed."""
        if self._tools is not None and self._session is not None:
            return self._tools
        from mcp.types import PaginatedRequestParams

        async def list_all(session: Any) -> list[Any]:
            listed: list[Any] = []
            cursor: str | None = None
            while True:
                params = PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                listed.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return listed

        listed = await self._request("tools/list failed", list_all)
        tools: list[MCPTool] = []
        for listed_tool in listed:
            name = listed_tool.name
            if (self.include is not None and name not in self.include) or name in self.exclude:
                continue
            found = MCPTool(
                self, self.prefix + name, name, listed_tool.description or "",
                listed_tool.input_schema,
            )  # fmt: skip
            hints = getattr(listed_tool, "annotations", None)
            if getattr(hints, "idempotent_hint", False) is True:
                found.traits = replace(found.traits, idempotent=True)
            tools.append(found)
        self._tools = tools
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Call the server's tool ``name``. A failure — a dead server, a broken connection,
        an HTTP error — is an error result whose text is the :class:`MCPError` message
        (status and cause included) and a restart on the next call, never an exception or
        a hang; cancellation propagates (the SDK tells the server the request was
        cancelled)."""
        try:
            session = await self._ready()
        except MCPError as exc:
            return ToolResult.error(str(exc))
        try:
            result = await self._send(
                session, f"tools/call {name!r} failed", lambda s: s.call_tool(name, arguments)
            )
        except MCPError as exc:
            if self._tg is not None and self._session is None:  # this call lost it
                then = "restarted on the next call" if self.restart else "restart=False"
                return ToolResult.error(f"{exc} ({then})")
            return ToolResult.error(str(exc))
        return tool_result(result, self._secrets())

    # ---- beyond tools ----

    async def list_resources(self) -> list[Any]:
        """The server's resources (``mcp.types.Resource``: uri, name, description ...)."""
        result = await self._request("resources/list failed", lambda s: s.list_resources())
        return list(result.resources)

    async def read_resource(self, uri: str) -> list[Any]:
        """The contents of one resource (text or blob contents)."""
        result = await self._request("resources/read failed", lambda s: s.read_resource(uri))
        return list(result.contents)

    async def list_prompts(self) -> list[Any]:
        """The server's prompt templates (``mcp.types.Prompt``)."""
        result = await self._request("prompts/list failed", lambda s: s.list_prompts())
        return list(result.prompts)

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> list[Any]:
        """A prompt template filled in: its messages (role and content)."""
        result = await self._request(
            "prompts/get failed", lambda s: s.get_prompt(name, dict(arguments or {}))
        )
        return list(result.messages)

    # ---- requests from the server ----

    async def _sample(self, context: Any, params: Any) -> Any:
        from mcp.types import CreateMessageResult, ErrorData
        from mcp.types import TextContent as MCPText

        provider = self.sampling_provider
        assert provider is not None
        messages: list[Any] = []
        for message in params.messages:
            content = message.content if isinstance(message.content, list) else [message.content]
            text = "\n".join(getattr(c, "text", "") for c in content)
            if message.role == "user":
                messages.append(UserMessage.of(text))
            else:
                messages.append(AssistantMessage(content=[TextContent(text=text)]))
        request = ModelRequest(
            model=str(getattr(provider, "model", "") or ""),
            system_prompt=params.system_prompt,
            messages=messages,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            stop=list(params.stop_sequences) if params.stop_sequences else None,
        )
        final: AssistantMessage | None = None
        try:
            async for event in provider.stream(request):
                if isinstance(event, StreamDone):
                    final = event.message
        except Exception as exc:
            return ErrorData(code=-32603, message=f"sampling failed: {type(exc).__name__}")
        if final is None:
            return ErrorData(code=-32603, message="sampling gave no answer")
        stop = {"length": "maxTokens"}.get(final.stop_reason, "endTurn")
        return CreateMessageResult(
            role="assistant",
            content=MCPText(type="text", text=final.text),
            model=final.model or request.model,
            stop_reason=stop,
        )

    async def _elicit(self, context: Any, params: Any) -> Any:
        from mcp.types import ElicitResult, ErrorData

        handler = self.elicitation_handler
        if handler is None or getattr(params, "mode", "form") == "url":
            return ErrorData(code=-32601, message="this client answers form elicitation only")
        schema = dict(getattr(params, "requested_schema", None) or {})
        try:
            answer = await handler(str(params.message), schema)
        except Exception:
            logger.exception("the elicitation handler of MCP server %r failed", self.name)
            return ElicitResult(action="cancel")
        if answer is None:
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content=with_defaults(answer, schema))


def _connection_lost(exc: BaseException) -> bool:
    broken = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
    if isinstance(exc, broken):
        return True
    text = str(exc).lower()
    return "closed" in text or "connection" in text or "terminated" in text


def _version() -> str:
    from .. import __version__

    return __version__
