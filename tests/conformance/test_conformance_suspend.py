"""Suspended runs: Ask without an approval handler, then approve / deny and continue."""

from __future__ import annotations

from typing import Any

import pytest
from harness import Recorded, call, calls_message, check, results_of, run_recorded

from treadle import (
    AgentContext,
    AgentLoopConfig,
    Ask,
    Hooks,
    RunHandle,
    ToolCall,
    UserMessage,
    tool,
)
from treadle.context import validate_transcript
from treadle.loop import ToolExecution
from treadle.testing import ScriptedProvider
from treadle.types import AgentStart, ContinuationKind, ToolExecutionStart, TurnStart, TurnTrigger

pytestmark = pytest.mark.anyio


class AskForDanger(Hooks):
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Any:
        if call.name == "danger":
            self.asked.append(call.id)
            return Ask("Delete everything?")
        return None


class World:
    def __init__(self) -> None:
        self.ran: list[tuple[str, Any]] = []

        @tool
        async def danger(target: str) -> str:
            self.ran.append(("danger", target))
            return f"deleted {target}"

        @tool
        async def safe(n: int) -> str:
            self.ran.append(("safe", n))
            return f"safe {n}"

        self.tools = [danger, safe]


async def suspend(
    strategy: str,
) -> tuple[World, AgentContext, AgentLoopConfig, ScriptedProvider, AskForDanger, Recorded]:
    world = World()
    hooks = AskForDanger()
    first = calls_message(call("c1", "danger", target="/tmp/x"), call("c2", "safe", n=1))
    provider = ScriptedProvider([first, "all done", "after prompt"])
    context = AgentContext(tools=world.tools)
    config = AgentLoopConfig(
        provider=provider,
        hooks=[hooks],
        tool_execution=ToolExecution(strategy),  # type: ignore[arg-type]
    )
    rec = await run_recorded(["clean up"], context, config)
    check(rec, requests=provider.requests)
    return world, context, config, provider, hooks, rec


@pytest.mark.parametrize("strategy", ["parallel", "sequential"])
async def test_ask_without_handler_suspends(strategy: str) -> None:
    world, context, _, provider, hooks, rec = await suspend(strategy)
    assert rec.end.reason == "suspended"
    assert rec.end.pending_tool_calls == ["c1"]
    assert world.ran == [("safe", 1)]
    assert [e.tool_call_id for e in rec.of_type(ToolExecutionStart)] == ["c2"]
    assert len(provider.requests) == 1
    assert "c1" not in results_of(context.messages)
    assert validate_transcript(context.messages, allow_pending=["c1"]) == []
    assert validate_transcript(context.messages) != [], "c1 really is unanswered"
    assert context.pending_tool_calls == ["c1"]
    assert hooks.asked == ["c1"]


@pytest.mark.parametrize("strategy", ["parallel", "sequential"])
async def test_approve_then_continue(strategy: str) -> None:
    world, context, config, provider, hooks, _ = await suspend(strategy)
    ids = (context.loop_id, context.agent_id, context.session_id)
    context.approve("c1")
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert world.ran == [("safe", 1), ("danger", "/tmp/x")]
    assert hooks.asked == ["c1"], "an approved call is not asked again"
    assert results_of(context.messages)["c1"].text == "deleted /tmp/x"
    assert not results_of(context.messages)["c1"].is_error
    assert rec.end.reason == "completed"
    assert context.messages[-1].text == "all done"  # type: ignore[union-attr]
    assert validate_transcript(context.messages) == []
    (start,) = rec.of_type(AgentStart)
    assert start.continuation_kind == ContinuationKind.DEFAULT
    assert (start.agent_id, start.session_id) == ids[1:]
    assert rec.of_type(TurnStart)[0].trigger == TurnTrigger.CONTINUATION
    # The model saw both results.
    assert set(results_of(provider.requests[-1].messages)) == {"c1", "c2"}


async def test_approve_with_new_arguments() -> None:
    # New arguments are a new call: the hooks judge it again (this one asks again), and an
    # approval of exactly what they judged then runs it.
    world, context, config, provider, hooks, _ = await suspend("parallel")
    context.approve("c1", {"target": "/tmp/only-this"})
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "suspended" and rec.end.pending_tool_calls == ["c1"]
    assert hooks.asked == ["c1", "c1"]
    assert world.ran == [("safe", 1)]
    assert context.suspended["c1"].arguments == {"target": "/tmp/only-this"}
    context.approve("c1")
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert world.ran[-1] == ("danger", "/tmp/only-this")
    assert rec.of_type(ToolExecutionStart)[0].args == {"target": "/tmp/only-this"}
    assert hooks.asked == ["c1", "c1"], "the approved call is not asked a third time"


async def test_deny_then_continue() -> None:
    world, context, config, provider, _, _ = await suspend("parallel")
    context.deny("c1", "The user said no.")
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert world.ran == [("safe", 1)], "a denied call never runs"
    result = results_of(context.messages)["c1"]
    assert result.is_error and result.text == "The user said no."
    assert [e.tool_call_id for e in rec.of_type(ToolExecutionStart)] == ["c1"]
    assert rec.end.reason == "completed"
    assert validate_transcript(context.messages) == []


