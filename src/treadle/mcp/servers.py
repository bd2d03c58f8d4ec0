"""MCP servers as toolsets: stdio, streamable HTTP and SSE, over the official ``mcp`` SDK.

A server's session lives in a task of the toolset's own task group, opened by
``async with server:`` (or ``async with agent:``): the SDK's transports are async context
managers bound to the task that entered them, so one task owns the connection and every
call — from any task of the same event loop — goes through it. When the connection drops
(the server died, the network went away) that task notices, closes it, and reconnects on
the next call (``restart=True``, the default) or leaves the server reported as stopped.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from ..errors import TreadleError
from ..providers import ModelRequest, Provider, StreamDone, redact_url
from ..tools import ToolCategory, ToolContext
from ..types import AssistantMessage, TextContent, ToolResult, UserMessage
from .convert import scrub, tool_result

logger = logging.getLogger("treadle.mcp")

DEFAULT_TIMEOUT = 120.0
"""Seconds a tool call may take (the MCP tool category's default)."""

ElicitationHandler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]
"""``(message, requested_schema) -> answer`` (a dict) or ``None`` to decline."""


class MCPError(TreadleError):
    """An MCP server could not be started or used; the message names the server."""


class MCPTool:
    """One tool of an MCP server, as a treadle :class:`~treadle.tools.Tool`: its description
    and input schema pass through unchanged; a call goes to the server."""

    category = ToolCategory.MCP
    sequential = False
    accepts_raw_arguments = False
    validates_arguments = True  # the server checks its own arguments

    def __init__(
        self, server: MCPServer, name: str, remote_name: str, description: str, schema: Any
    ) -> None:
        self.server = server
        self.name = name
        self.remote_name = remote_name
        self.description = description
        self.parameters: dict[str, Any] = dict(schema or {"type": "object", "properties": {}})
        self.timeout = server.timeout
        self.source = f"MCP server {server.name!r}"
        self.idempotent = False  # set from the tool's annotations when the server gives them

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> ToolResult:
        return await self.server.call_tool(self.remote_name, arguments)

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r}, server={self.server.name!r})"


class MCPServer:
    """The base of the transports: a toolset whose tools are an MCP server's.

    ``name`` names the server (``mcp__{name}__{tool}`` by default: ``prefix`` is a template
    with ``{server}``, or ``""`` for the bare tool names); ``timeout`` bounds each call
    (seconds); ``restart`` reconnects on the next call after the server died (otherwise
    calls report it stopped); ``include`` / ``exclude`` filter tools by their MCP name;
    ``sampling_provider`` answers the server's sampling requests with that provider
    (opt-in); ``elicitation_handler`` answers its elicitation requests (declined without
    one)."""

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
        self.timeout = timeout
        self.restart = restart
        self.include = set(include) if include is not None else None
        self.exclude = set(exclude)
        self.sampling_provider = sampling_provider
        self.elicitation_handler = elicitation_handler
        self.connect_timeout = connect_timeout
        self._tg: TaskGroup | None = None
        self._session: Any = None
        self._tools: list[MCPTool] | None = None
        self._drop = anyio.Event()
        self._want = anyio.Event()
        self._up = anyio.Event()
        self._closing = False
        self._restart_wanted = False
        self._failure: str | None = None
        self.restarts = 0

    # ---- what a transport provides ----

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    def _secrets(self) -> list[str]:
        return []

    def _where(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self._where()})"

    # ---- lifecycle ----

    async def __aenter__(self) -> MCPServer:
        if self._tg is not None:
            raise MCPError(f"MCP server {self.name!r} is already running")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        try:
            await tg.start(self._keep_connected)
        except BaseException:
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)
            raise
        self._tg = tg
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection (stops a stdio server's process). Call it from the task that
        entered ``async with`` (as ``async with`` does)."""
        tg, self._tg = self._tg, None
        if tg is None:
            return
        self._closing = True
        self._drop.set()
        self._want.set()
        await tg.__aexit__(None, None, None)

    @property
    def running(self) -> bool:
        return self._session is not None

    async def _keep_connected(self, *, task_status: TaskStatus[None]) -> None:
        first = True
        while not self._closing:
            self._drop = anyio.Event()
            try:
                async with contextlib.AsyncExitStack() as stack:
                    session = await stack.enter_async_context(self._connect())
                    self._session, self._tools, self._failure = session, None, None
                    self._up.set()
                    if first:
                        first = False
                        task_status.started()
                    await self._drop.wait()
            except Exception as exc:
                self._failure = scrub(f"{type(exc).__name__}: {exc}", self._secrets())
                logger.warning("MCP server %r stopped: %s", self.name, self._failure)
                if first:
                    raise MCPError(
                        f"could not start MCP server {self.name!r} ({self._where()}): "
                        f"{self._failure}"
                    ) from None
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
        from mcp import ClientSession

        async with self._transport() as streams:
            read, write = streams[0], streams[1]
            session = ClientSession(
                read,
                write,
                message_handler=self._on_message,
                sampling_callback=self._sample if self.sampling_provider else None,
                elicitation_callback=self._elicit,
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
            raise MCPError(
                f"MCP server {self.name!r} is not running: open it with `async with server:` "
                "(or `async with agent:` for the agent's servers) before a run"
            )
        if self._session is None:
            if not self.restart:
                raise MCPError(
                    f"MCP server {self.name!r} has stopped ({self._failure or 'disconnected'}) "
                    "and restart=False"
                )
            self._restart_wanted = True
            self._want.set()
            with anyio.move_on_after(self.connect_timeout):
                await self._up.wait()
            if self._session is None:
                raise MCPError(f"MCP server {self.name!r} could not be restarted")
        return self._session

    # ---- tools ----

    async def get_tools(self) -> Sequence[MCPTool]:
        """The server's tools (listed once, again after ``tools/list_changed``)."""
        if self._tools is not None and self._session is not None:
            return self._tools
        session = await self._ready()
        listed: list[Any] = []
        cursor: str | None = None
        while True:
            from mcp.types import PaginatedRequestParams

            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
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
            found.idempotent = bool(getattr(hints, "idempotent_hint", False))
            tools.append(found)
        self._tools = tools
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Call the server's tool ``name``. A dead server or a broken connection is an
        error result (and a restart on the next call), never an exception or a hang;
        cancellation propagates (the SDK tells the server the request was cancelled)."""
        try:
            session = await self._ready()
        except MCPError as exc:
            return ToolResult.error(str(exc))
        try:
            result = await session.call_tool(name, arguments)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            detail = scrub(f"{type(exc).__name__}: {exc}", self._secrets())
            if self._session is session and _connection_lost(exc):
                self._drop.set()  # the connection is gone: close it; restart on demand
                self._mark_down()
            then = "it will be restarted on the next call" if self.restart else "restart=False"
            return ToolResult.error(
                f"MCP server {self.name!r} failed during {name!r}: {detail} ({then})"
            )
        return tool_result(result, self._secrets())

    # ---- beyond tools ----

    async def list_resources(self) -> list[Any]:
        """The server's resources (``mcp.types.Resource``: uri, name, description ...)."""
        session = await self._ready()
        return list((await session.list_resources()).resources)

    async def read_resource(self, uri: str) -> list[Any]:
        """The contents of one resource (text or blob contents)."""
        session = await self._ready()
        return list((await session.read_resource(uri)).contents)

    async def list_prompts(self) -> list[Any]:
        """The server's prompt templates (``mcp.types.Prompt``)."""
        session = await self._ready()
        return list((await session.list_prompts()).prompts)

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> list[Any]:
        """A prompt template filled in: its messages (role and content)."""
        session = await self._ready()
        return list((await session.get_prompt(name, dict(arguments or {}))).messages)

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
        from mcp.types import ElicitResult

        handler = self.elicitation_handler
        schema = dict(getattr(params, "requested_schema", None) or {})
        if handler is None:
            return ElicitResult(action="decline")
        try:
            answer = await handler(str(params.message), schema)
        except Exception:
            logger.exception("the elicitation handler of MCP server %r failed", self.name)
            return ElicitResult(action="cancel")
        if answer is None:
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content=answer)


