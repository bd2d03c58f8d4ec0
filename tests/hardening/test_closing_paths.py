"""Every way out of a run closes what is open, whatever a hook does while it closes: input
the loop took joins the history, every call is answered, the turn ends, every reported
message reaches the ``on_message`` hooks (the session store), and only a tool's own
``BaseException`` comes out (docs/contract.md §2.2, §3; simulation invariants
INV-INPUT-KEPT, INV-TURNS, INV-NO-RAISE, INV-RESUME, INV-TOOL-EVENTS, found by
``treadle.simulation``)."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    Hooks,
    RunHandle,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    agent_loop,
    tool,
)
from treadle.cancellation import CancellationToken
from treadle.context import validate_transcript
from treadle.loop import Ask, ToolExecution
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


def calls(*names: str) -> AssistantMessage:
    return AssistantMessage(
        content=[ToolCall(id=f"c{i}", name=n, arguments={}) for i, n in enumerate(names)]
    )


class Recorder(Hooks):
    """Keeps every event, and every message ``on_message`` saw (a session store's view)."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.stored: list[Any] = []

    def on_event(self, run: RunHandle, event: Any) -> None:
        self.events.append(event)

    def on_message(self, run: RunHandle, message: Any) -> None:
        self.stored.append(message)

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]


def steering_once(text: str, *, after: int = 0) -> Any:
    """A steering callback that hands over one message on its ``after``-th poll."""
    polls = [0]

    def poll() -> list[UserMessage]:
        polls[0] += 1
        return [UserMessage.of(text)] if polls[0] == after + 1 else []

    return poll


def texts(messages: list[Any]) -> list[str]:
    return [m.text for m in messages if isinstance(m, UserMessage)]


@tool
async def ok() -> str:
    """Answers ok."""
    return "ok"


# ---------------------------------------------------------------- input taken is kept


async def test_steering_taken_before_a_raising_before_turn_joins_the_history() -> None:
    class Failing(Hooks):
        def before_turn(self, run: RunHandle, turn_index: int) -> bool:
            raise RuntimeError("before_turn broke")

    rec = Recorder()
    context = AgentContext()
    config = AgentLoopConfig(
        provider=ScriptedProvider(["never"]),
        hooks=[Failing(), rec],
        get_steering_messages=steering_once("stop that"),
    )
    new = await agent_loop("go", context, config)
    (end,) = rec.of("agent_end")
    assert end.reason == "error"
    assert texts(context.messages) == ["stop that"]  # taken: kept; the prompt was not taken
    assert new == context.messages == end.messages
    assert rec.of("turn_start") == []


async def test_steering_taken_before_an_outer_cancel_joins_the_history() -> None:
    rec = Recorder()
    scope = anyio.CancelScope()

    class CancelAtTurnOne(Hooks):
        async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
            if turn_index == 1:  # the steering for turn 1 was taken just before
                scope.cancel()
                await anyio.lowlevel.checkpoint()
            return True

    context = AgentContext(tools=[ok])
    config = AgentLoopConfig(
        provider=ScriptedProvider([calls("ok"), "done"]),
        hooks=[CancelAtTurnOne(), rec],
        get_steering_messages=steering_once("also this", after=1),
    )
    with scope:
        await agent_loop("go", context, config)
    assert scope.cancelled_caught
    (end,) = rec.of("agent_end")
    assert end.reason == "cancelled"
    assert texts(context.messages) == ["go", "also this"]
    assert validate_transcript(context.messages) == []


async def test_steering_taken_in_next_tool_mode_survives_an_after_turn_cancel() -> None:
    token = CancellationToken()

    @tool
    async def first() -> str:
        """Cancels the run after this turn."""
        token.cancel("after_turn")
        return "first"

    rec = Recorder()
    context = AgentContext(tools=[first, ok])
    config = AgentLoopConfig(
        provider=ScriptedProvider([calls("first", "ok"), "done"]),
        hooks=[rec],
        tool_execution=ToolExecution(mode="sequential"),
        steering_mode="next_tool",
        get_steering_messages=steering_once("one more thing", after=1),
    )
    await agent_loop("go", context, config, cancel=token)
    (end,) = rec.of("agent_end")
    assert end.reason == "cancelled"
    assert texts(context.messages) == ["go", "one more thing"]
    assert context.messages[-1].text == "one more thing"  # type: ignore[union-attr]
    assert validate_transcript(context.messages) == []


# ---------------------------------------------------------------- a second hook failure


class FailingAfterTool(Hooks):
    def after_tool_call(self, run: RunHandle, call: ToolCall, result: Any) -> Any:
        raise RuntimeError("after_tool_call broke")


class FailingOnResults(Hooks):
    def on_message(self, run: RunHandle, message: Any) -> None:
        if isinstance(message, ToolResultMessage):
            raise RuntimeError("on_message broke")


