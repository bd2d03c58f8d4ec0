"""treadle.ext.workers: post-run workers (before agent_end, events on the run's stream) and
session-end callbacks (after agent_end, on every way out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from treadle import (
    Agent,
    AssistantMessage,
    ExecutionLimits,
    ModelRequest,
    ProviderError,
    TextContent,
    ToolCall,
    Usage,
    tool,
)
from treadle.ext.memory import MemoryRecall, MemoryStore
from treadle.ext.workers import (
    SUMMARY_EVENT,
    WORKER_FAILED_EVENT,
    CompressionWorker,
    PostRunWorkers,
    SessionEnd,
    SessionEndInfo,
    WorkerContext,
)
from treadle.loop import InputFilter, Pass, Reject
from treadle.testing import ScriptedProvider
from treadle.tools import ExternalTool
from treadle.types import AgentEnd, CustomEvent

pytestmark = pytest.mark.anyio


def summarise(request: ModelRequest) -> AssistantMessage:
    assert request.tools == []
    text = request.messages[0].text  # type: ignore[union-attr]
    assert "User: " in text
    return AssistantMessage(
        content=[TextContent(text="The user, Ada, asked about tea; green tea was suggested.")],
        usage=Usage(input=40, output=12, total_tokens=52),
    )


async def test_compression_worker_summarises_into_memory_before_agent_end(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory.db")
    summariser = ScriptedProvider([summarise])
    compression = CompressionWorker(store)
    workers = PostRunWorkers([compression], provider=summariser)
    agent = Agent(ScriptedProvider(["Try green tea."]), hooks=[workers])
    async with agent.stream("I am Ada. Which tea should I drink?") as events:
        seen = [e async for e in events]
    assert events.result is not None and events.result.reason == "completed"
    assert [e.type for e in seen[-3:]] == ["turn_end", "custom", "agent_end"]
    custom = seen[-2]
    assert isinstance(custom, CustomEvent) and custom.name == SUMMARY_EVENT
    assert custom.value["summary"].startswith("The user, Ada")
    assert custom.value["usage"]["total_tokens"] == 52
    turn_end = seen[-3]
    assert isinstance(seen[-1], AgentEnd) and seen[-1].usage == turn_end.usage  # not the worker's
    assert workers.spent.total_tokens == 52
    (fact,) = store.facts()
    assert fact.id == custom.value["stored"] and "green tea was suggested" in fact.text
    # a later conversation recalls it
    later = ScriptedProvider(["Green tea, as before."])
    await Agent(later, hooks=[MemoryRecall(store)]).run("Which tea did we pick?")
    assert "green tea was suggested" in later.requests[0].messages[0].text  # type: ignore[union-attr]


async def test_worker_context_and_events_and_failures() -> None:
    seen: list[WorkerContext] = []

    class Counter:
        name = "counter"

        async def run(self, ctx: WorkerContext) -> Any:
            seen.append(ctx)
            await ctx.emit("extra", 1)
            return {"messages": len(ctx.new_messages), "tokens": ctx.new_tokens}

    class Broken:
        name = "broken"

        async def run(self, ctx: WorkerContext) -> Any:
            raise RuntimeError("worker bug")

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = ScriptedProvider(
        [AssistantMessage(content=[ToolCall(id="1", name="ping", arguments={})]), "Done."]
    )
    agent = Agent(model, tools=[ping], hooks=[PostRunWorkers([Broken(), Counter()])])
    async with agent.stream("go") as events:
        custom = [e async for e in events if isinstance(e, CustomEvent)]
    assert events.result is not None and events.result.reason == "completed"
    assert [(e.name, e.value) for e in custom] == [
        (WORKER_FAILED_EVENT, {"worker": "broken", "error": "RuntimeError: worker bug"}),
        ("extra", 1),
        ("treadle.ext.worker.counter", {"messages": 4, "tokens": seen[0].new_tokens}),
    ]
    ctx = seen[0]
    assert ctx.reason == "completed" and ctx.provider is model and ctx.new_tokens > 0
    assert ctx.tokens >= ctx.new_tokens and ctx.context is agent.context


async def test_workers_run_only_for_their_reasons() -> None:
    ran: list[str] = []

    class Note:
        name = "note"

        async def run(self, ctx: WorkerContext) -> None:
            ran.append(ctx.reason)

    fails = ScriptedProvider([ProviderError("auth", "bad key")])
    await Agent(fails, hooks=[PostRunWorkers([Note()])]).run("go")
    assert ran == []
    fails = ScriptedProvider([ProviderError("auth", "bad key")])
    await Agent(fails, hooks=[PostRunWorkers([Note()], reasons=["error"])]).run("go")
    assert ran == ["error"]


async def test_compression_skips_small_runs() -> None:
    kept: list[str] = []
    worker = CompressionWorker(kept.append, min_tokens=10_000)
    summariser = ScriptedProvider([])
    await Agent(
        ScriptedProvider(["Hi."]), hooks=[PostRunWorkers([worker], provider=summariser)]
    ).run("hello")
    assert kept == [] and summariser.requests == []


class No(InputFilter):
    def filter(self, text: str) -> Any:
        return Reject("no") if "secret" in text else Pass()


@tool
async def slow() -> str:
    """Sleep."""
    await anyio.sleep(30)
    return "woke"


async def test_session_end_runs_on_every_way_out() -> None:
    ends: list[SessionEndInfo] = []

    async def on_end(info: SessionEndInfo) -> None:
        ends.append(info)

    def broken(info: SessionEndInfo) -> None:
        raise RuntimeError("callback bug")

    call = AssistantMessage(content=[ToolCall(id="1", name="slow", arguments={})])
    agent = Agent(
        ScriptedProvider(
            ["Hi.", ProviderError("auth", "bad key"), call, call, call, call, "never"]
        ),
        tools=[slow],
        hooks=[SessionEnd(broken, on_end)],
        input_filters=[No()],
    )
    assert (await agent.run("hello")).reason == "completed"
    assert (await agent.run("again")).reason == "error"
    assert (await agent.run("a secret")).reason == "rejected"
    with anyio.fail_after(10):
        async with agent.stream("slow please") as events:
            async for e in events:
                if e.type == "tool_execution_start":
                    agent.abort()
    assert events.result is not None and events.result.reason == "cancelled"
    with anyio.fail_after(10):
        with anyio.move_on_after(0.2):  # a cancellation from outside
            await agent.run("slow again")
    limited = Agent(
        ScriptedProvider([call]),
        tools=[slow],
        hooks=[SessionEnd(on_end)],
        limits=ExecutionLimits(max_turns=0),
    )
    assert (await limited.run("go")).reason == "limit"
    ask = ExternalTool("ask_user", "Ask the user.", {"type": "object", "properties": {}})
    asking = AssistantMessage(content=[ToolCall(id="2", name="ask_user", arguments={})])
    suspended = Agent(ScriptedProvider([asking]), tools=[ask], hooks=[SessionEnd(on_end)])
    assert (await suspended.run("go")).reason == "suspended"
    assert [e.reason for e in ends] == [
        "completed",
        "error",
        "rejected",
        "cancelled",
        "cancelled",
        "limit",
        "suspended",
    ]
    assert ends[0].context is agent.context and len(ends[0].new_messages) == 2