def _connection_lost(exc: BaseException) -> bool:
    broken = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
    if isinstance(exc, broken):
        return True
    text = str(exc).lower()
    return "closed" in text or "connection" in text or "terminated" in text


class MCPServerStdio(MCPServer):
    """A server started as a subprocess, speaking MCP on its stdin/stdout.

    ``MCPServerStdio("files", command="npx", args=["-y", "@mcp/server-files", "."])``;
    ``env`` is merged over a safe default environment; ``cwd`` is its working folder.
    The server's stderr goes to this process's stderr (``errlog`` to change it)."""

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

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        from mcp.client.stdio import stdio_client

        from mcp import StdioServerParameters

        params = StdioServerParameters(
            command=self.command, args=self.args, env=self._env, cwd=self.cwd
        )
        return stdio_client(params, errlog=self.errlog)

    def _secrets(self) -> list[str]:
        return list((self._env or {}).values())

    def _where(self) -> str:
        return f"command={self.command!r}"


class _HTTPServer(MCPServer):
    def __init__(
        self,
        name: str,
        *,
        url: str,
        headers: Mapping[str, str] | None = None,
        http_timeout: float = 30.0,
        **options: Any,
    ) -> None:
        super().__init__(name, **options)
        self.url = url
        self.__headers = dict(headers or {})
        self.http_timeout = http_timeout

    @property
    def header_names(self) -> list[str]:
        """The names of the headers sent (their values, often credentials, stay private)."""
        return sorted(self.__headers)

    def _headers(self) -> dict[str, str]:
        return dict(self.__headers)

    def _secrets(self) -> list[str]:
        values = list(self.__headers.values())
        return values + [v.partition(" ")[2] for v in values if " " in v]

    def _where(self) -> str:
        names = f", headers={self.header_names}" if self.__headers else ""
        return f"url={redact_url(self.url)!r}{names}"


class MCPServerHTTP(_HTTPServer):
    """A server reached over streamable HTTP (the current MCP transport).

    ``MCPServerHTTP("docs", url="https://example.com/mcp", headers={"Authorization":
    f"Bearer {token}"})``; header values never appear in reprs, events or errors."""

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        timeout = httpx2.Timeout(self.http_timeout, read=max(self.timeout, 300.0))
        client = create_mcp_http_client(headers=self._headers(), timeout=timeout)
        return _owning(client, streamable_http_client(self.url, http_client=client))


class MCPServerSSE(_HTTPServer):
    """A server reached over the older HTTP+SSE transport (deprecated by MCP; for servers
    that have not moved to streamable HTTP)."""

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        from mcp.client.sse import sse_client

        return sse_client(
            self.url,
            headers=self._headers(),
            timeout=self.http_timeout,
            sse_read_timeout=max(self.timeout, 300.0),
        )


@contextlib.asynccontextmanager
async def _owning(client: Any, transport: Any) -> AsyncIterator[Any]:
    """Enter ``transport`` and close ``client`` (which we made for it) afterwards."""
    async with client, transport as streams:
        yield streams
