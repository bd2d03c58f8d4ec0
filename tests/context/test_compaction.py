"""Compaction strategies: tool calls stay with their results, the transcript stays valid,
the input is never modified; plus a property test over random histories."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treadle import (
    AgentMessage,
    AssistantMessage,
    ProviderError,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from treadle.context import (
    CompactionPolicy,
    Summarize,
    TrimToolOutputs,
    TruncateOldest,
    compact,
    message_groups,
    validate_transcript,
)
from treadle.context.compaction import SUMMARY_PREFIX, TRUNCATION_NOTE
from treadle.providers.base import ModelRequest, StreamDone, StreamEvent
from treadle.types import ExtensionMessage


class Summariser:
    """A provider that answers every request with a short summary (or fails)."""

    def __init__(self, text: str = "They discussed several steps.", fail: str | None = None):
        self.name = "summariser"
        self.model = "sum-1"
        self.text = text
        self.fail = fail
        self.requests: list[ModelRequest] = []

    async def stream(
        self, request: ModelRequest, *, cancel: Any = None
    ) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        if self.fail is not None:
            raise ProviderError(self.fail, "the summary model is down")  # type: ignore[arg-type]
        await anyio.lowlevel.checkpoint()
        usage = Usage(input=100, output=20, total_tokens=120)
        yield StreamDone(message=AssistantMessage(content=self.text, usage=usage))


def user(text: str) -> UserMessage:
    return UserMessage.of(text)


def tool_turn(n: int, size: int = 400, calls: int = 1, text: str = "") -> list[AgentMessage]:
    ids = [f"call_{n}_{k}" for k in range(calls)]
    content: list[Any] = [TextContent(text=text)] if text else []
    content += [ToolCall(id=i, name="read", arguments={"n": n}) for i in ids]
    out: list[AgentMessage] = [AssistantMessage(content=content, stop_reason="tool_use")]
    for i in ids:
        out.append(
            ToolResultMessage(
                tool_call_id=i, tool_name="read", content=f"{i}: " + "x" * size, details={"i": i}
            )
        )
    return out


def long_history(turns: int = 30, size: int = 400) -> list[AgentMessage]:
    history: list[AgentMessage] = [user("Please read all the files."), *tool_turn(0, size)]
    for n in range(1, turns):
        if n % 7 == 0:
            history.append(user(f"Also look at part {n}."))
        history.extend(tool_turn(n, size))
    history.append(AssistantMessage(content="All read."))
    return history


def policy(**changes: Any) -> CompactionPolicy:
    base: dict[str, Any] = {"context_window": 4000, "tokenizer": None}
    base.update(changes)
    return CompactionPolicy(**base)


def call_ids(messages: Sequence[AgentMessage]) -> list[str]:
    return [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]


def result_ids(messages: Sequence[AgentMessage]) -> list[str]:
    return [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]


def test_groups_keep_calls_with_results() -> None:
    history = [user("a"), *tool_turn(1, calls=2), ExtensionMessage(kind="x"), user("b")]
    assert message_groups(history) == [(0, 1), (1, 5), (5, 6)]
    assert message_groups([]) == []


@pytest.mark.anyio
async def test_trim_cuts_old_outputs_and_says_how_much() -> None:
    history = [user("go"), *tool_turn(1, size=20_000), *tool_turn(2, size=20_000), user("next")]
    result = await compact(
        history,
        policy=policy(context_window=12_000, strategies=[TrimToolOutputs()]),
        reason="threshold",
    )
    assert result.strategies == ("trim_tool_outputs",)
    trimmed = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert len(trimmed) == 2
    first = trimmed[0]
    assert first.text.startswith("call_1_0: xxx")
    assert "characters (about" in first.text and "were cut to save context" in first.text
    assert first.text.endswith("x")  # the tail is kept
    assert first.details == {"i": "call_1_0"} and first.tool_call_id == "call_1_0"
    assert result.tokens_after <= result.target < result.tokens_before
    assert validate_transcript(result.messages) == []
    assert history[2].text.endswith("x" * 100)  # the input was not modified


@pytest.mark.anyio
async def test_trim_spares_recent_outputs_when_old_ones_suffice() -> None:
    history = [user("go")]
    for n in range(6):
        history += tool_turn(n, size=6000)
    result = await compact(
        history,
        policy=policy(context_window=10_000, strategies=[TrimToolOutputs()]),
        reason="threshold",
    )
    assert result.changed
    assert result.messages[-1] is history[-1]  # the latest output is intact


@pytest.mark.anyio
async def test_summarize_keeps_first_exchange_and_recent_turns() -> None:
    history = long_history()
    summariser = Summariser()
    result = await compact(
        history,
        policy=policy(strategies=[Summarize()]),
        provider=summariser,
        model="sum-1",
        system_prompt="You are careful.",
        reason="threshold",
    )
    assert result.strategies == ("summarize",)
    out = result.messages
    # the first exchange, verbatim (same objects)
    assert out[0] is history[0] and out[1] is history[1] and out[2] is history[2]
    # then the summary, as one user message
    summary = out[3]
    assert isinstance(summary, UserMessage) and summary.text.startswith(SUMMARY_PREFIX)
    assert summary.text.endswith("They discussed several steps.")
    assert result.summary == "They discussed several steps."
    # then the most recent turns, verbatim and in order
    tail = out[4:]
    assert tail == history[len(history) - len(tail) :]
    assert all(a is b for a, b in zip(tail, history[len(history) - len(tail) :], strict=True))
    assert validate_transcript(out) == []
    assert result.tokens_after < result.tokens_before
    # the summary call: the policy's prompt, no tools, the middle of the conversation
    request = summariser.requests[0]
    assert request.system_prompt == CompactionPolicy().summary_prompt
    assert request.tools == [] and len(request.messages) == 1
    assert "Result of read" in request.messages[0].text  # type: ignore[union-attr]
    assert result.usage.total_tokens == 120 * len(summariser.requests)


@pytest.mark.anyio
async def test_summarize_in_chunks_when_the_middle_is_large() -> None:
    history = long_history(turns=80, size=2000)
    summariser = Summariser()
    result = await compact(
        history, policy=policy(strategies=[Summarize()]), provider=summariser, reason="threshold"
    )
    assert result.changed and len(summariser.requests) > 1
    assert "The summary so far" in summariser.requests[1].messages[0].text  # type: ignore[union-attr]
    assert result.usage.total_tokens == 120 * len(summariser.requests)


@pytest.mark.anyio
async def test_summary_provider_from_the_policy() -> None:
    main, own = Summariser("main"), Summariser("own summary")
    result = await compact(
        long_history(),
        policy=policy(summary_provider=own, summary_model="small", strategies=[Summarize()]),
        provider=main,
        model="big",
        reason="threshold",
    )
    assert result.summary == "own summary" and not main.requests
    assert own.requests[0].model == "small"


@pytest.mark.anyio
async def test_failed_summary_falls_through_to_truncation() -> None:
    history = long_history()
    result = await compact(
        history, policy=policy(), provider=Summariser(fail="server"), reason="threshold"
    )
    assert "summarize" not in result.strategies and "truncate_oldest" in result.strategies
    assert result.tokens_after <= result.target
    assert validate_transcript(result.messages) == []


@pytest.mark.anyio
async def test_truncate_keeps_the_newest_group_and_marks_the_cut() -> None:
    history = long_history()
    result = await compact(
        history, policy=policy(strategies=[TruncateOldest()], keep_first=0), reason="threshold"
    )
    out = result.messages
    assert result.strategies == ("truncate_oldest",)
    assert isinstance(out[0], UserMessage)
    removed = len(history) - (len(out) - 1)
    assert out[0].text == TRUNCATION_NOTE.format(count=removed)
    assert out[-1] is history[-1]
    assert result.tokens_after <= result.target
    assert validate_transcript(out) == []
    assert set(call_ids(out)) == set(result_ids(out))


@pytest.mark.anyio
async def test_truncate_keeps_the_first_exchange_while_it_can() -> None:
    history = long_history()
    result = await compact(history, policy=policy(strategies=[TruncateOldest()]), reason="x")
    out = result.messages
    assert out[0] is history[0] and out[1] is history[1]
    assert out[3].text.startswith("[") and "removed" in out[3].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_nothing_to_do_under_the_target() -> None:
    history = [user("hi"), AssistantMessage(content="hello")]
    result = await compact(history, policy=policy(), reason="threshold")
    assert not result.changed and result.messages == history
    assert result.tokens_after == result.tokens_before


@pytest.mark.anyio
async def test_manual_compaction_summarises_under_the_target() -> None:
    history = long_history(turns=12, size=50)
    summariser = Summariser()
    result = await compact(
        history, policy=policy(context_window=100_000, keep_recent=200), provider=summariser
    )
    assert result.strategies == ("summarize",) and result.reason == "manual"
    assert len(result.messages) < len(history)


@pytest.mark.anyio
async def test_extension_messages_survive() -> None:
    history = long_history()
    note = ExtensionMessage(kind="app", data={"k": 1})
    history.insert(10, note)
    result = await compact(history, policy=policy(), provider=Summariser(), reason="threshold")
    assert any(m is note for m in result.messages)


@pytest.mark.anyio
async def test_suspended_history_keeps_pending_calls() -> None:
    history = long_history()
    history.append(user("delete it"))
    history.append(
        AssistantMessage(content=[ToolCall(id="pending", name="rm")], stop_reason="tool_use")
    )
    result = await compact(history, policy=policy(), provider=Summariser(), reason="threshold")
    assert result.messages[-1] is history[-1]
    assert validate_transcript(result.messages, allow_pending=["pending"]) == []


@pytest.mark.anyio
async def test_cancelled_summary_changes_nothing() -> None:
    history = long_history()
    result = await compact(
        history, policy=policy(), provider=Summariser(fail="cancelled"), reason="threshold"
    )
    assert result.cancelled and not result.changed and result.messages == history


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="compact_to"):
        CompactionPolicy(compact_at=0.8, compact_to=0.85)
    with pytest.raises(ValueError, match="fail_at"):
        CompactionPolicy(compact_at=0.9, fail_at=0.85)
    with pytest.raises(ValueError, match="not a compaction strategy"):
        CompactionPolicy(strategies=["summarize"])
    with pytest.raises(ValueError, match="head_tokens"):
        TrimToolOutputs(max_tokens=100, head_tokens=80, tail_tokens=40)
    assert CompactionPolicy().recent_budget(1000) == 400
    assert CompactionPolicy(keep_recent=3000).recent_budget(1000) == 3000


# ---- property test ----


@st.composite
def histories(draw: st.DrawFn) -> list[AgentMessage]:
    history: list[AgentMessage] = [user("task " + "t" * draw(st.integers(0, 3000)))]
    n_turns = draw(st.integers(0, 25))
    for n in range(n_turns):
        kind = draw(st.sampled_from(["tools", "tools", "text", "user", "ext"]))
        if kind == "tools":
            calls = draw(st.integers(1, 3))
            sizes = draw(st.lists(st.integers(0, 6000), min_size=calls, max_size=calls))
            ids = [f"c{n}_{k}" for k in range(calls)]
            history.append(
                AssistantMessage(
                    content=[ToolCall(id=i, name="t") for i in ids], stop_reason="tool_use"
                )
            )
            for i, size in zip(ids, sizes, strict=True):
                history.append(ToolResultMessage(tool_call_id=i, tool_name="t", content="r" * size))
        elif kind == "text":
            history.append(AssistantMessage(content="a" * draw(st.integers(1, 2000))))
        elif kind == "user":
            history.append(user("u" * draw(st.integers(1, 2000))))
        else:
            history.append(ExtensionMessage(kind="e", data=n))
    if draw(st.booleans()):
        history.append(AssistantMessage(content=[ToolCall(id="p1", name="t")]))
    return history


STRATEGY_SETS = [
    (TrimToolOutputs(),),
    (Summarize(),),
    (TruncateOldest(),),
    (TrimToolOutputs(), Summarize(), TruncateOldest()),
    (Summarize(), TruncateOldest()),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(),
    window=st.integers(1500, 20_000),
    strategies=st.sampled_from(STRATEGY_SETS),
    keep_recent=st.sampled_from([0.1, 0.4, 0.9, 500]),
    keep_first=st.sampled_from([0.0, 0.2, 1.0]),
    summary_fails=st.booleans(),
    reason=st.sampled_from(["threshold", "manual"]),
)
def test_compaction_properties(
    history: list[AgentMessage],
    window: int,
    strategies: tuple[Any, ...],
    keep_recent: float,
    keep_first: float,
    summary_fails: bool,
    reason: str,
) -> None:
    pending = (
        [c.id for c in history[-1].tool_calls] if isinstance(history[-1], AssistantMessage) else []
    )
    assert validate_transcript(history, allow_pending=pending) == []
    snapshot = [m.model_copy(deep=True) for m in history]
    pol = policy(
        context_window=window,
        strategies=strategies,
        keep_recent=keep_recent,
        keep_first=keep_first,
    )
    provider = Summariser(fail="server" if summary_fails else None)

    async def run() -> Any:
        return await compact(history, policy=pol, provider=provider, reason=reason)

    result = anyio.run(run)
    out = result.messages

    # the input is untouched
    assert history == snapshot
    # the result is a valid transcript: every call has exactly one result, after it
    assert validate_transcript(out, allow_pending=pending) == []
    assert sorted(call_ids(out)) == sorted(result_ids(out) + pending)
    # calls that survive keep their own results (same ids, nothing invented)
    assert set(call_ids(out)) <= set(call_ids(history))
    # the newest group is untouched
    last_start = message_groups(history)[-1][0]
    if not any(isinstance(m, ToolResultMessage) for m in history[last_start:]):
        assert out[-1] is history[-1]
    assert out[-1].role == history[-1].role
    # a history that started with the user still does (extension messages never reach a
    # provider, so they do not count)
    sent = [m for m in out if not isinstance(m, ExtensionMessage)]
    assert isinstance(sent[0], UserMessage)
    # messages that are not new keep their order
    originals = {id(m): i for i, m in enumerate(history)}
    positions = [originals[id(m)] for m in out if id(m) in originals]
    assert positions == sorted(positions)
    # compaction only shrinks
    assert result.tokens_after <= result.tokens_before
    if result.changed:
        assert len(result.strategies) == len(set(result.strategies))
    # with truncation allowed, the result ends under the target, unless all that is left is
    # the truncation note, this compaction's summary and the newest group
    if TruncateOldest() in strategies and result.tokens_after > result.target:
        assert len(message_groups(out)) <= 3
