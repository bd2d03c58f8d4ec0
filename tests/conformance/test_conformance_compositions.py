"""Where two features meet (issue 21): hooks, steering, limits, filters and tool results
combined. Each test names the rule of docs/contract.md it holds."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest
from harness import call, calls_message, check, results_of, run_recorded

from treadle import (
    AgentContext,
    AgentLoopConfig,
    CancellationToken,
    ExecutionLimits,
    Hooks,
    RunEnding,
    RunHandle,
    ToolResult,
    ToolResultMessage,
    UserMessage,
    tool,
)
from treadle.loop import FilterResult, InputFilter, Pass, Reject, ToolExecution, Warn
from treadle.testing import ScriptedProvider
from treadle.types import ToolExecutionEnd, TurnStart, message_from_json

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
        async def after_tool_call(
            self, run: RunHandle, call: Any, result: ToolResult
        ) -> ToolResult | None:
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
        async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
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
        async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
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

    async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
        self.calls.append(f"before:{turn_index}")
        return turn_index != self.veto_at

    async def after_turn(self, run: RunHandle, event: Any) -> None:
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


# ---- a cancelled tool result is recognisable by a field, not by its text (§4.3) ----


async def test_a_cancelled_result_is_marked_and_an_error_saying_cancelled_is_not() -> None:
    started = anyio.Event()

    @tool
    async def wait_forever() -> str:
        """Never ends on its own."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    @tool
    async def liar() -> ToolResult:
        """Fails with a text that reads like a cancellation."""
        return ToolResult.error("Cancelled")

    token = CancellationToken()

    async def cancel_when_started(rec: Any, event: Any) -> None:
        if isinstance(event, ToolExecutionEnd) and event.tool_call_id == "c2":
            await started.wait()
            token.cancel()

    provider = ScriptedProvider(
        [calls_message(call("c1", "wait_forever"), call("c2", "liar")), "never"]
    )
    context = AgentContext(tools=[wait_forever, liar])
    rec = await run_recorded(
        ["go"],
        context,
        AgentLoopConfig(provider=provider),
        cancel=token,
        on_event=cancel_when_started,
    )
    check(rec)
    assert rec.end.reason == "cancelled"
    results = results_of(context.messages)
    assert results["c1"].cancelled and results["c1"].is_error
    assert results["c2"].text == "Cancelled" and not results["c2"].cancelled
    ends = {e.tool_call_id: e for e in rec.of_type(ToolExecutionEnd)}
    assert ends["c1"].result.cancelled and not ends["c2"].result.cancelled
    # the mark survives a round trip through JSON
    again = message_from_json(results["c1"].model_dump_json())
    assert isinstance(again, ToolResultMessage) and again.cancelled


def test_stored_results_from_before_the_mark_still_load() -> None:
    old = {
        "role": "tool_result",
        "tool_call_id": "c1",
        "tool_name": "pay",
        "content": [{"type": "text", "text": "Cancelled"}],
        "is_error": True,
        "timestamp": 1,
    }
    loaded = message_from_json(json.dumps(old))
    assert isinstance(loaded, ToolResultMessage) and loaded.cancelled  # read as it was meant
    ran = {**old, "content": [{"type": "text", "text": "paid"}], "is_error": False}
    assert not message_from_json(json.dumps(ran)).cancelled  # type: ignore[union-attr]


# ---- after_loop raising: logged, never swallowed silently (§3) ----


async def test_an_after_loop_error_is_logged_and_the_next_hook_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    class Broken(Hooks):
        async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
            raise RuntimeError("the session table is gone")

    class Later(Hooks):
        async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
            seen.append(ending.reason)

    config = AgentLoopConfig(provider=ScriptedProvider(["hi"]), hooks=[Broken(), Later()])
    with caplog.at_level(logging.ERROR, logger="treadle.loop"):
        rec = await run_recorded(["go"], AgentContext(), config)
    check(rec)
    assert rec.end.reason == "completed" and seen == ["completed"]
    failed = [r for r in caplog.records if "after_loop" in r.getMessage()]
    assert failed, "the after_loop error was swallowed without a trace"
    assert "Broken.after_loop" in failed[0].getMessage()
    assert failed[0].exc_info is not None and "session table is gone" in str(failed[0].exc_info[1])


# ---- steering rejected after a turn: agent_end carries what the turns added (§2.2) ----


class RejectWord(InputFilter):
    async def filter(self, text: str) -> FilterResult:
        return Reject("no forbidden words") if "forbidden" in text else Pass()


async def test_rejected_steering_ends_with_the_messages_the_turns_added() -> None:
    @tool
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    steering: list[list[Any]] = [[], ["forbidden words"]]
    provider = ScriptedProvider([calls_message(call("c1", "add", a=1, b=1)), "never"])
    config = AgentLoopConfig(
        provider=provider,
        input_filters=[RejectWord()],
        get_steering_messages=lambda: steering.pop(0) if steering else [],
    )
    context = AgentContext(tools=[add])
    rec = await run_recorded(["go"], context, config)
    check(rec)
    assert rec.end.reason == "rejected"
    assert [m.role for m in rec.end.messages] == ["user", "assistant", "tool_result"]
    assert rec.end.messages == rec.returned == context.messages
    assert all(getattr(m, "text", "") != "forbidden words" for m in context.messages)
