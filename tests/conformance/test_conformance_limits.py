"""docs/contract.md §4.1 step 2 (limits, invariant 10) and §4.2 (retries, final failures)."""

from __future__ import annotations

from typing import Any

import pytest
from harness import PartialThenFail, Recorded, call, calls_message, check, run_recorded

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    CancellationToken,
    ExecutionLimits,
    ModelRequest,
    ProviderError,
    RunHandle,
    TextContent,
    ToolResultMessage,
    Usage,
    UserMessage,
    tool,
)
from treadle.context import validate_transcript
from treadle.loop import RetryPolicy
from treadle.testing import ScriptedProvider
from treadle.types import (
    MessageStart,
    MessageUpdate,
    ProviderRetry,
    TextDelta,
    ToolExecutionEnd,
    TurnEnd,
    TurnStart,
)

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(initial_delay_s=0.001, max_delay_s=0.01, jitter=0)


@tool
async def look(n: int) -> str:
    return f"looked {n}"


def always_tools(per_turn: int = 1, usage: Usage | None = None) -> Any:
    """A model that calls ``look`` on every request (ids unique per request)."""
    counter = [0]

    def answer(request: ModelRequest) -> AssistantMessage:
        counter[0] += 1
        k = counter[0]
        calls = [call(f"t{k}-{i}", "look", n=k) for i in range(per_turn)]
        return calls_message(*calls, usage=usage)

    return answer


async def run_limited(
    limits: ExecutionLimits, script: list[Any], **config: Any
) -> tuple[Recorded, ScriptedProvider]:
    provider = ScriptedProvider(script)
    context = AgentContext(tools=[look])
    config.setdefault("retry", FAST)
    rec = await run_recorded(
        ["investigate"], context, AgentLoopConfig(provider=provider, limits=limits, **config)
    )
    check(rec, requests=provider.requests)
    return rec, provider


def tool_turns(rec: Recorded) -> int:
    return sum(1 for e in rec.of_type(TurnEnd) if e.tool_results)


@pytest.mark.parametrize("n", [1, 3])
async def test_max_turns_stop(n: int) -> None:
    from treadle import Hooks

    asked: list[int] = []

    class Turns(Hooks):
        async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
            asked.append(turn_index)
            return True

    model = always_tools()
    rec, provider = await run_limited(
        ExecutionLimits(max_turns=n), [model] * (n + 2), hooks=[Turns()]
    )
    assert asked == list(range(n)), "the limit check comes before before_turn"
    assert len(rec.of_type(TurnStart)) == n, "exactly N turns (invariant 10)"
    assert len(provider.requests) == n
    assert tool_turns(rec) == n
    assert rec.end.reason == "limit"
    last = rec.after[-1]
    assert isinstance(last, UserMessage)
    assert last.text.startswith("[Agent stopped: ") and last.text.endswith("]")
    assert "max_turns" in last.text
    # Reported as a pair, after the last turn_end.
    assert rec.types()[-3:] == ["message_start", "message_end", "agent_end"]


async def test_max_turns_final_answer() -> None:
    model = always_tools()
    limits = ExecutionLimits(max_turns=2, on_limit="final_answer")
    script = [model, model, "Here is what I found.", "never"]
    rec, provider = await run_limited(limits, script)
    assert len(provider.requests) == 3, "one extra model call"
    assert tool_turns(rec) == 2
    final_request = provider.requests[-1]
    assert final_request.tools == [], "the final-answer call offers no tools"
    assert provider.requests[0].tools, "normal calls offer the tools"
    instruction = "Do not call any tools"
    in_request = (final_request.system_prompt or "") + " ".join(
        getattr(m, "text", "") for m in final_request.messages
    )
    assert instruction in in_request, "the instruction is sent with the final call"
    for m in rec.after:
        assert instruction not in m.model_dump_json(), "the instruction is not stored"
    for r in provider.requests[:2]:
        assert instruction not in (r.system_prompt or "")
    last = rec.after[-1]
    assert isinstance(last, AssistantMessage) and last.text == "Here is what I found."
    assert rec.end.reason == "limit"
    assert not any(getattr(m, "text", "").startswith("[Agent stopped") for m in rec.after)


async def test_final_answer_fallback_when_the_call_fails() -> None:
    model = always_tools()
    limits = ExecutionLimits(
        max_turns=1, on_limit="final_answer", final_answer_fallback="FALLBACK ({reason})"
    )
    rec, provider = await run_limited(limits, [model, ProviderError("auth", "key revoked")])
    assert len(provider.requests) == 2
    last = rec.after[-1]
    assert isinstance(last, AssistantMessage)
    assert last.text.startswith("FALLBACK (") and "max_turns" in last.text
    assert rec.end.reason == "limit"


async def test_final_answer_that_still_calls_a_tool_keeps_history_valid() -> None:
    model = always_tools()
    limits = ExecutionLimits(max_turns=1, on_limit="final_answer")
    rec, _ = await run_limited(limits, [model, model])
    assert rec.end.reason == "limit"


