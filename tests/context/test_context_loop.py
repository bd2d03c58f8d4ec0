"""Compaction inside the loop (contract §4.1 step 4, §4.2, §6), end to end with the
ScriptedProvider reporting a small context window through the policy's override."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AgentMessage,
    AssistantMessage,
    CancellationToken,
    Hooks,
    ProviderError,
    RunHandle,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    agent_loop,
    agent_loop_continue,
    tool,
)
from treadle.context import CompactionPolicy, TokenCounter, estimate_tokens, validate_transcript
from treadle.context.compaction import SUMMARY_PREFIX
from treadle.loop import compact_context
from treadle.loop._context_guard import FLOOR_KEY
from treadle.loop._streaming import OVERFLOW_RETRIES
from treadle.providers.base import ModelRequest
from treadle.testing import ScriptedProvider
from treadle.types import (
    CompactionEnd,
    CompactionStart,
    MessageEnd,
    MessageStart,
    ProviderRetry,
    TurnEnd,
)

pytestmark = pytest.mark.anyio

SUMMARY = "The user asked for many files to be read; all reads succeeded."


@tool
def read(n: int) -> str:
    """Read file number n."""
    return f"file {n}: " + "lorem ipsum dolor sit amet " * 24


class Agentic:
    """Calls ``read`` for ``turns`` turns, then answers; writes a summary when asked."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.calls = 0
        self.summaries = 0

    def __call__(self, request: ModelRequest) -> AssistantMessage:
        if not request.tools:  # the summary call offers no tools
            self.summaries += 1
            return AssistantMessage(content=SUMMARY)
        self.calls += 1
        if self.calls > self.turns:
            return AssistantMessage(content="All files read.")
        n = self.calls
        return AssistantMessage(
            content=[
                TextContent(text=f"Reading {n}."),
                ToolCall(id=f"c{n}", name="read", arguments={"n": n}),
            ]
        )


class Recorder(Hooks):
    def __init__(self, allow: bool = True) -> None:
        self.allow = allow
        self.estimates: list[int] = []
        self.stats: list[dict[str, Any]] = []
        self.errors: list[AssistantMessage] = []

    async def before_compaction(self, run: RunHandle, estimate: int) -> bool:
        self.estimates.append(estimate)
        return self.allow

    async def after_compaction(self, run: RunHandle, stats: dict[str, Any]) -> None:
        self.stats.append(stats)

    async def on_error(self, run: RunHandle, message: AssistantMessage) -> None:
        self.errors.append(message)


async def collect(
    prompts: Sequence[AgentMessage | str] | None,
    context: AgentContext,
    config: AgentLoopConfig,
    cancel: CancellationToken | None = None,
) -> tuple[list[AgentEvent], list[AgentMessage]]:
    send, receive = anyio.create_memory_object_stream[AgentEvent](100_000)
    async with send:
        if prompts is None:
            new = await agent_loop_continue(context, config, send, cancel)
        else:
            new = await agent_loop(prompts, context, config, send, cancel)
    events = []
    async with receive:
        async for event in receive:
            events.append(event)
    return events, new


def policy(**changes: Any) -> CompactionPolicy:
    values: dict[str, Any] = {"context_window": 3000, "tokenizer": None}
    values.update(changes)
    return CompactionPolicy(**values)


def request_tokens(request: ModelRequest) -> int:
    return estimate_tokens(
        request.messages, system_prompt=request.system_prompt, tools=request.tools, encoding=None
    )


