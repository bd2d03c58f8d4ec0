"""docs/contract.md §5: tool lookup, arguments, errors, timeouts, progress and ending a run."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from harness import Recorded, call, calls_message, check, result_text, results_of, run_recorded

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    ToolCall,
    ToolContext,
    ToolResult,
    ToolResultMessage,
    tool,
)
from treadle.loop import ToolExecution
from treadle.testing import ScriptedProvider
from treadle.tools import TaskComplete
from treadle.types import (
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)

pytestmark = pytest.mark.anyio


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
async def echo(text: str) -> str:
    return text


async def one_turn(
    message: AssistantMessage, tools: list[Any], **config: Any
) -> tuple[Recorded, ScriptedProvider]:
    provider = ScriptedProvider([message, "done"])
    context = AgentContext(tools=tools)
    rec = await run_recorded(["go"], context, AgentLoopConfig(provider=provider, **config))
    check(rec, requests=provider.requests)
    return rec, provider


def end_event(rec: Recorded, cid: str) -> ToolExecutionEnd:
    (end,) = [e for e in rec.of_type(ToolExecutionEnd) if e.tool_call_id == cid]
    return end


async def test_unknown_tool() -> None:
    rec, provider = await one_turn(calls_message(call("c1", "x", q=1)), [add, echo])
    result = results_of(rec.after)["c1"]
    assert result.is_error
    assert result.text == "Unknown tool 'x'. Available: add, echo"
    assert result.tool_name == "x"
    assert end_event(rec, "c1").is_error
    # The model sees the error on the next turn.
    assert results_of(provider.requests[1].messages)["c1"].text == result.text
    assert rec.end.reason == "completed"


async def test_unknown_tool_with_no_tools_still_answered() -> None:
    rec, _ = await one_turn(calls_message(call("c1", "x")), [])
    result = results_of(rec.after)["c1"]
    assert result.is_error and result.text.startswith("Unknown tool 'x'. Available:")


async def test_invalid_json_arguments() -> None:
    ran: list[Any] = []

    @tool
    async def record(a: int = 0) -> str:
        ran.append(a)
        return "ran"

    bad = ToolCall(id="c1", name="record", arguments={}, raw_arguments='{"a": 1')
    rec, _ = await one_turn(calls_message(bad), [record])
    assert ran == [], "the tool must not run on invalid JSON"
    stored = rec.after[1]
    assert isinstance(stored, AssistantMessage)
    assert stored.tool_calls[0].raw_arguments == '{"a": 1'
    assert stored.tool_calls[0].arguments == {}
    result = results_of(rec.after)["c1"]
    assert result.is_error
    assert "JSON" in result.text
    # It names the parse error (where parsing failed), not just "invalid".
    assert "line 1 column" in result.text and "EOF" in result.text
    assert rec.of_type(ToolExecutionStart)[0].tool_call_id == "c1"


async def test_raw_arguments_tool_runs_on_invalid_json() -> None:
    seen: list[str | None] = []

    @tool(accepts_raw_arguments=True)
    async def lenient(ctx: ToolContext[Any]) -> str:
        seen.append(ctx.tool_call.raw_arguments)
        return "ok"

    bad = ToolCall(id="c1", name="lenient", arguments={}, raw_arguments="not json")
    rec, _ = await one_turn(calls_message(bad), [lenient])
    assert seen == ["not json"]
    assert not results_of(rec.after)["c1"].is_error


async def test_schema_violation_lists_every_error() -> None:
    rec, _ = await one_turn(calls_message(call("c1", "add", a="one", c=3)), [add])
    result = results_of(rec.after)["c1"]
    assert result.is_error
    for field in ("a", "b", "c"):  # bad type, missing, unexpected
        assert f"{field}:" in result.text, f"validation error for {field!r} not listed"
    assert "add" in result.text


async def test_tool_exception_becomes_error_result() -> None:
    @tool
    async def boom() -> str:
        raise KeyError("missing thing")

    @tool
    def sync_boom() -> str:
        raise ValueError("bad value")

    msg = calls_message(call("c1", "boom"), call("c2", "sync_boom"), call("c3", "add", a=1, b=2))
    rec, _ = await one_turn(msg, [boom, sync_boom, add])
    results = results_of(rec.after)
    assert results["c1"].is_error and results["c1"].text == "KeyError: 'missing thing'"
    assert results["c2"].is_error and results["c2"].text == "ValueError: bad value"
    assert not results["c3"].is_error and results["c3"].text == "3"
    assert rec.end.reason == "completed"


@pytest.mark.parametrize("where", ["tool", "config"])
async def test_tool_timeout(where: str) -> None:
    finished: list[bool] = []

    async def sleepy() -> str:
        await anyio.sleep(30)
        finished.append(True)
        return "woke"

    if where == "tool":
        slow_tool = tool(timeout=0.05)(sleepy)
        config: dict[str, Any] = {"tool_timeout": 60}
    else:
        slow_tool = tool(sleepy)
        config = {"tool_timeout": 0.05}
    msg = calls_message(call("c1", "sleepy"), call("c2", "add", a=2, b=2))
    with anyio.fail_after(10):  # guard only: a broken timeout would otherwise hang 30 s
        rec, _ = await one_turn(msg, [slow_tool, add], **config)
    assert finished == []
    results = results_of(rec.after)
    assert results["c1"].is_error
    text = results["c1"].text
    assert "timed out" in text and "0.05" in text and "sleepy" in text
    assert results["c2"].text == "4"
    assert end_event(rec, "c1").is_error


async def test_progress_updates_between_start_and_end() -> None:
    @tool
    async def progress(ctx: ToolContext[Any]) -> str:
        await ctx.update("step 1")
        await ctx.update(ToolResult.of("step 2", details={"pct": 50}))
        return "finished"

    rec, _ = await one_turn(calls_message(call("c1", "progress")), [progress])
    kinds = [
        e.type
        for e in rec.events
        if isinstance(e, (ToolExecutionStart, ToolExecutionUpdate, ToolExecutionEnd))
    ]
    assert kinds == [
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_update",
        "tool_execution_end",
    ]
    updates = rec.of_type(ToolExecutionUpdate)
    assert [u.partial.text for u in updates] == ["step 1", "step 2"]
    assert updates[1].partial.details == {"pct": 50}
    assert all(u.tool_call_id == "c1" and u.tool_name == "progress" for u in updates)
    assert result_text(rec.after, "c1") == "finished"


async def test_tool_start_and_end_fields() -> None:
    rec, _ = await one_turn(calls_message(call("c1", "add", a=2, b=3)), [add])
    (start,) = rec.of_type(ToolExecutionStart)
    assert (start.tool_call_id, start.tool_name, start.args) == ("c1", "add", {"a": 2, "b": 3})
    end = end_event(rec, "c1")
    assert end.tool_name == "add" and end.result.text == "5" and not end.is_error
    assert end.duration_ms >= 0


@pytest.mark.parametrize("how", ["task_complete", "terminate"])
@pytest.mark.parametrize("strategy", ["parallel", "sequential"])
async def test_tool_ends_the_run_after_the_batch(how: str, strategy: str) -> None:
    other_ran: list[str] = []

    @tool
    async def finish() -> Any:
        if how == "task_complete":
            raise TaskComplete("All finished.")
        return ToolResult(content=ToolResult.of("All finished.").content, terminate=True)

    @tool
    async def other() -> str:
        other_ran.append("other")
        return "other done"

    provider = ScriptedProvider(
        [calls_message(call("c1", "finish"), call("c2", "other")), "never used"]
    )
    context = AgentContext(tools=[finish, other])
    config = AgentLoopConfig(provider=provider, tool_execution=ToolExecution(strategy))  # type: ignore[arg-type]
    rec = await run_recorded(["go"], context, config)
    check(rec, requests=provider.requests)
    assert len(provider.requests) == 1, "no model call after the terminating batch"
    assert rec.end.reason == "completed"
    assert other_ran == ["other"], "the rest of the batch still runs"
    results = results_of(rec.after)
    assert results["c1"].text == "All finished." and not results["c1"].is_error
    assert results["c2"].text == "other done"
    assert len(rec.of_type(TurnStart)) == 1 and len(rec.of_type(TurnEnd)) == 1
    assert isinstance(rec.after[-1], ToolResultMessage)


@pytest.mark.parametrize("strategy", ["parallel", "sequential"])
async def test_raise_tool_errors_reraises_after_a_clean_end(strategy: str) -> None:
    import math

    from treadle import AgentEvent, agent_loop
    from treadle.context import validate_transcript
    from treadle.types import AgentEnd

    @tool
    async def boom() -> str:
        raise ValueError("tool bug")

    provider = ScriptedProvider([calls_message(call("c1", "boom"), call("c2", "add", a=1, b=1))])
    context = AgentContext(tools=[boom, add])
    config = AgentLoopConfig(
        provider=provider,
        raise_tool_errors=True,
        tool_execution=ToolExecution(strategy),  # type: ignore[arg-type]
    )
    send, receive = anyio.create_memory_object_stream[AgentEvent](math.inf)
    async with send:
        with pytest.raises(ValueError, match="tool bug"):
            await agent_loop(["go"], context, config, send)
    async with receive:
        events = [e async for e in receive]
    ends = [e for e in events if isinstance(e, AgentEnd)]
    assert len(ends) == 1 and ends[0] is events[-1] and ends[0].reason == "error"
    assert validate_transcript(context.messages) == []
    assert results_of(context.messages)["c1"].text == "ValueError: tool bug"
