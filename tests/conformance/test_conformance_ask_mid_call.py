"""A tool that asks a person mid-call (``ApprovalRequired``): answered by the approval
handler, or left pending and resumed approved or denied (docs/contract.md §5, §7.16)."""

from __future__ import annotations

from typing import Any

import pytest
from harness import Recorded, call, calls_message, check, results_of, run_recorded

from treadle import (
    AgentContext,
    AgentLoopConfig,
    Allow,
    Ask,
    Deny,
    Hooks,
    RunHandle,
    ToolCall,
    ToolContext,
    tool,
)
from treadle.context import validate_transcript
from treadle.loop import ToolExecution
from treadle.testing import ScriptedProvider
from treadle.tools import ApprovalRequired
from treadle.types import ToolExecutionEnd, ToolExecutionStart

pytestmark = pytest.mark.anyio


class Payments:
    """A payment tool that asks once an amount is over 100 (``asks`` times in a row)."""

    def __init__(self, asks: int = 1) -> None:
        self.calls: list[tuple[int, bool, Any]] = []  # (amount, ctx.approved, ctx.saved)
        self.asks = asks

        @tool
        async def pay(amount: int, ctx: ToolContext[Any]) -> str:
            self.calls.append((amount, ctx.approved, ctx.saved))
            step = ctx.saved["step"] if ctx.saved else 0
            if amount > 100 and step < self.asks:
                raise ApprovalRequired(f"Pay {amount} (step {step + 1})?", {"step": step + 1})
            return f"paid {amount}"

        @tool
        async def note(text: str, ctx: ToolContext[Any]) -> str:
            self.calls.append((0, ctx.approved, ctx.saved))
            return f"noted {text}"

        self.tools = [pay, note]


def setup(
    payments: Payments, *replies: Any, handler: Any = None, strategy: str = "parallel", **cfg: Any
) -> tuple[AgentContext, AgentLoopConfig, ScriptedProvider]:
    first = calls_message(call("p1", "pay", amount=500), call("n1", "note", text="x"))
    provider = ScriptedProvider([first, *replies] if replies else [first, "done"])
    context = AgentContext(tools=payments.tools)
    config = AgentLoopConfig(
        provider=provider,
        approval_handler=handler,
        tool_execution=ToolExecution(strategy),  # type: ignore[arg-type]
        **cfg,
    )
    return context, config, provider


def ends(rec: Recorded) -> dict[str, ToolExecutionEnd]:
    return {e.tool_call_id: e for e in rec.of_type(ToolExecutionEnd)}


@pytest.mark.parametrize("strategy", ["parallel", "sequential"])
async def test_handler_approves_and_the_tool_is_called_again_with_its_saved_state(
    strategy: str,
) -> None:
    payments = Payments()
    asked: list[tuple[str, str | None]] = []

    async def handler(run: RunHandle, call: ToolCall, ask: Ask) -> bool:
        asked.append((call.id, ask.prompt))
        return True

    context, config, provider = setup(payments, handler=handler, strategy=strategy)
    rec = await run_recorded(["pay"], context, config)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "completed"
    assert asked == [("p1", "Pay 500 (step 1)?")]
    assert [c for c in payments.calls if c[0]] == [(500, False, None), (500, True, {"step": 1})]
    assert results_of(context.messages)["p1"].text == "paid 500"
    starts = [e.tool_call_id for e in rec.of_type(ToolExecutionStart)]
    assert sorted(starts) == ["n1", "p1"], "one start and one end for the call, asked or not"
    assert not context.suspended


async def test_handler_denies_and_the_tool_is_not_called_again() -> None:
    payments = Payments()

    async def handler(run: RunHandle, call: ToolCall, ask: Ask) -> Any:
        return Deny("Too much.")

    context, config, provider = setup(payments, handler=handler)
    rec = await run_recorded(["pay"], context, config)
    check(rec, requests=provider.requests)
    result = results_of(context.messages)["p1"]
    assert result.is_error and result.text == "Too much." and result.details == {"denied": True}
    assert [c for c in payments.calls if c[0]] == [(500, False, None)]
    assert rec.end.reason == "completed"


async def test_handler_cannot_give_new_arguments_to_a_running_call() -> None:
    payments = Payments()

    async def handler(run: RunHandle, call: ToolCall, ask: Ask) -> Any:
        return Allow({"amount": 1})

    context, config, provider = setup(payments, handler=handler)
    rec = await run_recorded(["pay"], context, config)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "error"
    assert rec.end.error is not None and "cannot take new arguments" in rec.end.error.message
    assert [c for c in payments.calls if c[0]] == [(500, False, None)]


@pytest.mark.parametrize("strategy", ["parallel", "sequential"])
async def test_without_a_handler_the_run_suspends_on_the_call(strategy: str) -> None:
    payments = Payments()
    context, config, provider = setup(payments, strategy=strategy)
    rec = await run_recorded(["pay"], context, config)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "suspended" and rec.end.pending_tool_calls == ["p1"]
    end = ends(rec)["p1"]
    assert not end.is_error and end.result.details == {"waiting": True}
    assert "Pay 500 (step 1)?" in end.result.text
    assert "p1" not in results_of(context.messages) and "n1" in results_of(context.messages)
    record = context.suspended["p1"]
    assert (record.name, record.arguments) == ("pay", {"amount": 500})
    assert (record.prompt, record.saved) == ("Pay 500 (step 1)?", {"step": 1})
    assert context.waiting_tool_calls == ["p1"]
    assert validate_transcript(context.messages, allow_pending=["p1"]) == []