async def test_threshold_compaction_events_hooks_and_history() -> None:
    model = Agentic(turns=40)
    provider = ScriptedProvider([model] * 200)
    hooks = Recorder()
    context = AgentContext(system_prompt="Be brief.", tools=[read])
    config = AgentLoopConfig(provider=provider, compaction=policy(), hooks=[hooks])
    events, new = await collect(["Read the files."], context, config)

    starts = [e for e in events if isinstance(e, CompactionStart)]
    ends = [e for e in events if isinstance(e, CompactionEnd)]
    assert starts and len(starts) == len(ends) == len(hooks.stats) == len(hooks.estimates)
    assert model.summaries >= 1
    for start, end, estimate, stats in zip(starts, ends, hooks.estimates, hooks.stats, strict=True):
        assert start.reason == end.reason == "threshold"
        assert start.tokens_before == end.tokens_before == estimate > 0.9 * 3000
        assert end.tokens_after < end.tokens_before and end.messages_after < end.messages_before
        assert stats["tokens_after"] == end.tokens_after and stats["strategy"] == end.strategy
    assert any("summarize" in e.strategy for e in ends)
    summarised = next(e for e in ends if e.summary)
    assert summarised.summary == SUMMARY and summarised.usage.total_tokens > 0

    # every request the model saw fit the window
    for request in provider.requests:
        if request.tools:
            assert request_tokens(request) <= 0.95 * 3000

    # the history is valid, holds the summary and ends with the answer
    assert validate_transcript(context.messages) == []
    assert any(
        isinstance(m, UserMessage) and m.text.startswith(SUMMARY_PREFIX) for m in context.messages
    )
    assert isinstance(context.messages[-1], AssistantMessage)
    assert context.messages[-1].text == "All files read."
    assert context.messages[0].text == "Read the files."  # type: ignore[union-attr]
    assert context.state[FLOOR_KEY] <= len(context.messages)

    # agent_end.messages: everything this loop appended, as reported (not the compacted view)
    end = events[-1]
    assert end.type == "agent_end" and end.reason == "completed"
    reported = [e.message for e in events if isinstance(e, MessageEnd)]
    assert end.messages == new == reported
    assert len(new) > len(context.messages)
    # the summary calls are part of the turns' usage, and agent_end.usage is their sum
    total = Usage()
    for e in events:
        if isinstance(e, TurnEnd):
            total = total + e.usage
    assert end.usage == total
    summary_tokens = sum(e.usage.total_tokens for e in ends)
    assistant_tokens = sum(m.usage.total_tokens for m in new if isinstance(m, AssistantMessage))
    assert end.usage.total_tokens == assistant_tokens + summary_tokens


async def test_compaction_comes_after_injected_messages_and_before_the_model_call() -> None:
    model = Agentic(turns=30)
    provider = ScriptedProvider([model] * 200)
    context = AgentContext(tools=[read])
    config = AgentLoopConfig(provider=provider, compaction=policy())
    events, _ = await collect(["Read the files."], context, config)
    kinds = [e.type for e in events]
    i = kinds.index("compaction_start")
    assert kinds[i + 1] == "compaction_end"
    assert kinds[i + 2] == "message_start"
    assert isinstance(events[i + 2], MessageStart) and events[i + 2].message.role == "assistant"
    turn_start = max(j for j in range(i) if kinds[j] == "turn_start")
    assert (
        "message_start" not in kinds[turn_start + 1 : i]
        or all(
            e.message.role == "user"  # type: ignore[union-attr]
            for e in events[turn_start + 1 : i]
            if isinstance(e, MessageStart)
        )
    )


async def test_before_compaction_false_skips_it() -> None:
    model = Agentic(turns=20)
    provider = ScriptedProvider([model] * 100)
    hooks = Recorder(allow=False)
    context = AgentContext(tools=[read])
    config = AgentLoopConfig(provider=provider, compaction=policy(fail_at=None), hooks=[hooks])
    events, _ = await collect(["Read the files."], context, config)
    assert hooks.estimates  # asked every turn past the trigger ...
    assert not [e for e in events if isinstance(e, (CompactionStart, CompactionEnd))]
    assert not hooks.stats and model.summaries == 0  # ... and told no each time
    assert events[-1].reason == "completed"  # type: ignore[union-attr]


def _big_history(turns: int = 30) -> list[AgentMessage]:
    history: list[AgentMessage] = [UserMessage.of("Read the files.")]
    for n in range(turns):
        history.append(
            AssistantMessage(content=[ToolCall(id=f"h{n}", name="read", arguments={"n": n})])
        )
        history.append(ToolResultMessage(tool_call_id=f"h{n}", tool_name="read", content="x" * 40))
    history.append(AssistantMessage(content="Done reading."))
    return history