async def test_max_tool_calls() -> None:
    rec, provider = await run_limited(
        ExecutionLimits(max_tool_calls=3), [always_tools(per_turn=2)] * 4
    )
    assert len(provider.requests) == 2
    assert len(rec.of_type(ToolExecutionEnd)) == 4
    assert rec.end.reason == "limit"
    assert "max_tool_calls" in rec.after[-1].text  # type: ignore[union-attr]


async def test_max_total_tokens() -> None:
    usage = Usage(input=60, output=40, total_tokens=100)
    rec, provider = await run_limited(
        ExecutionLimits(max_total_tokens=250), [always_tools(usage=usage)] * 5
    )
    assert len(provider.requests) == 3
    assert rec.end.usage.total_tokens == 300
    assert rec.end.reason == "limit"
    assert "max_total_tokens" in rec.after[-1].text  # type: ignore[union-attr]


async def test_max_cost() -> None:
    usage = Usage(input=1, output=1, total_tokens=2, cost_usd=0.01)
    rec, provider = await run_limited(
        ExecutionLimits(max_cost_usd=0.025), [always_tools(usage=usage)] * 5
    )
    assert len(provider.requests) == 3
    assert rec.end.usage.cost_usd == pytest.approx(0.03)
    assert rec.end.reason == "limit"


async def test_usage_is_summed_per_turn_and_per_loop() -> None:
    u1 = Usage(input=10, output=5, reasoning=1, cache_read=2, cache_write=3, total_tokens=20)
    u2 = Usage(input=7, output=3, total_tokens=10, cost_usd=0.5)
    script = [
        calls_message(call("c1", "look", n=1), usage=u1),
        AssistantMessage(content="ok", usage=u2),
    ]
    rec, _ = await run_limited(ExecutionLimits(), script)
    assert [e.usage for e in rec.of_type(TurnEnd)] == [u1, u2]
    assert rec.end.usage == u1 + u2
    assert rec.end.usage.total_tokens == 30 and rec.end.usage.cost_usd == 0.5


# ---------------------------------------------------------------- retries


async def test_retry_after_rate_limit() -> None:
    error = ProviderError("rate_limit", "slow down", status_code=429, retry_after=0.01)
    rec, provider = await run_limited(ExecutionLimits(), [error, "recovered"])
    (retry,) = rec.of_type(ProviderRetry)
    assert retry.attempt == 1
    assert retry.max_retries == FAST.max_retries
    assert retry.delay_s == pytest.approx(0.01), "Retry-After wins over the backoff"
    assert retry.error_kind == "rate_limit" and retry.status_code == 429
    assert retry.message == "slow down"
    assert retry.discard_partial is False
    i = rec.events.index(retry)
    assistant_starts = [
        j
        for j, e in enumerate(rec.events)
        if isinstance(e, MessageStart) and e.message.role == "assistant"
    ]
    assert assistant_starts and all(j > i for j in assistant_starts)
    assert len(provider.requests) == 2
    assert provider.requests[0] == provider.requests[1], "the same request is sent again"
    assert rec.after[-1].text == "recovered"  # type: ignore[union-attr]
    assert rec.end.reason == "completed"


