"""treadle.mcp against a real MCP server (tests/mcp/mcp_server.py, the SDK's own server side),
over stdio and streamable HTTP on 127.0.0.1, on asyncio and trio."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[mcp]'")

from treadle import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    CancellationToken,
    ToolCall,
    ToolResultMessage,
    agent_loop,
)
from treadle.mcp import MCPError, MCPHTTPClient, MCPSSEClient, MCPStdioClient
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio
SECRET = "Bearer sk-test-mcp-0123456789"


def call(
    name: str, arguments: dict[str, Any] | None = None, call_id: str = "c1"
) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=call_id, name=name, arguments=arguments or {})])


def results(messages: list[Any]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


async def test_tools_are_listed_with_prefix_description_and_schema(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    async with stdio() as server:
        tools = {t.name: t for t in await server.get_tools()}
        assert "mcp__demo__add" in tools and "mcp__demo__echo" in tools
        add = tools["mcp__demo__add"]
        assert add.description == "Add two integers."
        assert add.parameters["properties"]["a"]["type"] == "integer"
        assert add.parameters["required"] == ["a", "b"]
        assert await server.get_tools() == list(tools.values())  # cached
    bare = stdio(prefix="", include=["add"])
    async with bare:
        assert [t.name for t in await bare.get_tools()] == ["add"]


async def test_an_agent_run_calls_mcp_tools_over_stdio(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    provider = ScriptedProvider([call("mcp__demo__add", {"a": 2, "b": 3}), "It is 5."])
    agent = Agent(provider, tools=[stdio()])
    async with agent:
        result = await agent.run("2+3?")
    assert result.text == "It is 5." and result.reason == "completed"
    (answer,) = results(result.messages)
    assert answer.text == "5" and not answer.is_error
    offered = [t.name for t in provider.requests[0].tools]
    assert "mcp__demo__add" in offered


async def test_content_kinds_and_errors_map_to_tool_results(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    async with stdio() as server:
        failed = await server.call_tool("fail", {"reason": "disk full"})
        assert failed.is_error and "disk full" in failed.text
        picture = await server.call_tool("picture", {})
        assert picture.content[0].type == "image"
        doc = await server.call_tool("doc", {})
        assert "[resource file:///notes.txt]\nthe notes" in doc.text
        assert any(b.type == "image" for b in doc.content)
        weather = await server.call_tool("weather", {"city": "Porto"})
        assert weather.details == {"structured_content": {"city": "Porto", "celsius": 21}}


async def test_list_changed_refreshes_the_tools_before_the_next_turn(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    provider = ScriptedProvider(
        [call("mcp__demo__grow"), call("mcp__demo__extra", call_id="c2"), "ok"]
    )
    agent = Agent(provider, tools=[stdio()])
    async with agent:
        result = await agent.run("grow")
    first, second = ([t.name for t in r.tools] for r in provider.requests[:2])
    assert "mcp__demo__extra" not in first and "mcp__demo__extra" in second
    assert [r.text for r in results(result.messages)] == ["grown", "extra!"]


async def test_a_server_killed_mid_call_is_an_error_result_then_a_restart(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    provider = ScriptedProvider(
        [call("mcp__demo__crash"), call("mcp__demo__echo", {"text": "back"}, "c2"), "done"]
    )
    server = stdio(timeout=20)  # the crash is the server's own exit (status 3), mid-call
    agent = Agent(provider, tools=[server])
    async with agent:
        result = await agent.run("crash it")
    crashed, echoed = results(result.messages)
    assert crashed.is_error and "'demo'" in crashed.text
    assert echoed.text == "back" and server.restarts == 1
    assert result.reason == "completed"


async def test_without_restart_a_dead_server_is_reported(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    async with stdio(restart=False) as server:
        await server.call_tool("crash", {})
        again = await server.call_tool("echo", {"text": "x"})
    assert again.is_error and "restart=False" in again.text


async def test_cancelling_a_run_cancels_the_mcp_request(
    tmp_path: Path, stdio: Callable[..., MCPStdioClient]
) -> None:
    marker = tmp_path / "marker"
    server = stdio(env={"TREADLE_MCP_MARKER": str(marker)})
    import anyio

    provider = ScriptedProvider([call("mcp__demo__slow", {"seconds": 30})])
    token = CancellationToken()
    async with server:
        context = AgentContext(tools=[server])

        async def cancel_when_started() -> None:
            while not marker.exists():  # noqa: ASYNC110 (another process writes it)
                await anyio.sleep(0.02)
            token.cancel("immediate")

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_started)
            with anyio.fail_after(15):
                new = await agent_loop(
                    "go", context, AgentLoopConfig(provider=provider), None, token
                )
        (result,) = results(new)
        assert result.text == "Cancelled"
        with anyio.fail_after(10):
            while "cancelled" not in marker.read_text():  # noqa: ASYNC110
                await anyio.sleep(0.02)  # the server heard of it and stopped the tool


async def test_http_transport_with_secret_headers(http_url: str) -> None:
    server = MCPHTTPClient("web", url=http_url, headers={"Authorization": SECRET})
    assert SECRET not in repr(server) and "Authorization" in repr(server)
    provider = ScriptedProvider([call("mcp__web__headers"), "ok"])
    agent = Agent(provider, tools=[server])
    async with agent:
        result = await agent.run("who am I?")
    (echoed,) = results(result.messages)
    assert echoed.text.startswith("you sent: ") and SECRET not in echoed.text
    assert "sk-test-mcp-0123456789" not in agent.messages[-1].model_dump_json()
    assert "[REDACTED]" in echoed.text


async def test_resources_and_prompts(http_url: str) -> None:
    async with MCPHTTPClient("web", url=http_url) as server:
        resources = await server.list_resources()
        assert [str(r.uri) for r in resources] == ["file:///readme.txt"]
        (content,) = await server.read_resource("file:///readme.txt")
        assert content.text == "read me"
        assert [p.name for p in await server.list_prompts()] == ["greet"]
        (message,) = await server.get_prompt("greet", {"name": "Ada"})
        assert message.content.text == "Hello, Ada!"


async def test_name_clashes_between_servers_are_reported_clearly(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    provider = ScriptedProvider(["never"])
    agent = Agent(provider, tools=[stdio("a", prefix=""), stdio("b", prefix="")])
    async with agent:
        result = await agent.run("hi")
    assert result.reason == "error" and result.error is not None
    assert "MCP server 'a'" in result.error.message and "MCP server 'b'" in result.error.message
    assert not provider.requests  # no model call with an ambiguous tool list


async def test_a_server_that_is_not_started_says_how(stdio: Callable[..., MCPStdioClient]) -> None:
    agent = Agent(ScriptedProvider(["never"]), tools=[stdio()])
    result = await agent.run("hi")  # no `async with agent`
    assert result.reason == "error" and result.error is not None
    assert "async with" in result.error.message


async def test_a_server_that_cannot_start_names_itself() -> None:
    server = MCPStdioClient("broken", command=sys.executable, args=["-c", "raise SystemExit(1)"])
    with pytest.raises(
        MCPError, match=r"MCP server 'broken' \(command=.*\): could not start: Connection closed"
    ):
        async with server:
            pass


def test_import_treadle_does_not_import_mcp() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys, treadle; print('mcp' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "False"


async def test_sampling_requests_are_answered_by_the_agents_provider(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    summariser = ScriptedProvider(["three word summary"], model="summary-model")
    async with stdio(sampling_provider=summariser) as server:
        result = await server.call_tool("summarize", {"text": "a long story " * 20})
    assert result.text == "summary: three word summary (by summary-model)"
    (request,) = summariser.requests
    assert request.system_prompt == "Summarise in three words."
    assert request.messages[0].text.startswith("a long story")  # type: ignore[union-attr]


async def test_without_a_sampling_provider_sampling_is_refused(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    async with stdio() as server:
        result = await server.call_tool("summarize", {"text": "x"})
    assert result.is_error


async def test_elicitation_goes_to_the_handler_and_is_refused_without_one(
    stdio: Callable[..., MCPStdioClient],
) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def approve(message: str, schema: dict[str, Any]) -> dict[str, Any]:
        asked.append((message, schema))
        return {"ok": True}

    async with stdio(elicitation_handler=approve) as server:
        accepted = await server.call_tool("confirm", {})
    assert accepted.text == "accept: True"
    assert asked[0][0] == "Delete everything?" and "ok" in asked[0][1]["properties"]
    async with stdio() as server:  # not advertised: the server's request fails
        refused = await server.call_tool("confirm", {})
    assert refused.is_error and "Elicitation not supported" in refused.text


async def test_the_older_sse_transport(sse_url: str) -> None:
    server = MCPSSEClient("legacy", url=sse_url, headers={"Authorization": SECRET})
    assert SECRET not in repr(server)
    provider = ScriptedProvider([call("mcp__legacy__add", {"a": 20, "b": 22}), "42"])
    agent = Agent(provider, tools=[server])
    async with agent:
        result = await agent.run("add")
    (answer,) = results(result.messages)
    assert answer.text == "42" and result.text == "42"