async def test_context_overflow_compacts_once_and_retries() -> None:
    overflow = ProviderError("context_overflow", "maximum context length exceeded", status_code=400)
    provider = ScriptedProvider([overflow, SUMMARY, "Here is the answer."])
    context = AgentContext(messages=_big_history(), tools=[read])
    config = AgentLoopConfig(
        provider=provider, compaction=policy(context_window=100_000), hooks=[Recorder()]
    )
    before = len(context.messages)
    events, new = await collect(["And now?"], context, config)

    kinds = [e.type for e in events]
    start = next(e for e in events if isinstance(e, CompactionStart))
    assert start.reason == "overflow"
    retry = next(e for e in events if isinstance(e, ProviderRetry))
    assert retry.error_kind == "context_overflow" and not retry.discard_partial
    assert (
        kinds.index("compaction_end")
        < kinds.index("provider_retry")
        < kinds.index("message_start", kinds.index("provider_retry"))
    )
    # the failed attempt left no trace in the history; the retry answered
    assert [m.role for m in new] == ["user", "assistant"]
    assert isinstance(new[-1], AssistantMessage) and new[-1].text == "Here is the answer."
    assert not any(isinstance(m, AssistantMessage) and m.error for m in context.messages)
    first, _summary_call, retried = provider.requests
    assert len(retried.messages) < len(first.messages)
    assert len(context.messages) < before + 2
    assert validate_transcript(context.messages) == []
    assert events[-1].reason == "completed"  # type: ignore[union-attr]


async def test_context_overflow_is_retried_a_bounded_number_of_times() -> None:
    overflow = ProviderError("context_overflow", "too long", status_code=400)
    turns: list[ModelRequest] = []

    def answer(request: ModelRequest) -> AssistantMessage:
        if request.purpose == "compaction":
            return AssistantMessage(content=SUMMARY)
        turns.append(request)
        raise overflow  # whatever was dropped, the server says no (and names no sizes)

    provider = ScriptedProvider([answer] * 20)
    context = AgentContext(messages=_big_history(), tools=[read])
    config = AgentLoopConfig(provider=provider, compaction=policy(context_window=100_000))
    events, new = await collect(["And now?"], context, config)
    retries = [e for e in events if isinstance(e, ProviderRetry)]
    assert 1 <= len(retries) <= OVERFLOW_RETRIES
    assert [r.attempt for r in retries] == list(range(1, len(retries) + 1))
    assert len(turns) == len(retries) + 1
    # each retry sent a smaller request than the one before it
    sizes = [len(r.messages) for r in turns]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
    assert isinstance(new[-1], AssistantMessage) and new[-1].error is not None
    assert new[-1].error.kind == "context_overflow"
    assert "compaction could not shrink the request" in new[-1].error.message
    assert events[-1].reason == "error"  # type: ignore[union-attr]


async def test_context_overflow_without_compaction_is_an_error() -> None:
    overflow = ProviderError("context_overflow", "too long", status_code=400)
    provider = ScriptedProvider([overflow])
    context = AgentContext(messages=_big_history(), tools=[read])
    events, new = await collect(["And now?"], context, AgentLoopConfig(provider=provider))
    assert len(provider.requests) == 1
    assert isinstance(new[-1], AssistantMessage) and new[-1].error is not None
    assert not [e for e in events if isinstance(e, (CompactionStart, ProviderRetry))]


async def test_context_overflow_that_compaction_cannot_help() -> None:
    overflow = ProviderError("context_overflow", "too long", status_code=400)
    provider = ScriptedProvider([overflow])
    context = AgentContext()
    config = AgentLoopConfig(provider=provider, compaction=policy(context_window=100_000))
    events, new = await collect(["hi"], context, config)
    assert len(provider.requests) == 1  # nothing to compact: no summary call, no retry
    assert [e.type for e in events if e.type.startswith("compaction")] == [
        "compaction_start",
        "compaction_end",
    ]
    assert not [e for e in events if isinstance(e, ProviderRetry)]
    assert isinstance(new[-1], AssistantMessage) and new[-1].error is not None
    assert new[-1].error.kind == "context_overflow"


class FailOnErrorReply(Hooks):
    async def on_message(self, run: RunHandle, message: Any) -> None:
        if isinstance(message, AssistantMessage) and message.stop_reason == "error":
            raise RuntimeError("the store is down")


async def test_a_hook_failing_on_the_overflow_reply_still_closes_its_pair() -> None:
    # found by the simulation (seed 9100101): the reply the guard records instead of calling
    # the model got its message_start but no message_end when an on_message hook failed
    provider = ScriptedProvider(["never"])
    context = AgentContext(tools=[read])
    config = AgentLoopConfig(provider=provider, compaction=policy(), hooks=[FailOnErrorReply()])
    events, new = await collect(["x" * 20_000], context, config)
    assert provider.requests == []
    end = events[-1]
    assert end.type == "agent_end" and end.reason == "error"
    assert end.error is not None and end.error.kind == "hook"
    failed = new[-1]
    assert isinstance(failed, AssistantMessage) and failed.stop_reason == "error"
    kinds = [e.type for e in events]
    start = kinds.index("message_start", kinds.index("message_end") + 1)  # the reply's
    assert kinds[start : start + 3] == ["message_start", "message_end", "turn_end"]
    assert validate_transcript(context.messages) == []