async def test_new_prompt_while_suspended_answers_pending_calls() -> None:
    world, context, config, provider, _, _ = await suspend("parallel")
    rec = await run_recorded(["never mind, do something else"], context, config)
    check(rec, requests=provider.requests)
    assert world.ran == [("safe", 1)]
    assert results_of(context.messages)["c1"].is_error
    assert validate_transcript(context.messages) == []
    assert rec.end.reason == "completed"


async def test_continue_without_decision_stays_valid() -> None:
    _, context, config, provider, _, _ = await suspend("parallel")
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    pending = rec.end.pending_tool_calls if rec.end.reason == "suspended" else []
    assert validate_transcript(context.messages, allow_pending=pending) == []


class FailingTurns(AskForDanger):
    """Asks for ``danger``; ``before_turn`` raises while ``failing`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
        if self.failing:
            raise RuntimeError("before_turn failed")
        return True


async def test_a_continued_run_ending_before_its_first_turn_keeps_the_calls_pending() -> None:
    # Contract §2.2: the decided calls stay pending (reported so), and continuing again runs them.
    world, context, config, provider, _, _ = await suspend("parallel")
    hooks = FailingTurns()
    config = config.model_copy(update={"hooks": [hooks]})
    context.approve("c1")
    hooks.failing = True
    rec = await run_recorded(None, context, config)
    assert rec.end.reason == "error"
    assert rec.end.pending_tool_calls == ["c1"]
    assert context.pending_tool_calls == ["c1"]
    assert world.ran == [("safe", 1)], "the approved call did not run"
    assert validate_transcript(context.messages, allow_pending=["c1"]) == []

    hooks.failing = False
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "completed" and rec.end.pending_tool_calls == []
    assert world.ran == [("safe", 1), ("danger", "/tmp/x")]
    assert results_of(context.messages)["c1"].text == "deleted /tmp/x"
    assert validate_transcript(context.messages) == []


async def test_steering_is_taken_once_the_resumed_calls_are_answered() -> None:
    # A steering message taken before the calls ran would have no place in the history if
    # the run then ended before its first turn: it is taken after their results instead.
    _, context, config, provider, _, _ = await suspend("parallel")
    hooks = FailingTurns()
    waiting = [UserMessage.of("also tidy up")]
    polls: list[int] = []

    def steering() -> list[UserMessage]:
        polls.append(len(waiting))
        taken, waiting[:] = list(waiting), []
        return taken

    config = config.model_copy(update={"hooks": [hooks], "get_steering_messages": steering})
    context.approve("c1")
    hooks.failing = True
    rec = await run_recorded(None, context, config)
    assert rec.end.reason == "error" and rec.end.pending_tool_calls == ["c1"]
    assert polls == [], "nothing is taken while the calls wait"

    hooks.failing = False
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    roles = [m.role for m in rec.end.messages]
    assert roles == ["tool_result", "user", "assistant"]  # c1's result, the steering, the answer
    assert rec.end.messages[1].text == "also tidy up"  # type: ignore[union-attr]
    assert validate_transcript(context.messages) == []


class FailAsItSuspends(Hooks):
    """A hook that fails while danger waits for approval: ``on_message`` on the safe tool's
    result, or ``after_turn`` on the turn that ran it."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.failing = True

    async def on_message(self, run: RunHandle, message: Any) -> None:
        failing = self.failing and self.where == "on_message"
        if failing and getattr(message, "tool_name", None) == "safe":
            raise RuntimeError("store unavailable")

    async def after_turn(self, run: RunHandle, event: Any) -> None:
        if self.failing and self.where == "after_turn":
            raise RuntimeError("metrics unavailable")


@pytest.mark.parametrize("where", ["on_message", "after_turn"])
@pytest.mark.parametrize("strategy", ["parallel", "sequential"])
async def test_a_hook_failing_as_the_run_suspends_keeps_the_asked_call_pending(
    strategy: str, where: str
) -> None:
    # Contract §2.2: the asked call stays pending whatever ends the run now, and continuing
    # with a decision runs it.
    world = World()
    failing = FailAsItSuspends(where)
    first = calls_message(call("c1", "danger", target="/tmp/x"), call("c2", "safe", n=1))
    provider = ScriptedProvider([first, "all done"])
    context = AgentContext(tools=world.tools)
    config = AgentLoopConfig(
        provider=provider,
        hooks=[AskForDanger(), failing],
        tool_execution=ToolExecution(strategy),  # type: ignore[arg-type]
    )
    rec = await run_recorded(["clean up"], context, config)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "error" and rec.end.error is not None
    assert rec.end.error.kind == "hook"
    assert rec.end.pending_tool_calls == ["c1"]
    assert context.pending_tool_calls == ["c1"]
    assert world.ran == [("safe", 1)]
    assert validate_transcript(context.messages, allow_pending=["c1"]) == []

    failing.failing = False
    context.approve("c1")
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "completed" and rec.end.pending_tool_calls == []
    assert world.ran == [("safe", 1), ("danger", "/tmp/x")]
    assert validate_transcript(context.messages) == []
