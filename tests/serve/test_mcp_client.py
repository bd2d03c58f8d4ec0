"""The official ``mcp`` client drives ``treadle serve --mcp`` (streamable HTTP, a separate
process on 127.0.0.1) and ``treadle serve --mcp-stdio`` (a process it starts): each agent a
tool, progress notifications, approvals by elicitation, cancellation (the run stops with
every call answered), a dropped connection."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.preloaded import Preloader

from .conftest import ROOT, TARGETS, TOKEN, Served, environment

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from mcp import ClientSession, types  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

Elicit = Any


@asynccontextmanager
async def http_session(served: Served, elicit: Elicit = None) -> AsyncIterator[ClientSession]:
    import httpx2

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(served.url + "/mcp", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1], elicitation_callback=elicit) as s:
                await s.initialize()
                yield s


@asynccontextmanager
async def stdio_session(
    log: Path, preloader: Preloader, elicit: Elicit = None
) -> AsyncIterator[ClientSession]:
    """A session with ``python -m treadle serve --mcp-stdio`` (from ``preloader``)."""
    env = environment(log)
    command, *args = preloader.command("-m", "treadle", "serve", *TARGETS, "--mcp-stdio")
    params = StdioServerParameters(
        command=command,
        args=args,
        env={k: env[k] for k in ("SERVE_TEST_LOG", "PYTHONPATH")},
        cwd=ROOT,
    )
    async with stdio_client(params) as streams:
        async with ClientSession(streams[0], streams[1], elicitation_callback=elicit) as s:
            await s.initialize()
            yield s


def text_of(result: types.CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    assert "Delete this file?" in params.message and "delete_file" in params.message
    return types.ElicitResult(action="accept", content={"approved": True})


async def refuse(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approved": False, "reason": "no way"})


async def wait_for(served: Served, found: Any, what: str) -> None:
    await anyio.to_thread.run_sync(served.wait_for, found, what)


# ---- streamable HTTP ----


async def test_each_agent_is_a_tool(served: Served) -> None:
    async with http_session(served) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == {"assistant", "helper"}
    assert tools["assistant"].description == "A helpful assistant with a weather tool."
    assert tools["assistant"].input_schema["required"] == ["prompt"]


async def test_a_call_runs_the_agent_with_progress(served: Served) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async with http_session(served) as session:
        result = await session.call_tool(
            "assistant", {"prompt": "weather in Oslo"}, progress_callback=on_progress
        )
        helper = await session.call_tool("helper", {"prompt": "hi"})
    assert not result.is_error
    assert text_of(result) == "Done: Sunny and 21 °C in Oslo."
    assert text_of(helper) == "Helper here."
    assert [m for _, m in progress] == ["turn 1", "calling weather", "weather done", "turn 2"]
    assert [v for v, _ in progress] == sorted(v for v, _ in progress)  # it only grows


async def test_a_failed_run_is_an_error_result(served: Served) -> None:
    async with http_session(served) as session:
        result = await session.call_tool("assistant", {"prompt": "fail"})
    assert result.is_error and "the scripted model refuses" in text_of(result)


async def test_an_approval_is_asked_by_elicitation(served: Served) -> None:
    mark = served.mark()
    async with http_session(served, approve) as session:
        result = await session.call_tool("assistant", {"prompt": "delete notes/b.txt"})
    assert text_of(result) == "Done: Deleted notes/b.txt."
    assert [e["deleted"] for e in served.entries()[mark:] if "deleted" in e] == ["notes/b.txt"]


async def test_a_refused_approval_does_not_run(served: Served) -> None:
    mark = served.mark()
    async with http_session(served, refuse) as session:
        result = await session.call_tool("assistant", {"prompt": "delete notes/c.txt"})
    assert text_of(result) == "Done: no way"
    assert not [e for e in served.entries()[mark:] if "deleted" in e]


async def test_without_elicitation_an_approval_is_denied(served: Served) -> None:
    mark = served.mark()
    async with http_session(served) as session:
        result = await session.call_tool("assistant", {"prompt": "delete notes/d.txt"})
    assert "does not support elicitation" in text_of(result)
    assert not [e for e in served.entries()[mark:] if "deleted" in e]


def _cancelled_cleanly(served: Served, mark: int) -> None:
    served.wait_for(lambda es: any("end" in e for e in es[mark:]), "the run's end")
    (end,) = [e for e in served.entries()[mark:] if "end" in e]
    assert end["end"] == "cancelled"
    assert end["unanswered"] == []  # every call of the history has its result
    assert {"slow": "cancelled"} in served.entries()[mark:]


async def test_cancelling_a_call_stops_the_run(served: Served) -> None:
    mark = served.mark()
    async with http_session(served) as session:
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.call_tool, "assistant", {"prompt": "slow"})
            await wait_for(served, lambda es: {"slow": "started"} in es[mark:], "slow starting")
            tg.cancel_scope.cancel()  # the client sends notifications/cancelled
        await anyio.to_thread.run_sync(_cancelled_cleanly, served, mark)
        # the session goes on
        assert text_of(await session.call_tool("helper", {"prompt": "hi"})) == "Helper here."


async def test_a_dropped_connection_leaves_the_run_whole(served: Served) -> None:
    """MCP says a disconnection is not a cancellation: the run goes on to its end, every
    call answered, and the server keeps serving."""
    import httpx2

    mark = served.mark()
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
    }
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "assistant", "arguments": {"prompt": "slow 1"}},
    }
    async with httpx2.AsyncClient(timeout=60) as http:
        opened = await http.post(served.url + "/mcp", headers=headers, json=init)
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        headers["mcp-protocol-version"] = "2025-06-18"
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post(served.url + "/mcp", headers=headers, json=done)
        async with http.stream("POST", served.url + "/mcp", headers=headers, json=call):
            await wait_for(served, lambda es: {"slow": "started"} in es[mark:], "slow starting")
        # the response stream is closed here, mid-call
    await wait_for(served, lambda es: any("end" in e for e in es[mark:]), "the run's end")
    (end,) = [e for e in served.entries()[mark:] if "end" in e]
    assert end == {"end": "completed", "unanswered": [], "pending": []}
    async with http_session(served) as session:
        assert text_of(await session.call_tool("helper", {"prompt": "hi"})) == "Helper here."


# ---- stdio ----


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "runs.jsonl"


def _on(log: Path) -> Served:
    return Served("", log, None)  # type: ignore[arg-type]


@pytest.mark.one_backend  # the server is the process under test; one client backend will do
async def test_stdio_serves_the_agents_and_cancels_a_call(
    log: Path, server_preloader: Preloader
) -> None:
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    served = _on(log)
    async with stdio_session(log, server_preloader, approve) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        result = await session.call_tool(
            "assistant", {"prompt": "weather in Lima"}, progress_callback=on_progress
        )
        approved = await session.call_tool("assistant", {"prompt": "delete notes/e.txt"})
        mark = served.mark()
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.call_tool, "assistant", {"prompt": "slow"})
            await wait_for(served, lambda es: {"slow": "started"} in es[mark:], "slow starting")
            tg.cancel_scope.cancel()  # the client sends notifications/cancelled
        await anyio.to_thread.run_sync(_cancelled_cleanly, served, mark)
    assert names == {"assistant", "helper"}
    assert text_of(result) == "Done: Sunny and 21 °C in Lima."
    assert progress == ["turn 1", "calling weather", "weather done", "turn 2"]
    assert text_of(approved) == "Done: Deleted notes/e.txt."


def test_stdio_a_client_that_goes_away_stops_the_run(
    log: Path, server_preloader: Preloader
) -> None:
    """The client's end of the pipe closes mid-call: the run is aborted with every call
    answered, and the server exits."""
    served = _on(log)
    process = subprocess.Popen(
        server_preloader.command("-m", "treadle", "serve", *TARGETS, "--mcp-stdio"),
        env=environment(log),
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "assistant", "arguments": {"prompt": "slow"}},
        },
    ]
    try:
        for message in messages:
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 1  # initialized
        served.wait_for(lambda es: {"slow": "started"} in es, "slow starting")
        process.stdin.close()  # the client goes away
        _cancelled_cleanly(served, 0)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
