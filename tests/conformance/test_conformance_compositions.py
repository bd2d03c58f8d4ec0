"""Where two features meet (issue 21): hooks, steering, limits, filters and tool results
combined. Each test names the rule of docs/contract.md it holds."""

from __future__ import annotations

from typing import Any

import pytest
from harness import call, calls_message, check, results_of, run_recorded

from treadle import (
    AgentContext,
    AgentLoopConfig,
    ExecutionLimits,
    Hooks,
    InputFilter,
    ToolExecution,
    ToolResult,
    TurnStart,
    UserMessage,
    Warn,
    tool,
)
from treadle.loop import FilterResult
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


# ---- after_tool_call raising: a tool that ran keeps its result (§3) ----


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_after_tool_call_raising_keeps_the_results_of_tools_that_ran(mode: str) -> None:
    ran: list[str] = []

    @tool
    async def pay(amount: int) -> str:
        """A side effect that must never run twice."""
        ran.append(f"paid {amount}")
        return f"paid {amount}"

    class Broken(Hooks):
        async def after_tool_call(self, call: Any, result: ToolResult) -> ToolResult | None:
            if call.id == "c2":
                raise RuntimeError("audit log is down")
            return None

    provider = ScriptedProvider(
        [calls_message(call("c1", "pay", amount=1), call("c2", "pay", amount=2)), "unused"]
    )
    config = AgentLoopConfig(
        provider=provider,
        hooks=[Broken()],
        tool_execution=ToolExecution(mode=mode),  # type: ignore[arg-type]
    )
    context = AgentContext(tools=[pay])
    rec = await run_recorded(["go"], context, config)
    check(rec)
    assert rec.end.reason == "error" and "after_tool_call" in (rec.end.error.message or "")  # type: ignore[union-attr]
    assert sorted(ran) == ["paid 1", "paid 2"]
    results = results_of(context.messages)
    # both ran: each keeps its real result, never "Cancelled" (a resumed session would
    # otherwise see an unanswered side effect and could run it again)
    assert results["c1"].text == "paid 1" and not results["c1"].is_error
    assert results["c2"].text == "paid 2" and not results["c2"].is_error
    # resuming the session answers from the history: nothing runs again
    again = await run_recorded(None, context, AgentLoopConfig(provider=provider, hooks=[]))
    assert again.end.reason == "completed" and sorted(ran) == ["paid 1", "paid 2"]


# ---- steering + a before_turn veto: the steering message is kept (§4.1) ----


@pytest.mark.parametrize("source", ["steering", "follow_up"])
async def test_input_taken_before_a_vetoed_turn_joins_the_history(source: str) -> None:
    @tool
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    waiting = [UserMessage.of("steer: stop adding")]
    turn_one = [calls_message(call("c1", "add", a=1, b=2))] if source == "steering" else []

    def take() -> list[Any]:
        taken, waiting[:] = list(waiting), []
        return taken

    class VetoSecondTurn(Hooks):
        async def before_turn(self, context: Any, turn_index: int) -> bool:
            return turn_index < 1

    provider = ScriptedProvider([*turn_one, "first answer", "never"])
    config = AgentLoopConfig(
        provider=provider,
        hooks=[VetoSecondTurn()],
        **{f"get_{source}_messages": take},  # type: ignore[arg-type]
    )
    if source == "steering":  # taken at the check before turn 1, after the tool call
        polls = iter([[], *[None] * 10])

        def first_empty() -> list[Any]:
            return [] if next(polls) is not None else take()

        config = config.model_copy(update={"get_steering_messages": first_empty})
    context = AgentContext(tools=[add])
    rec = await run_recorded(["go"], context, config)
    check(rec)
    assert rec.end.reason == "vetoed"
    texts = [getattr(m, "text", "") for m in context.messages]
    assert texts[-1] == "steer: stop adding", "the message taken from the queue vanished"
    assert rec.end.messages[-1].text == "steer: stop adding"  # type: ignore[union-attr]
    assert len(provider.requests) == 1  # the vetoed turn made no model call
    assert [e.turn_index for e in rec.of_type(TurnStart)] == [0]