async def test_hard_limit_fails_the_turn_without_calling_the_model() -> None:
    provider = ScriptedProvider(["never"])
    hooks = Recorder()
    context = AgentContext(tools=[read])
    config = AgentLoopConfig(provider=provider, compaction=policy(), hooks=[hooks])
    events, new = await collect(["x" * 20_000], context, config)  # ~5000 tokens, one group
    assert provider.requests == []
    end = events[-1]
    assert end.type == "agent_end" and end.reason == "error"
    assert end.error is not None and end.error.kind == "context_overflow"
    assert [m.role for m in new] == ["user", "assistant"]
    failed = new[-1]
    assert isinstance(failed, AssistantMessage) and failed.stop_reason == "error"
    assert failed.error is not None and "the model was not called" in failed.error.message
    assert hooks.errors == [failed]
    kinds = [e.type for e in events]
    assert kinds.count("turn_start") == kinds.count("turn_end") == 1
    assert "compaction_start" in kinds  # compaction was tried first
    assert validate_transcript(context.messages) == []


async def test_no_hard_limit_when_disabled() -> None:
    provider = ScriptedProvider(["ok"])
    context = AgentContext()
    config = AgentLoopConfig(provider=provider, compaction=policy(fail_at=None))
    events, _ = await collect(["x" * 20_000], context, config)
    assert len(provider.requests) == 1 and events[-1].reason == "completed"  # type: ignore[union-attr]


async def test_stale_usage_after_a_compaction_does_not_fail_the_turn() -> None:
    # A restored session: the last assistant message reports the usage of a history that
    # was compacted since. Counting shows the history is small, so the run goes on.
    history: list[AgentMessage] = [
        UserMessage.of("hello"),
        AssistantMessage(content="hi", usage=Usage(input=2990, output=10, total_tokens=3000)),
    ]
    provider = ScriptedProvider(["fine"])
    context = AgentContext(messages=history)
    config = AgentLoopConfig(provider=provider, compaction=policy())
    events, _new = await collect(["still there?"], context, config)
    assert len(provider.requests) == 1 and events[-1].reason == "completed"  # type: ignore[union-attr]
    end = next(e for e in events if isinstance(e, CompactionEnd))
    # nothing changed: the event claims no savings (the estimate was off, not the history)
    assert end.strategy == "" and end.tokens_after == end.tokens_before
    assert end.messages_after == end.messages_before


async def test_compaction_is_remembered_across_runs() -> None:
    model = Agentic(turns=25)
    provider = ScriptedProvider([model] * 200)
    context = AgentContext(tools=[read])
    config = AgentLoopConfig(provider=provider, compaction=policy())
    await collect(["Read the files."], context, config)
    floor = context.state[FLOOR_KEY]
    assert isinstance(floor, int) and 0 < floor <= len(context.messages)
    model.calls, model.turns = 0, 0  # the next run answers at once
    events, _ = await collect(["Thanks."], context, config)
    assert events[-1].reason == "completed"  # type: ignore[union-attr]