async def test_retry_backoff_and_exhaustion() -> None:
    policy = RetryPolicy(max_retries=2, initial_delay_s=0.001, multiplier=3, jitter=0)
    errors = [ProviderError("server", f"boom {i}", status_code=503) for i in range(3)]
    rec, provider = await run_limited(ExecutionLimits(), [*errors, "never"], retry=policy)
    retries = rec.of_type(ProviderRetry)
    assert [(r.attempt, r.max_retries) for r in retries] == [(1, 2), (2, 2)]
    assert [r.delay_s for r in retries] == pytest.approx([0.001, 0.003])
    assert len(provider.requests) == 3
    last = rec.after[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    assert last.error is not None and last.error.kind == "server"
    assert last.error.message == "boom 2" and last.error.status_code == 503
    assert rec.end.reason == "error" and rec.end.error == last.error


async def test_retry_discards_a_started_partial_message() -> None:
    provider = PartialThenFail(ProviderError("overloaded", "busy"), "the full answer")
    context = AgentContext()
    rec = await run_recorded(["q"], context, AgentLoopConfig(provider=provider, retry=FAST))
    check(rec, requests=provider.requests)
    (retry,) = rec.of_type(ProviderRetry)
    assert retry.discard_partial is True
    types = rec.types()
    i = types.index("provider_retry")
    assert types[i - 2 : i] == ["message_start", "message_update"]
    assert types[i + 1] == "message_start"
    assistants = [m for m in rec.after if isinstance(m, AssistantMessage)]
    assert len(assistants) == 1 and assistants[0].text == "the full answer"
    assert rec.end.reason == "completed"


@pytest.mark.parametrize("kind", ["auth", "bad_request", "context_overflow"])
async def test_non_retryable_error_ends_the_turn(kind: str) -> None:
    error = ProviderError(kind, "nope", status_code=400)  # type: ignore[arg-type]
    rec, provider = await run_limited(ExecutionLimits(), [error, "never"])
    assert rec.of_type(ProviderRetry) == []
    assert len(provider.requests) == 1
    last = rec.after[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "error"
    assert last.error is not None
    assert (last.error.kind, last.error.message, last.error.status_code) == (kind, "nope", 400)
    assert rec.types()[-4:] == ["message_start", "message_end", "turn_end", "agent_end"]
    assert rec.end.reason == "error"
    assert rec.end.error is not None and rec.end.error.kind == kind


async def test_partial_then_non_retryable_error_keeps_no_half_tool_calls() -> None:
    provider = PartialThenFail(ProviderError("auth", "revoked"), "unused")
    context = AgentContext()
    rec = await run_recorded(["q"], context, AgentLoopConfig(provider=provider, retry=FAST))
    check(rec, requests=provider.requests)
    last = rec.after[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    assert last.error is not None and last.error.kind == "auth"
    assert rec.end.reason == "error"


async def test_retry_after_longer_than_allowed_fails_at_once() -> None:
    error = ProviderError("rate_limit", "come back tomorrow", retry_after=3600)
    policy = RetryPolicy(initial_delay_s=0.001, max_retry_after_s=1)
    rec, provider = await run_limited(ExecutionLimits(), [error, "never"], retry=policy)
    assert rec.of_type(ProviderRetry) == []
    assert len(provider.requests) == 1
    last = rec.after[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    assert last.error is not None and last.error.kind == "rate_limit"
    assert rec.end.reason == "error"


async def test_provider_that_raises_a_plain_exception() -> None:
    def crash(request: ModelRequest) -> AssistantMessage:
        raise RuntimeError("adapter bug")

    rec, provider = await run_limited(ExecutionLimits(), [crash, "never"])
    last = rec.after[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    assert last.error is not None and "adapter bug" in last.error.message
    assert rec.end.reason == "error"
    assert len(provider.requests) == 1


async def test_error_turn_after_tools_keeps_results() -> None:
    script = [calls_message(call("c1", "look", n=1)), ProviderError("auth", "expired")]
    rec, _ = await run_limited(ExecutionLimits(), script)
    assert [m.role for m in rec.after] == ["user", "assistant", "tool_result", "assistant"]
    assert isinstance(rec.after[2], ToolResultMessage)
    assert rec.end.reason == "error"


async def test_a_final_answer_cut_after_a_tool_call_streamed_keeps_no_call() -> None:
    """The final answer at a limit offers no tools, so a call in it can never run: when a
    cancellation cuts the answer after a call streamed whole, the kept partial answer drops
    the call (as a finished answer does) instead of keeping a call nobody answers."""
    token = CancellationToken()
    more = TextContent(text="and then I would say a good deal more about it")
    answer = AssistantMessage(content=[*calls_message(call("c9", "look", n=9)).content, more])
    provider = ScriptedProvider([answer], delay=0.001)
    config = AgentLoopConfig(
        provider=provider, limits=ExecutionLimits(max_turns=0, on_limit="final_answer")
    )

    def cut(rec: Recorded, event: Any) -> None:
        if isinstance(event, MessageUpdate) and event.delta.type == "tool_call_end":
            token.cancel()

    context = AgentContext(tools=[look])
    rec = await run_recorded(["go"], context, config, cancel=token, on_event=cut)
    check(rec, requests=provider.requests)
    assert any(
        isinstance(e, MessageUpdate) and e.delta.type == "tool_call_end" for e in rec.events
    ), "the call streamed whole before the cut"
    kept = [m for m in rec.after if isinstance(m, AssistantMessage)]
    assert kept and not kept[-1].tool_calls
    assert kept[-1].stop_reason == "aborted"
    assert validate_transcript(context.messages) == []


async def test_a_final_answer_failing_after_text_streamed_keeps_it_and_streams_the_fallback() -> (
    None
):
    """Found by the simulation (seeds 9405015, 9500461): the fallback replaced text that had
    already streamed, so the deltas no longer added up to the message. What streamed stays,
    and the fallback streams after it, in a block of its own."""
    provider = PartialThenFail(ProviderError("auth", "revoked"), "unused")
    limits = ExecutionLimits(max_turns=0, on_limit="final_answer", final_answer_fallback="FB")
    config = AgentLoopConfig(provider=provider, limits=limits)
    rec = await run_recorded(["go"], AgentContext(), config)
    check(rec)
    last = rec.after[-1]
    assert isinstance(last, AssistantMessage) and last.error is not None
    assert [b.text for b in last.content] == ["half an ans", "FB"]  # type: ignore[union-attr]
    streamed: dict[int, str] = {}
    for update in rec.of_type(MessageUpdate):
        delta = update.delta
        assert isinstance(delta, TextDelta)
        streamed[delta.index] = streamed.get(delta.index, "") + delta.text
    assert streamed == {0: "half an ans", 1: "FB"}
    assert rec.end.reason == "limit"