async def test_prompts_of_a_first_turn_veto_are_not_taken() -> None:
    class VetoAll(Hooks):
        async def before_turn(self, context: Any, turn_index: int) -> bool:
            return False

    context = AgentContext()
    rec = await run_recorded(
        ["go"], context, AgentLoopConfig(provider=ScriptedProvider(["never"]), hooks=[VetoAll()])
    )
    check(rec)
    assert rec.end.reason == "vetoed" and rec.end.messages == [] and context.messages == []


# ---- the forced final-answer turn at a limit: before_turn / after_turn in pairs ----


class TurnPairs(Hooks):
    def __init__(self, veto_at: int | None = None) -> None:
        self.calls: list[str] = []
        self.veto_at = veto_at

    async def before_turn(self, context: Any, turn_index: int) -> bool:
        self.calls.append(f"before:{turn_index}")
        return turn_index != self.veto_at

    async def after_turn(self, context: Any, event: Any) -> None:
        self.calls.append(f"after:{event.turn_index}")


async def test_the_final_answer_turn_at_a_limit_calls_before_and_after_turn() -> None:
    @tool
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    hooks = TurnPairs()
    provider = ScriptedProvider(
        [calls_message(call("c1", "add", a=1, b=2)), "the final answer from what I have"]
    )
    config = AgentLoopConfig(
        provider=provider,
        hooks=[hooks],
        limits=ExecutionLimits(max_turns=1, on_limit="final_answer"),
    )
    context = AgentContext(tools=[add])
    rec = await run_recorded(["go"], context, config)
    check(rec)
    assert rec.end.reason == "limit"
    assert hooks.calls == ["before:0", "after:0", "before:1", "after:1"]
    assert context.messages[-1].text == "the final answer from what I have"  # type: ignore[union-attr]


async def test_a_vetoed_final_answer_turn_stops_with_the_note() -> None:
    hooks = TurnPairs(veto_at=1)
    provider = ScriptedProvider([calls_message(call("c1", "nope")), "never"])
    config = AgentLoopConfig(
        provider=provider,
        hooks=[hooks],
        limits=ExecutionLimits(max_turns=1, on_limit="final_answer"),
    )
    context = AgentContext()
    rec = await run_recorded(["go"], context, config)
    check(rec)
    assert rec.end.reason == "limit"
    assert hooks.calls == ["before:0", "after:0", "before:1"]
    assert len(provider.requests) == 1  # no final-answer call after the veto
    assert context.messages[-1].text.startswith("[Agent stopped: reached max_turns=1")  # type: ignore[union-attr]


# ---- an input filter's warning: nothing the caller passed is edited (§3) ----


class WarnAlways(InputFilter):
    async def filter(self, text: str) -> FilterResult:
        return Warn("be careful")


@pytest.mark.parametrize("where", ["prompt", "steering"])
async def test_a_filter_warning_leaves_the_callers_message_alone(where: str) -> None:
    mine = UserMessage.of("please do it")
    before = mine.model_copy(deep=True)
    steering = [[], [mine]] if where == "steering" else []

    def steer() -> list[Any]:
        return steering.pop(0) if steering else []

    @tool
    async def noop() -> str:
        """Nothing."""
        return "ok"

    script: list[Any] = ["done"]
    if where == "steering":
        script = [calls_message(call("c1", "noop")), "done"]
    provider = ScriptedProvider(script)
    config = AgentLoopConfig(
        provider=provider, input_filters=[WarnAlways()], get_steering_messages=steer
    )
    context = AgentContext(tools=[noop])
    prompts: list[Any] = [mine] if where == "prompt" else ["go"]
    rec = await run_recorded(prompts, context, config)
    check(rec)
    assert rec.end.reason == "completed"
    assert mine == before and len(mine.content) == 1, "the caller's message was edited"
    stored = [m for m in context.messages if getattr(m, "text", "").startswith("please do it")]
    assert len(stored) == 1 and stored[0] is not mine
    assert stored[0].content[-1].text == "[Warning: be careful]"  # type: ignore[union-attr]
    assert provider.requests[-1].messages[-1].text.endswith("[Warning: be careful]")