def _spy_tokenising(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    tokenised: list[int] = []
    original = TokenCounter.message

    def spy(self: TokenCounter, message: AgentMessage) -> int:
        tokenised.append(id(message))
        return original(self, message)

    monkeypatch.setattr(TokenCounter, "message", spy)
    return tokenised


async def test_token_counting_is_incremental_across_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenised = _spy_tokenising(monkeypatch)
    model = Agentic(turns=120)
    provider = ScriptedProvider([model] * 400)
    context = AgentContext(tools=[read])
    # past the warning from the start (so every turn estimates exactly), never compacting
    watchful = policy(context_window=1_000_000, warn_at=0.0001)
    config = AgentLoopConfig(provider=provider, compaction=watchful)
    _, new = await collect(["Read the files."], context, config)
    assert len(new) == 1 + 120 * 2 + 1
    # each message is tokenised once at most, however long the history grows: a turn costs
    # O(new messages), not O(history)
    assert 120 <= len(tokenised) <= len(new)
    assert len(set(tokenised)) == len(tokenised)


async def test_far_below_the_window_nothing_is_tokenised(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenised = _spy_tokenising(monkeypatch)
    provider = ScriptedProvider([Agentic(turns=30)] * 100)
    config = AgentLoopConfig(provider=provider, compaction=policy(context_window=1_000_000))
    _, new = await collect(["Read the files."], AgentContext(tools=[read]), config)
    assert len(new) == 62
    assert tokenised == []  # bounded by byte lengths (first turn) and reported usage


def test_short_runs_never_load_tiktoken() -> None:
    code = (
        "import sys, anyio\n"
        "from treadle import AgentContext, AgentLoopConfig, agent_loop\n"
        "from treadle.testing import ScriptedProvider\n"
        "config = AgentLoopConfig(provider=ScriptedProvider(['hi', 'again']), compaction=True)\n"
        "context = AgentContext(system_prompt='Be brief.')\n"
        "anyio.run(agent_loop, ['hello'], context, config)\n"
        "anyio.run(agent_loop, ['more'], context, config)\n"
        "assert 'tiktoken' not in sys.modules, 'tiktoken was loaded'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


async def test_compaction_policy_forms() -> None:
    for value in (True, {"context_window": 3000, "tokenizer": None}):
        provider = ScriptedProvider([Agentic(turns=30)] * 200)
        context = AgentContext(tools=[read])
        events, _ = await collect(
            ["go"], context, AgentLoopConfig(provider=provider, compaction=value)
        )
        assert events[-1].reason == "completed"  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="compaction"):
        await agent_loop(["go"], AgentContext(), AgentLoopConfig(provider=provider, compaction=3))


class SlowSummary:
    """A provider whose summary call hangs until cancelled."""

    name = "slow"
    model = "slow-1"

    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner = inner
        self.summary_started = anyio.Event()

    async def stream(self, request: ModelRequest, *, cancel: Any = None) -> Any:
        if not request.tools:
            self.summary_started.set()
            await anyio.sleep_forever()
        async for event in self.inner.stream(request, cancel=cancel):
            yield event


async def test_cancel_during_the_summary_call() -> None:
    provider = SlowSummary(ScriptedProvider([Agentic(turns=40)] * 200))
    context = AgentContext(tools=[read])
    config = AgentLoopConfig(provider=provider, compaction=policy())
    token = CancellationToken()
    result: list[Any] = []

    async def run() -> None:
        result.append(await collect(["Read the files."], context, config, token))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await provider.summary_started.wait()
        token.cancel("immediate")

    events, _new = result[0]
    kinds = [e.type for e in events]
    assert kinds.count("compaction_start") == kinds.count("compaction_end")
    assert events[-1].reason == "cancelled"
    assert validate_transcript(context.messages) == []
    assert not any(
        isinstance(m, UserMessage) and m.text.startswith(SUMMARY_PREFIX) for m in context.messages
    )
    assert kinds.count("turn_start") == kinds.count("turn_end")


async def test_compact_on_demand_then_carry_on() -> None:
    model = Agentic(turns=8)
    provider = ScriptedProvider([model] * 100)
    hooks = Recorder()
    context = AgentContext(system_prompt="Be brief.", tools=[read])
    config = AgentLoopConfig(
        provider=provider, compaction=policy(context_window=100_000), hooks=[hooks]
    )
    await collect(["Read the files."], context, config)
    before = list(context.messages)
    assert not hooks.stats  # far below the window: no automatic compaction

    send, receive = anyio.create_memory_object_stream[AgentEvent](100)
    async with send:
        result = await compact_context(context, config, events=send)
    events = [e async for e in receive]
    assert result is not None and "summarize" in result.strategies
    assert [e.type for e in events] == ["compaction_start", "compaction_end"]
    assert events[0].reason == "manual"  # type: ignore[union-attr]
    assert hooks.stats[-1]["strategy"] == result.strategy
    assert len(context.messages) < len(before)
    assert context.messages[0] is before[0] and context.messages[-1] is before[-1]
    assert context.state[FLOOR_KEY] == len(context.messages)
    assert validate_transcript(context.messages) == []
    assert result.usage.total_tokens > 0

    # the next run does not mistake the pre-compaction usage for the history's size
    model.calls, model.turns = 0, 0
    events, _ = await collect(["Thanks."], context, config)
    assert not [e for e in events if isinstance(e, CompactionStart)]
    assert events[-1].reason == "completed"  # type: ignore[union-attr]


async def test_compact_on_demand_vetoed_by_a_hook() -> None:
    context = AgentContext(messages=_big_history())
    config = AgentLoopConfig(provider=ScriptedProvider([]), hooks=[Recorder(allow=False)])
    assert await compact_context(context, config) is None
    assert len(context.messages) == len(_big_history())