async def test_a_second_hook_failure_while_closing_still_ends_the_turn() -> None:
    rec = Recorder()
    context = AgentContext(tools=[ok])
    config = AgentLoopConfig(
        provider=ScriptedProvider([calls("ok", "ok")]),
        hooks=[FailingAfterTool(), FailingOnResults(), rec],
    )
    await agent_loop("go", context, config)
    (end,) = rec.of("agent_end")
    assert end.reason == "error" and "after_tool_call" in end.error.message
    assert [e.turn_index for e in rec.of("turn_start")] == [0]
    assert [e.turn_index for e in rec.of("turn_end")] == [0]
    assert validate_transcript(context.messages) == []


async def test_every_reported_message_reaches_every_on_message_hook() -> None:
    """A failing ``on_message`` hook ends the run, but every result still joins the history
    through all the hooks: a session store after it holds what was reported."""
    rec = Recorder()
    context = AgentContext(tools=[ok])
    config = AgentLoopConfig(
        provider=ScriptedProvider([calls("ok", "ok", "ok")]),
        hooks=[FailingOnResults(), rec],
    )
    await agent_loop("go", context, config)
    (end,) = rec.of("agent_end")
    assert end.reason == "error" and "on_message" in end.error.message
    reported = [e.message for e in rec.of("message_end")]
    assert [id(m) for m in rec.stored] == [id(m) for m in reported]
    assert sum(isinstance(m, ToolResultMessage) for m in rec.stored) == 3


# ---------------------------------------------------------------- a tool's BaseException


@tool
async def explode() -> str:
    """Raises a BaseException."""
    raise KeyboardInterrupt("stop everything")


async def test_a_hook_failing_beside_a_base_exception_lets_only_the_tools_exception_out() -> None:
    rec = Recorder()
    context = AgentContext(tools=[explode, ok])
    config = AgentLoopConfig(
        provider=ScriptedProvider([calls("explode", "ok")]),
        hooks=[FailingAfterTool(), rec],
    )
    with pytest.raises(KeyboardInterrupt):
        await agent_loop("go", context, config)
    (end,) = rec.of("agent_end")
    assert end.reason == "error"
    assert validate_transcript(context.messages) == []
    assert rec.events[-1].type == "agent_end"


async def test_an_asked_call_beside_a_base_exception_is_answered_cancelled() -> None:
    class AskForOk(Hooks):
        def before_tool_call(self, run: RunHandle, call: ToolCall) -> Any:
            return Ask() if call.name == "ok" else None

    rec = Recorder()
    context = AgentContext(tools=[explode, ok])
    config = AgentLoopConfig(
        provider=ScriptedProvider([calls("explode", "ok")]), hooks=[AskForOk(), rec]
    )
    with pytest.raises(KeyboardInterrupt):
        await agent_loop("go", context, config)
    (end,) = rec.of("agent_end")
    assert end.reason == "error" and end.pending_tool_calls == []
    assert [e.tool_call_id for e in rec.of("tool_execution_start")] == ["c0", "c1"]
    assert sorted(e.tool_call_id for e in rec.of("tool_execution_end")) == ["c0", "c1"]
    (asked,) = [m for m in context.messages if getattr(m, "tool_call_id", None) == "c1"]
    assert asked.cancelled and asked.is_error
    assert validate_transcript(context.messages) == []


async def test_an_unknown_tool_gets_no_after_tool_call_without_its_before_tool_call() -> None:
    seen: list[tuple[str, str]] = []

    class Pairs(Hooks):
        def before_tool_call(self, run: RunHandle, call: ToolCall) -> None:
            seen.append(("before", call.id))

        def after_tool_call(self, run: RunHandle, call: ToolCall, result: Any) -> None:
            seen.append(("after", call.id))

    context = AgentContext(tools=[ok])
    config = AgentLoopConfig(
        provider=ScriptedProvider([calls("missing", "ok"), "done"]), hooks=[Pairs()]
    )
    await agent_loop("go", context, config)
    assert seen == [("before", "c1"), ("after", "c1")]  # c0 names no tool: no hook pair
    (unknown,) = [m for m in context.messages if getattr(m, "tool_call_id", None) == "c0"]
    assert "Unknown tool 'missing'" in unknown.text  # type: ignore[union-attr]


async def test_a_call_waiting_for_approval_is_answered_when_the_run_is_cancelled() -> None:
    token = CancellationToken()

    @tool
    async def cancel_now() -> str:
        """Cancels the run at once."""
        token.cancel()
        return "cancelled it"

    class AskForOk(Hooks):
        def before_tool_call(self, run: RunHandle, call: ToolCall) -> Any:
            return Ask() if call.name == "ok" else None

    rec = Recorder()
    context = AgentContext(tools=[cancel_now, ok])
    config = AgentLoopConfig(
        provider=ScriptedProvider([calls("cancel_now", "ok"), "never"]), hooks=[AskForOk(), rec]
    )
    await agent_loop("go", context, config, cancel=token)
    (end,) = rec.of("agent_end")
    assert end.reason == "cancelled" and end.pending_tool_calls == []
    (asked,) = [m for m in context.messages if getattr(m, "tool_call_id", None) == "c1"]
    assert asked.cancelled
    assert sorted(e.tool_call_id for e in rec.of("tool_execution_end")) == ["c0", "c1"]
    assert validate_transcript(context.messages) == []
