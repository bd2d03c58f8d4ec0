"""treadle.mcp as a client: errors that name their cause, the HTTP status and the URL; the
client's name and capabilities; elicitation defaults; bearer tokens and ``auth=``; one
connection shared by several agents; the former class names. Against the real test server
(mcp_server.py, the SDK's server side), on asyncio and trio."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.launched import Launch

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[mcp]'")

import anyio
import httpx2

import treadle
from treadle import Agent, AssistantMessage, ToolCall, ToolResultMessage
from treadle.mcp import MCPError, MCPHTTPClient, MCPStdioClient
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio
SERVER = str(Path(__file__).with_name("mcp_server.py"))
TOKEN = "tok-7f3a9c51e2"


def plain_stdio(name: str = "demo", **options: Any) -> MCPStdioClient:
    """The test server over stdio, started the plain way (``python mcp_server.py stdio``):
    for the test of the process itself (the pid the client knows is the server's own). The
    others use the ``stdio`` fixture (conftest.py: the same server, forked from a process
    that has imported the MCP SDK)."""
    return MCPStdioClient(
        name, command=sys.executable, args=[SERVER, "stdio"], errlog=subprocess.DEVNULL, **options
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(name: str, arguments: dict[str, Any] | None = None, call_id: str = "c1") -> Any:
    return AssistantMessage(content=[ToolCall(id=call_id, name=name, arguments=arguments or {})])


def results(messages: list[Any]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


# ---- errors ----


async def test_an_unreachable_server_names_the_cause_and_the_url_without_secrets() -> None:
    port = free_port()  # nothing listens there
    url = f"http://alice:hunter2@127.0.0.1:{port}/mcp?token=sekrit-token&region=eu"
    client = MCPHTTPClient("docs", url=url, headers={"Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(MCPError) as raised:
        async with client:
            pass
    message = str(raised.value)
    # the cause, as httpx2 words it on each backend
    assert "ConnectError: All connection attempts failed" in message or (
        f"ConnectError: all attempts to connect to 127.0.0.1:{port} failed" in message
    )
    assert f"http://127.0.0.1:{port}/mcp?token=REDACTED&region=eu" in message
    assert "MCP server 'docs'" in message and "could not connect" in message
    for secret in ("hunter2", "alice", "sekrit-token", TOKEN, "ExceptionGroup", "TaskGroup"):
        assert secret not in message
    assert raised.value.status is None and raised.value.server == "docs"
    agent = Agent(ScriptedProvider(["never"]), tools=[client])
    with pytest.raises(MCPError, match="ConnectError"):
        async with agent:
            pass


async def test_a_server_gone_mid_session_is_named_with_its_cause(
    mcp_http_process: tuple[Launch, str],
) -> None:
    process, url = mcp_http_process
    client = MCPHTTPClient("web", url=url, connect_timeout=600)
    async with client:
        assert (await client.call_tool("echo", {"text": "x"})).text == "x"
        process.kill_script()  # the server's own process, SIGKILLed where it stands
        lost = await client.call_tool("echo", {"text": "x"})
        assert lost.is_error and lost.text.startswith(f"MCP server 'web' (url='{url}')")
        # guard only: a call that waited out connect_timeout for a reconnect that had
        # already failed would take 600 s; the failure answers it as soon as it is known
        with anyio.fail_after(60):
            again = await client.call_tool("echo", {"text": "x"})  # the restart fails
            assert again.is_error and "could not reconnect: ConnectError: " in again.text
            with pytest.raises(MCPError, match="could not reconnect: ConnectError: "):
                await client.get_tools()


@pytest.fixture(scope="module")
def auth_url(start_mcp_server: Callable[..., str]) -> str:
    return start_mcp_server("http-auth", TOKEN)


async def test_a_401_at_connect_is_an_mcp_error_with_the_status(auth_url: str) -> None:
    client = MCPHTTPClient("web", url=auth_url, headers={"Authorization": "Bearer wrong-123"})
    with pytest.raises(MCPError) as raised:
        async with client:
            pass
    assert raised.value.status == 401
    message = str(raised.value)
    assert "HTTP 401 Unauthorized" in message and "could not connect" in message
    assert auth_url in message and "wrong-123" not in message
    assert "ExceptionGroup" not in message and "TaskGroup" not in message


async def test_a_401_later_is_the_same_error_from_get_tools_and_call_tool(
    start_mcp_server: Callable[..., str],
) -> None:
    url = start_mcp_server("http-auth", TOKEN)  # its own server: rotate changes its token
    client = MCPHTTPClient("web", url=url, headers={"Authorization": f"Bearer {TOKEN}"})
    async with client:
        assert (await client.call_tool("echo", {"text": "hi"})).text == "hi"  # lists them too
        assert (await client.call_tool("rotate", {})).text == "rotated"
        with pytest.raises(MCPError) as raised:
            await client.get_tools()
        assert raised.value.status == 401
        assert "tools/list failed: HTTP 401 Unauthorized" in str(raised.value)
        result = await client.call_tool("echo", {"text": "hi"})
        assert result.is_error
        assert "tools/call 'echo' failed: HTTP 401 Unauthorized" in result.text
        assert f"MCP server 'web' (url='{url}'" in result.text and TOKEN not in result.text
        with pytest.raises(MCPError, match="resources/list failed: HTTP 401"):
            await client.list_resources()
        run = await Agent(ScriptedProvider(["never"]), tools=[client]).run("hi")
        assert run.reason == "error" and run.error is not None
        assert "HTTP 401 Unauthorized" in run.error.message


class RefreshingBearer(httpx2.Auth):
    """Sends a bearer token; on a 401 gets a fresh one (here: the server's next) and
    retries once — the shape of any token-refreshing ``httpx2.Auth``."""

    def __init__(self, base: str) -> None:
        self.base, self.count, self.refreshes = base, 1, 0

    def token(self) -> str:
        return self.base if self.count == 1 else f"{self.base}-{self.count}"

    def auth_flow(self, request: httpx2.Request) -> Any:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        response = yield request
        if response.status_code == 401:
            self.count += 1  # a real one would call the token endpoint with its refresh token
            self.refreshes += 1
            request.headers["Authorization"] = f"Bearer {self.token()}"
            yield request


async def test_auth_sends_and_refreshes_bearer_tokens(start_mcp_server: Callable[..., str]) -> None:
    url = start_mcp_server("http-auth", TOKEN)
    auth = RefreshingBearer(TOKEN)
    client = MCPHTTPClient("web", url=url, auth=auth)
    assert "auth=RefreshingBearer" in repr(client) and TOKEN not in repr(client)
    provider = ScriptedProvider(
        [call("mcp__web__rotate"), call("mcp__web__echo", {"text": "still in"}, "c2"), "done"]
    )
    agent = Agent(provider, tools=[client])
    async with agent:
        run = await agent.run("rotate, then echo")
    rotated, echoed = results(run.messages)
    assert rotated.text == "rotated" and echoed.text == "still in" and not echoed.is_error
    assert auth.refreshes == 1 and run.reason == "completed"


# ---- what the client says about itself ----


async def test_the_client_announces_treadle_and_only_what_it_handles(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    async with stdio() as client:
        bare = json.loads((await client.call_tool("whoami", {})).text)
    assert bare["name"] == "treadle" and bare["version"] == treadle.__version__
    assert "elicitation" not in bare["capabilities"] and "sampling" not in bare["capabilities"]

    async def handler(message: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {}

    sampler = ScriptedProvider(["x"])
    async with stdio(elicitation_handler=handler, sampling_provider=sampler) as client:
        full = json.loads((await client.call_tool("whoami", {})).text)
    assert full["capabilities"]["elicitation"] == {"form": {}}  # no URL mode: not handled
    assert "sampling" in full["capabilities"]


async def test_an_accepted_elicitation_gets_the_schemas_defaults(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    answers: list[dict[str, Any]] = [{}, {"name": "Bo", "email": "bo@example.com"}]

    async def handler(message: str, schema: dict[str, Any]) -> dict[str, Any]:
        return answers.pop(0)

    async with stdio(elicitation_handler=handler) as client:
        empty = json.loads((await client.call_tool("profile", {})).text)
        partial = json.loads((await client.call_tool("profile", {})).text)
    assert empty == {"action": "accept", "content": {"name": "Ada", "age": 36}}
    assert partial["content"] == {"name": "Bo", "email": "bo@example.com", "age": 36}


# ---- one connection, many agents ----


async def test_two_agents_share_a_client_opened_by_its_owner(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    client = stdio()
    first = Agent(ScriptedProvider([call("mcp__demo__add", {"a": 1, "b": 2}), "3"]), tools=[client])
    second = Agent(
        ScriptedProvider([call("mcp__demo__add", {"a": 2, "b": 2}), "4"]), tools=[client]
    )
    async with client:
        async with first, second:  # both borrow the open connection: no "already running"
            async with anyio.create_task_group() as tg:
                tg.start_soon(first.run, "1+2")
                tg.start_soon(second.run, "2+2")
            assert client.shared
        assert client.running and not client.shared  # the agents left it open
        again = await client.call_tool("add", {"a": 5, "b": 5})
        assert again.text == "10"
    assert not client.running
    assert [r.text for r in results(first.messages)] == ["3"]
    assert [r.text for r in results(second.messages)] == ["4"]


async def test_the_first_agent_owns_the_connection_and_a_second_borrows_it(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    client = stdio()
    first = Agent(ScriptedProvider(["a"]), tools=[client])
    second = Agent(ScriptedProvider([call("mcp__demo__echo", {"text": "hi"}), "b"]), tools=[client])
    async with first:
        async with second:
            run = await second.run("echo")
        assert client.running  # the borrower's exit did not close it
        assert [r.text for r in results(run.messages)] == ["hi"]
    assert not client.running


async def test_a_borrower_in_another_task_never_closes_the_owners_connection(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    client = stdio()
    entered, leave = anyio.Event(), anyio.Event()

    async def borrower() -> None:
        async with client:
            entered.set()
            await leave.wait()

    async def close_from_elsewhere() -> None:
        with pytest.raises(MCPError, match="did not open the connection"):
            await client.aclose()

    async with client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(borrower)
            await entered.wait()
            tg.start_soon(close_from_elsewhere)  # refused: not the opener's task
            leave.set()
        assert client.running and (await client.call_tool("echo", {"text": "x"})).text == "x"
    assert not client.running


async def test_an_owner_closing_closes_it_for_a_borrower_which_is_told_so(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    client = stdio()
    borrowed, closed = anyio.Event(), anyio.Event()
    seen: list[Any] = []

    async def borrower() -> None:
        async with client:
            borrowed.set()
            await closed.wait()
            seen.append(await client.call_tool("echo", {"text": "x"}))

    async with anyio.create_task_group() as tg:
        async with client:
            tg.start_soon(borrower)
            await borrowed.wait()
        closed.set()  # the owner's block has ended while the borrower still holds it
    (result,) = seen
    assert result.is_error and "not open" in result.text and not client.running


# ---- a stdio server's process ----


async def test_a_stdio_servers_process_is_known_and_followed() -> None:
    import os

    client = plain_stdio(timeout=20)
    assert client.pid is None and not client.alive and client.returncode is None
    async with client:
        first = client.pid
        assert first is not None and client.alive
        assert (await client.call_tool("pid", {})).text == str(first)  # that very process
        await client.call_tool("crash", {})  # it exits with status 3
        with anyio.fail_after(10):
            while client.alive:  # noqa: ASYNC110 (another process's exit)
                await anyio.sleep(0.02)
        assert client.returncode == 3 and client.pid == first
        again = await client.call_tool("pid", {})  # restarted: a new process
        assert client.pid != first and again.text == str(client.pid) and client.alive
        last = client.pid
    assert not client.alive and client.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.kill(last, 0)  # stopped and reaped


# ---- the former names ----


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("MCPServer", "MCPClient"),
        ("MCPServerStdio", "MCPStdioClient"),
        ("MCPServerHTTP", "MCPHTTPClient"),
        ("MCPServerSSE", "MCPSSEClient"),
    ],
)
def test_the_former_names_still_work_with_a_deprecation_warning(old: str, new: str) -> None:
    import treadle.mcp
    import treadle.mcp.servers

    for module in (treadle.mcp, treadle.mcp.servers):
        with pytest.warns(DeprecationWarning, match=f"{old} is now treadle.mcp.{new}"):
            value = getattr(module, old)
        assert value is getattr(treadle.mcp, new)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        getattr(treadle.mcp, new)  # the new names do not warn
    with pytest.raises(AttributeError):
        treadle.mcp.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
