"""The core conformance scenarios, end to end through each adapter and its wire fake.

The loop, the real adapter (request building, SSE/NDJSON decoding, error mapping) and the
fake server's bytes all take part; the conformance invariant checker runs on every run.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from tests.conformance.harness import Recorded, check, run_recorded
from tests.testing.wire_cases import FORMATS, full_usage, thinking_blocks

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    CancellationToken,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    tool,
)
from treadle.context import validate_transcript
from treadle.loop import RetryPolicy
from treadle.testing import Fail, FakeTransport, Slow, StreamError, Truncate
from treadle.types import (
    AgentEnd,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProviderRetry,
    ThinkingContent,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)

pytestmark = pytest.mark.anyio

FAST_RETRY = RetryPolicy(initial_delay_s=0.001, max_delay_s=0.01)


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    await anyio.sleep(0.002)  # finishes after weather: completion order differs from call order
    return a + b


@tool
async def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 21 C, clear"


def setup(
    fmt: str, script: list[Any], **config: Any
) -> tuple[FakeTransport, AgentContext, AgentLoopConfig]:
    fake = FakeTransport(fmt, script)
    context = AgentContext(system_prompt="Be brief.", tools=[add, weather])
    cfg = AgentLoopConfig(provider=fake.provider(), retry=FAST_RETRY, **config)
    return fake, context, cfg


def skeleton(rec: Recorded) -> list[str]:
    out: list[str] = []
    for e in rec.events:
        if isinstance(e, MessageUpdate):
            if out[-1] != "message_update*":
                out.append("message_update*")
            continue
        if isinstance(e, (MessageStart, MessageEnd)):
            m = e.message
            tag = m.tool_call_id if isinstance(m, ToolResultMessage) else m.role
            out.append(f"{e.type}({tag})")
        elif isinstance(e, (ToolExecutionStart, ToolExecutionEnd)):
            out.append(f"{e.type}({e.tool_call_id})")
        elif isinstance(e, TurnStart):
            out.append(f"turn_start({e.turn_index},{e.trigger.value})")
        elif isinstance(e, TurnEnd):
            out.append(f"turn_end({e.turn_index})")
        elif isinstance(e, ProviderRetry):
            out.append(f"provider_retry({e.error_kind})")
        else:
            out.append(e.type)
    return out


TOOL_TURN = [
    TextContent(text="Checking both."),
    ToolCall(id="call_A", name="add", arguments={"a": 2, "b": 3}),
    ToolCall(id="call_B", name="weather", arguments={"city": "Paris"}),
]


@pytest.mark.parametrize("fmt", FORMATS)
async def test_two_turns_with_parallel_tools(fmt: str) -> None:
    first = AssistantMessage(content=[*thinking_blocks(fmt), *TOOL_TURN], usage=full_usage(fmt))
    final = AssistantMessage(
        content=[TextContent(text="5, and Paris is clear.")], usage=full_usage(fmt)
    )
    fake, context, config = setup(fmt, [first, final])
    prompt = UserMessage.of("2+3, and the weather in Paris?")

    rec = await run_recorded([prompt], context, config)
    check(rec)

    assert skeleton(rec) == [
        "agent_start",
        "turn_start(0,user)",
        "message_start(user)",
        "message_end(user)",
        "message_start(assistant)",
        "message_update*",
        "message_end(assistant)",
        "tool_execution_start(call_A)",
        "tool_execution_start(call_B)",
        "tool_execution_end(call_B)",
        "tool_execution_end(call_A)",
        "message_start(call_A)",
        "message_end(call_A)",
        "message_start(call_B)",
        "message_end(call_B)",
        "turn_end(0)",
        "turn_start(1,continuation)",
        "message_start(assistant)",
        "message_update*",
        "message_end(assistant)",
        "turn_end(1)",
        "agent_end",
    ]
    end = rec.end
    assert end.reason == "completed"
    roles = [m.role for m in context.messages]
    assert roles == ["user", "assistant", "tool_result", "tool_result", "assistant"]
    a0, result_a, result_b, a1 = context.messages[1:]
    assert isinstance(a0, AssistantMessage) and isinstance(a1, AssistantMessage)
    assert a0.content == first.content  # thinking, text and both calls came through the wire
    assert a0.stop_reason == "tool_use" and a0.provider == fake.provider().name
    # The tokens came through the wire (the loop may add a catalog price as cost_usd).
    assert a0.usage.model_copy(update={"cost_usd": None}) == first.usage
    total = end.usage.model_copy(update={"cost_usd": None})
    assert total == first.usage + final.usage
    assert isinstance(result_a, ToolResultMessage) and result_a.text == "5"
    assert isinstance(result_b, ToolResultMessage) and result_b.text == "Paris: 21 C, clear"
    assert a1.text == "5, and Paris is clear."

    # The second request carried both calls and their results in the provider's format.
    assert len(fake.requests) == 2
    second = json.dumps(fake.requests[1].json)
    for needle in ("call_A", "call_B", "Paris: 21 C, clear", "Be brief."):
        assert needle in second, needle
    if fmt == "anthropic":  # the thinking signature went back unchanged
        assistant_turn = fake.requests[1].json["messages"][1]
        thinking = first.content[0]
        assert isinstance(thinking, ThinkingContent)
        assert assistant_turn["content"][0]["signature"] == thinking.signature
    fake.assert_done()


@pytest.mark.parametrize("fmt", FORMATS)
async def test_rate_limit_with_retry_after_is_retried(fmt: str) -> None:
    fake, context, config = setup(fmt, [Fail(429, retry_after=0.01), "Recovered."])
    rec = await run_recorded(["hi"], context, config)
    check(rec)
    (retry,) = rec.of_type(ProviderRetry)
    assert (retry.error_kind, retry.status_code, retry.delay_s) == ("rate_limit", 429, 0.01)
    assert (retry.attempt, retry.discard_partial) == (1, False)
    assert rec.end.reason == "completed" and context.messages[-1].text == "Recovered."  # type: ignore[union-attr]
    assert len(fake.requests) == 2
    assert fake.requests[0].json == fake.requests[1].json  # the same request, sent again


@pytest.mark.parametrize("fmt", FORMATS)
async def test_truncated_stream_is_retried(fmt: str) -> None:
    _, context, config = setup(
        fmt, [Truncate("This answer will be cut off", after=3), "Whole answer."]
    )
    rec = await run_recorded(["hi"], context, config)
    check(rec)
    (retry,) = rec.of_type(ProviderRetry)
    assert retry.error_kind == "truncated_stream" and retry.discard_partial
    shape = skeleton(rec)
    at = shape.index("provider_retry(truncated_stream)")
    assert shape[4] == "message_start(assistant)" and at > 4  # the abandoned partial
    assert shape[at + 1 : at + 4] == [
        "message_start(assistant)",
        "message_update*",
        "message_end(assistant)",
    ]
    assert [m.role for m in context.messages] == ["user", "assistant"]
    assert context.messages[-1].text == "Whole answer."  # type: ignore[union-attr]


@pytest.mark.parametrize("fmt", FORMATS)
async def test_mid_stream_overloaded_is_retried(fmt: str) -> None:
    _, context, config = setup(fmt, [StreamError("Let me think about", after=2), "Fine now."])
    rec = await run_recorded(["hi"], context, config)
    check(rec)
    (retry,) = rec.of_type(ProviderRetry)
    assert retry.error_kind == "overloaded" and retry.discard_partial
    assert rec.end.reason == "completed"
    assert context.messages[-1].text == "Fine now."  # type: ignore[union-attr]


@pytest.mark.parametrize("fmt", FORMATS)
async def test_retries_run_out_into_an_error_message(fmt: str) -> None:
    _, context, config = setup(fmt, [StreamError(), StreamError(), Fail(500)])
    config = config.model_copy(update={"retry": RetryPolicy(max_retries=2, initial_delay_s=0.001)})
    rec = await run_recorded(["hi"], context, config)
    check(rec)
    assert [r.error_kind for r in rec.of_type(ProviderRetry)] == ["overloaded", "overloaded"]
    last = context.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    assert last.error is not None and (last.error.kind, last.error.status_code) == ("server", 500)
    assert rec.end.reason == "error"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("at", ["text", "tool_call_start"])
async def test_cancel_during_a_slow_stream(fmt: str, at: str) -> None:
    slow = AssistantMessage(
        content=[
            TextContent(text="A long answer that streams one word at a time before its tools"),
            ToolCall(id="call_A", name="add", arguments={"a": 1, "b": 2}),
            ToolCall(id="call_B", name="weather", arguments={"city": "Oslo"}),
        ]
    )
    fake, context, config = setup(fmt, [Slow(slow, delay=0.003)])
    token = CancellationToken()

    def on_event(rec: Recorded, event: Any) -> None:
        if isinstance(event, MessageUpdate) and event.delta.type == at:
            token.cancel()

    rec = await run_recorded(["go"], context, config, cancel=token, on_event=on_event)
    check(rec)
    assert validate_transcript(context.messages) == []
    assert len(rec.of_type(AgentEnd)) == 1 and rec.end.reason == "cancelled"
    assistant = context.messages[1]
    assert isinstance(assistant, AssistantMessage) and assistant.stop_reason == "aborted"
    assert assistant.text.startswith("A")
    # The stream really was cut short: mid-text, or before the second call arrived.
    if at == "text":
        assert assistant.text != slow.text and not assistant.tool_calls
    else:
        assert assistant.text == slow.text and len(assistant.tool_calls) < 2
    # Any call that made it into the message was answered with "Cancelled".
    results = [m for m in context.messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == [c.id for c in assistant.tool_calls]
    assert all(r.is_error and r.text == "Cancelled" for r in results)
    assert len(fake.requests) == 1