async def test_approved_after_suspending_the_tool_gets_its_saved_state() -> None:
    payments = Payments()
    context, config, provider = setup(payments)
    await run_recorded(["pay"], context, config)
    context.approve("p1")
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "completed"
    assert [c for c in payments.calls if c[0]] == [(500, False, None), (500, True, {"step": 1})]
    assert results_of(context.messages)["p1"].text == "paid 500"
    assert not context.suspended
    assert validate_transcript(context.messages) == []


async def test_denied_after_suspending_the_tool_is_not_called_again() -> None:
    payments = Payments()
    context, config, provider = setup(payments)
    await run_recorded(["pay"], context, config)
    context.deny("p1", "No.")
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert [c for c in payments.calls if c[0]] == [(500, False, None)]
    result = results_of(context.messages)["p1"]
    assert result.is_error and result.text == "No." and result.details == {"denied": True}
    assert rec.end.reason == "completed"


async def test_asking_again_after_an_approval_suspends_again() -> None:
    payments = Payments(asks=2)
    context, config, provider = setup(payments)
    await run_recorded(["pay"], context, config)
    context.approve("p1")
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "suspended" and rec.end.pending_tool_calls == ["p1"]
    assert context.suspended["p1"].saved == {"step": 2}
    assert context.suspended["p1"].prompt == "Pay 500 (step 2)?"
    context.approve("p1")
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "completed"
    amounts = [c for c in payments.calls if c[0]]
    assert amounts == [(500, False, None), (500, True, {"step": 1}), (500, True, {"step": 2})]


async def test_new_prompts_deny_a_call_that_asks_while_resumed() -> None:
    # A hook's Ask suspends the run; the person approves; the run resumes with a new
    # prompt, so nothing may wait: the tool's mid-call question is denied.
    class AskFirst(Hooks):
        async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Any:
            return Ask("May I pay?") if call.name == "pay" else None

    payments = Payments()
    context, config, provider = setup(payments, "done", "after", hooks=[AskFirst()])
    first = await run_recorded(["pay"], context, config)
    assert first.end.pending_tool_calls == ["p1"] and not payments.calls[1:]
    context.approve("p1")
    rec = await run_recorded(["something else"], context, config)
    check(rec, requests=provider.requests)
    assert [c for c in payments.calls if c[0]] == [(500, True, None)]
    result = results_of(context.messages)["p1"]
    assert result.text == "No decision was given for this tool call."
    assert result.details == {"denied": True}
    assert rec.end.reason == "completed"


async def test_a_pending_mid_call_question_is_denied_by_new_prompts() -> None:
    payments = Payments()
    context, config, provider = setup(payments, "done", "after")
    await run_recorded(["pay"], context, config)
    rec = await run_recorded(["never mind"], context, config)
    check(rec, requests=provider.requests)
    assert [c for c in payments.calls if c[0]] == [(500, False, None)]
    assert results_of(context.messages)["p1"].details == {"denied": True}


async def test_ctx_approved_after_a_hooks_ask() -> None:
    class AskAll(Hooks):
        async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Any:
            return Ask() if call.name == "note" else None

    async def handler(run: RunHandle, call: ToolCall, ask: Ask) -> bool:
        return True

    payments = Payments()
    # by the handler
    context, config, _ = setup(payments, handler=handler, hooks=[AskAll()])
    await run_recorded(["pay"], context, config)
    assert (0, True, None) in payments.calls
    # by a person, after a suspension; and a call nobody asked about is not approved
    payments = Payments()
    first = calls_message(call("n1", "note", text="x"), call("p1", "pay", amount=5))
    context = AgentContext(tools=payments.tools)
    config = AgentLoopConfig(provider=ScriptedProvider([first, "done"]), hooks=[AskAll()])
    await run_recorded(["note"], context, config)
    assert payments.calls == [(5, False, None)]
    context.approve("n1")
    await run_recorded(None, context, config)
    assert payments.calls == [(5, False, None), (0, True, None)]


async def test_a_planted_approval_never_reaches_a_call_that_did_not_suspend() -> None:
    # The gate: saved state comes only from the server's own record; an approval for a call
    # the run did not suspend on is refused, so the tool is never called approved.
    payments = Payments()
    context, config, _ = setup(payments)
    await run_recorded(["pay"], context, config)
    with pytest.raises(Exception, match="cannot approve tool call 'n1'"):
        context.approve("n1")
    context.approve("p1")
    await run_recorded(None, context, config)
    assert [c for c in payments.calls if c[1]] == [(500, True, {"step": 1})]


async def test_a_pending_mid_call_question_ends_cancelled_when_the_run_does_not_suspend() -> None:
    # A hook failing on a later call ends the run with an error: nothing waits then, so the
    # call that asked ends Cancelled (its one end and its result agree).
    class Broken(Hooks):
        async def after_tool_call(self, run: RunHandle, call: ToolCall, result: Any) -> Any:
            if call.name == "note":
                raise RuntimeError("broken hook")
            return None

    payments = Payments()
    context, config, provider = setup(payments, strategy="sequential", hooks=[Broken()])
    rec = await run_recorded(["pay"], context, config)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "error"
    assert results_of(context.messages)["p1"].cancelled
    assert ends(rec)["p1"].result.cancelled, "its one end says Cancelled, as its result does"
    assert "p1" not in context.suspended
