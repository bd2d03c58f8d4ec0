"""Eager tool calls (docs/loop.md "Eager tools", contract §5): a call to an ``eager`` tool
starts as soon as its block is complete, while the model still streams; every contract
guarantee holds. On asyncio and trio."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from harness import Recorded, check, results_of, run_recorded

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    Allow,
    Ask,
    AssistantMessage,
    CancellationToken,
    Deny,
    ExecutionLimits,
    Hooks,
    RunHandle,
    TextContent,
    ToolCall,
    ToolContext,
    Usage,
    tool,
)
from treadle.loop import RetryPolicy, ToolExecution
from treadle.providers import ProviderError, StreamDone, StreamStart
from treadle.testing import ScriptedProvider
from treadle.tools import ApprovalRequired, TaskComplete
from treadle.types import (
    MessageEnd,
    ProviderRetry,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolExecutionEnd,
    ToolExecutionStart,
)

pytestmark = pytest.mark.anyio

DISCARDED = "Discarded: the model's answer this call came from was not kept"


# ---------------------------------------------------------------- a provider with gates


class Gated:
    """A provider playing one list of steps per call: stream events are yielded, an
    ``anyio.Event`` is waited for (the model keeps streaming only once it is set: proof
    that a tool ran meanwhile), an exception is raised. A plain string is a text answer."""

    name = "gated"
    model = "gated-model"

    def __init__(self, *attempts: Sequence[Any] | str) -> None:
        self.attempts = list(attempts)
        self.requests: list[Any] = []

    async def stream(self, request: Any, *, cancel: Any = None) -> Any:
        self.requests.append(request)
        steps = self.attempts[len(self.requests) - 1]
        if isinstance(steps, str):
            steps = [*text(0, steps), done(TextContent(text=steps))]
        yield StreamStart(model=self.model)
        for step in steps:
            if isinstance(step, anyio.Event):
                with anyio.fail_after(5):
                    await step.wait()
            elif isinstance(step, BaseException):
                raise step
            else:
                await anyio.lowlevel.checkpoint()
                yield step


def streamed_call(index: int, cid: str, name: str, **arguments: Any) -> list[Any]:
    raw = json.dumps(arguments)
    half = len(raw) // 2
    return [
        ToolCallStart(index=index, id=cid, name=name),
        ToolCallDelta(index=index, arguments=raw[:half]),
        ToolCallDelta(index=index, arguments=raw[half:]),
        ToolCallEnd(index=index, tool_call=ToolCall(id=cid, name=name, arguments=arguments)),
    ]


def text(index: int, value: str) -> list[Any]:
    return [TextDelta(index=index, text=word) for word in value.split(" ")]


def done(*content: Any) -> StreamDone:
    calls = any(isinstance(c, ToolCall) for c in content)
    return StreamDone(
        message=AssistantMessage(
            content=list(content),
            stop_reason="tool_use" if calls else "stop",
            model=Gated.model,
            provider=Gated.name,
            usage=Usage(input=5, output=5, total_tokens=10),
        )
    )


def tc(cid: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=arguments)


def index_of(rec: Recorded, predicate: Any) -> int:
    return next(i for i, e in enumerate(rec.events) if predicate(e))


def assistant_end(rec: Recorded, nth: int = 0) -> int:
    found = [
        i
        for i, e in enumerate(rec.events)
        if isinstance(e, MessageEnd) and e.message.role == "assistant"
    ]
    return found[nth]


def start_of(rec: Recorded, cid: str) -> int:
    return index_of(rec, lambda e: isinstance(e, ToolExecutionStart) and e.tool_call_id == cid)


def ends_of(rec: Recorded, cid: str) -> list[ToolExecutionEnd]:
    return [e for e in rec.of_type(ToolExecutionEnd) if e.tool_call_id == cid]


# ---------------------------------------------------------------- tools


def gate_tools() -> tuple[Any, dict[str, anyio.Event]]:
    """An eager tool ``fetch(key)`` that sets ``started[key]`` and returns at once."""
    started: dict[str, anyio.Event] = {k: anyio.Event() for k in ("a", "b", "c")}

    @tool(eager=True)
    async def fetch(key: str) -> str:
        """Fetch a value."""
        started[key].set()
        return f"value of {key}"

    return fetch, started


# ---------------------------------------------------------------- starts early


async def test_an_eager_call_runs_while_the_model_is_still_streaming() -> None:
    fetch, started = gate_tools()
    provider = Gated(
        [
            *streamed_call(0, "a", "fetch", key="a"),
            started["a"],  # the model streams on only once the tool has run
            *text(1, "while that runs, more words"),
            done(tc("a", "fetch", key="a"), TextContent(text="while that runs, more words")),
        ],
        "all done",
    )
    rec = await run_recorded(
        ["go"], AgentContext(tools=[fetch]), AgentLoopConfig(provider=provider)
    )
    check(rec)
    assert rec.end.reason == "completed"
    assert start_of(rec, "a") < assistant_end(rec)
    assert results_of(rec.after)["a"].text == "value of a"
    # the start comes right after the update carrying the call's tool_call_end
    i = start_of(rec, "a")
    update = rec.events[i - 1]
    assert update.type == "message_update" and update.delta.type == "tool_call_end"


async def test_eager_works_without_an_event_stream() -> None:
    fetch, started = gate_tools()
    provider = Gated(
        [
            *streamed_call(0, "a", "fetch", key="a"),
            started["a"],
            done(tc("a", "fetch", key="a")),
        ],
        "ok",
    )
    from treadle import agent_loop

    context = AgentContext(tools=[fetch])
    messages = await agent_loop("go", context, AgentLoopConfig(provider=provider))
    assert [m.role for m in messages] == ["user", "assistant", "tool_result", "assistant"]


async def test_only_eager_tools_start_early() -> None:
    fetch, started = gate_tools()

    @tool(idempotent=True)
    async def slow_lookup(key: str) -> str:
        """Not eager."""
        return key

    provider = Gated(
        [
            *streamed_call(0, "a", "slow_lookup", key="x"),
            *streamed_call(1, "b", "fetch", key="b"),
            started["b"],
            done(tc("a", "slow_lookup", key="x"), tc("b", "fetch", key="b")),
        ],
        "ok",
    )
    rec = await run_recorded(
        ["go"], AgentContext(tools=[fetch, slow_lookup]), AgentLoopConfig(provider=provider)
    )
    check(rec)
    assert start_of(rec, "b") < assistant_end(rec) < start_of(rec, "a")
    assert [m.tool_call_id for m in rec.after if m.role == "tool_result"] == ["a", "b"]


# ---------------------------------------------------------------- order


async def test_out_of_order_completion_keeps_the_history_in_call_order() -> None:
    release = {k: anyio.Event() for k in ("a", "b", "c")}
    finished: list[str] = []

    @tool(eager=True)
    async def wait_for(key: str) -> str:
        """Wait for a release."""
        await release[key].wait()
        finished.append(key)
        return f"result {key}"

    class Releaser(Hooks):
        def on_event(self, run: RunHandle, event: AgentEvent) -> None:
            # c ends first, then b, then a: each end releases the one before it
            if isinstance(event, ToolExecutionStart) and event.tool_call_id == "c":
                release["c"].set()
            if isinstance(event, ToolExecutionEnd):
                nxt = {"c": "b", "b": "a"}.get(event.tool_call_id)
                if nxt:
                    release[nxt].set()

    calls = [tc(k, "wait_for", key=k) for k in ("a", "b", "c")]
    provider = ScriptedProvider([AssistantMessage(content=calls), "done"], delay=0.001)
    config = AgentLoopConfig(provider=provider, hooks=[Releaser()])
    rec = await run_recorded(["go"], AgentContext(tools=[wait_for]), config)
    check(rec)
    assert finished == ["c", "b", "a"]
    assert [e.tool_call_id for e in rec.of_type(ToolExecutionEnd)] == ["c", "b", "a"]
    assert [e.tool_call_id for e in rec.of_type(ToolExecutionStart)] == ["a", "b", "c"]
    results = [m for m in rec.after if m.role == "tool_result"]
    assert [m.tool_call_id for m in results] == ["a", "b", "c"]
    assert [m.text for m in results] == ["result a", "result b", "result c"]
    # results join after the assistant message, before the next turn's message
    assert rec.after[1].role == "assistant" and rec.after[-1].role == "assistant"
    first_turn = next(e for e in rec.events if e.type == "turn_end")
    assert [m.tool_call_id for m in first_turn.tool_results] == ["a", "b", "c"]


async def test_results_are_long_done_before_the_message_ends() -> None:
    @tool(eager=True)
    def read(path: str) -> str:  # a sync tool: runs in a worker thread
        """Read a file."""
        return f"contents of {path}"

    calls = [tc("r1", "read", path="a.txt"), tc("r2", "read", path="b.txt")]
    message = AssistantMessage(content=[*calls, TextContent(text="now " * 40)])
    provider = ScriptedProvider([message, "ok"], chunks=40, delay=0.002)
    rec = await run_recorded(["go"], AgentContext(tools=[read]), AgentLoopConfig(provider=provider))
    check(rec)
    end = assistant_end(rec)
    for cid in ("r1", "r2"):
        assert start_of(rec, cid) < end
        assert rec.events.index(ends_of(rec, cid)[0]) < end
    assert results_of(rec.after)["r2"].text == "contents of b.txt"


# ---------------------------------------------------------------- decisions


class Deciding(Hooks):
    def __init__(self, decisions: dict[str, Any]) -> None:
        self.decisions = decisions
        self.seen: list[str] = []

    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Any:
        self.seen.append(call.id)
        return self.decisions.get(call.id)


async def test_hooks_run_once_before_an_eager_start_and_may_change_arguments() -> None:
    fetch, started = gate_tools()
    hooks = Deciding({"a": Allow(arguments={"key": "b"})})
    provider = Gated(
        [*streamed_call(0, "a", "fetch", key="a"), started["b"], done(tc("a", "fetch", key="a"))],
        "ok",
    )
    config = AgentLoopConfig(provider=provider, hooks=[hooks])
    rec = await run_recorded(["go"], AgentContext(tools=[fetch]), config)
    check(rec)
    assert hooks.seen == ["a"]
    assert start_of(rec, "a") < assistant_end(rec)
    assert rec.of_type(ToolExecutionStart)[0].args == {"key": "b"}
    assert results_of(rec.after)["a"].text == "value of b"


async def test_ask_is_never_eager_and_the_handler_runs_after_the_message() -> None:
    fetch, _ = gate_tools()
    seen: list[str] = []

    class Watch(Deciding):
        def on_event(self, run: RunHandle, event: AgentEvent) -> None:
            if isinstance(event, MessageEnd) and event.message.role == "assistant":
                seen.append("assistant message_end")

    hooks = Watch({"a": Ask(), "b": Deny("no b")})

    async def approve(run: RunHandle, call: ToolCall, ask: Ask) -> bool:
        seen.append(f"approve {call.id}")
        return True

    provider = Gated(
        [
            *streamed_call(0, "a", "fetch", key="a"),
            *streamed_call(1, "b", "fetch", key="b"),
            *text(2, "and some words after"),
            done(tc("a", "fetch", key="a"), tc("b", "fetch", key="b")),
        ],
        "ok",
    )
    config = AgentLoopConfig(provider=provider, hooks=[hooks], approval_handler=approve)
    rec = await run_recorded(["go"], AgentContext(tools=[fetch]), config)
    check(rec)
    end = assistant_end(rec)
    assert hooks.seen == ["a", "b"]  # consulted while streaming, once each
    assert seen[:2] == ["assistant message_end", "approve a"]  # the handler comes after
    assert start_of(rec, "a") > end and start_of(rec, "b") > end
    assert results_of(rec.after)["a"].text == "value of a"
    assert results_of(rec.after)["b"].text == "no b" and results_of(rec.after)["b"].is_error


async def test_ask_without_a_handler_suspends_and_the_eager_call_is_not_run() -> None:
    fetch, started = gate_tools()
    hooks = Deciding({"a": Ask()})
    provider = Gated(
        [
            *streamed_call(0, "a", "fetch", key="a"),
            *streamed_call(1, "b", "fetch", key="b"),
            started["b"],
            done(tc("a", "fetch", key="a"), tc("b", "fetch", key="b")),
        ],
    )
    config = AgentLoopConfig(provider=provider, hooks=[hooks])
    rec = await run_recorded(["go"], AgentContext(tools=[fetch]), config)
    check(rec)
    assert rec.end.reason == "suspended" and rec.end.pending_tool_calls == ["a"]
    assert not started["a"].is_set()
    assert results_of(rec.after)["b"].text == "value of b"


async def test_a_failing_hook_on_an_eager_call_ends_the_run_with_an_error() -> None:
    fetch, _ = gate_tools()

    class Broken(Hooks):
        async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Any:
            raise RuntimeError("hook bug")

    provider = Gated(
        [*streamed_call(0, "a", "fetch", key="a"), *text(1, "x y"), done(tc("a", "fetch", key="a"))]
    )
    config = AgentLoopConfig(provider=provider, hooks=[Broken()])
    rec = await run_recorded(["go"], AgentContext(tools=[fetch]), config)
    check(rec)
    assert rec.end.reason == "error" and rec.end.error is not None
    assert rec.end.error.kind == "hook"
    assert results_of(rec.after)["a"].text == "Cancelled"


# ---------------------------------------------------------------- cancellation


def sleeper() -> tuple[Any, dict[str, anyio.Event]]:
    started = {k: anyio.Event() for k in ("a", "b", "c")}

    @tool(eager=True)
    async def hang(key: str) -> str:
        """Never returns."""
        started[key].set()
        await anyio.sleep_forever()
        return "unreachable"

    return hang, started


async def test_an_immediate_cancel_mid_stream_cancels_the_eager_calls() -> None:
    hang, started = sleeper()
    token = CancellationToken()
    never = anyio.Event()
    provider = Gated(
        [
            *streamed_call(0, "a", "hang", key="a"),
            *streamed_call(1, "b", "hang", key="b"),
            started["b"],
            *text(2, "still"),
            never,  # the model is still streaming when the cancel comes
        ]
    )

    def on_event(rec: Recorded, event: AgentEvent) -> None:
        if event.type == "message_update" and event.delta.type == "text":
            token.cancel()

    config = AgentLoopConfig(provider=provider)
    rec = await run_recorded(
        ["go"], AgentContext(tools=[hang]), config, cancel=token, on_event=on_event
    )
    check(rec)
    assert len(rec.of_type(type(rec.end))) == 1 and rec.end.reason == "cancelled"
    assistant = rec.after[1]
    assert assistant.stop_reason == "aborted"
    assert [c.id for c in assistant.tool_calls] == ["a", "b"]
    results = [m for m in rec.after if m.role == "tool_result"]
    assert [(m.tool_call_id, m.text) for m in results] == [("a", "Cancelled"), ("b", "Cancelled")]
    for cid in ("a", "b"):
        assert len(ends_of(rec, cid)) == 1 and start_of(rec, cid) < assistant_end(rec)


async def test_a_finished_eager_call_keeps_its_result_when_the_stream_is_cancelled() -> None:
    fetch, started = gate_tools()
    hang, hung = sleeper()
    token = CancellationToken()
    provider = Gated(
        [
            *streamed_call(0, "a", "fetch", key="a"),
            *streamed_call(1, "b", "hang", key="b"),
            started["a"],
            hung["b"],
            *streamed_call(2, "c", "fetch", key="c")[:2],  # c never completes
            anyio.Event(),
        ]
    )

    def on_event(rec: Recorded, event: AgentEvent) -> None:
        if event.type == "message_update" and event.delta.type == "tool_call_delta":
            if event.delta.index == 2:
                token.cancel()

    rec = await run_recorded(
        ["go"],
        AgentContext(tools=[fetch, hang]),
        AgentLoopConfig(provider=provider),
        cancel=token,
        on_event=on_event,
    )
    check(rec)
    assert rec.end.reason == "cancelled"
    results = results_of(rec.after)
    assert list(results) == ["a", "b"]  # c's block never completed: not in the message
    assert results["a"].text == "value of a" and results["b"].text == "Cancelled"


async def test_an_outer_cancel_mid_stream_still_answers_every_eager_call() -> None:
    hang, started = sleeper()
    provider = Gated(
        [
            *streamed_call(0, "a", "hang", key="a"),
            *streamed_call(1, "b", "hang", key="b"),
            started["a"],
            started["b"],
            anyio.Event(),
        ]
    )

    def on_event(rec: Recorded, event: AgentEvent) -> None:
        if isinstance(event, ToolExecutionStart) and event.tool_call_id == "b":
            assert rec.scope is not None
            rec.scope.cancel()

    rec = await run_recorded(
        ["go"], AgentContext(tools=[hang]), AgentLoopConfig(provider=provider), on_event=on_event
    )
    assert rec.outer_cancelled and rec.returned is None
    check(rec)
    assert rec.end.reason == "cancelled"
    results = [m for m in rec.after if m.role == "tool_result"]
    assert [(m.tool_call_id, m.text) for m in results] == [("a", "Cancelled"), ("b", "Cancelled")]


# ---------------------------------------------------------------- discarded answers


async def test_a_retried_stream_discards_its_eager_results() -> None:
    runs: list[str] = []
    ran = anyio.Event()

    @tool(eager=True)
    async def count(key: str) -> str:
        """Count the runs."""
        runs.append(key)
        ran.set()
        return f"run {len(runs)}"

    provider = Gated(
        [
            *streamed_call(0, "a", "count", key="a"),
            ran,  # the first attempt's call has run...
            *text(1, "half an"),
            ProviderError("server", "boom", provider="gated"),  # ...then the stream fails
        ],
        [
            *streamed_call(0, "a", "count", key="a"),
            *text(1, "a whole answer"),
            done(tc("a", "count", key="a"), TextContent(text="a whole answer")),
        ],
        "ok",
    )
    config = AgentLoopConfig(provider=provider, retry=RetryPolicy(initial_delay_s=0.001))
    rec = await run_recorded(["go"], AgentContext(tools=[count]), config)
    check(rec)
    assert rec.end.reason == "completed"
    assert runs == ["a", "a"]  # eager tools are idempotent: running again is fine
    results = [m for m in rec.after if m.role == "tool_result"]
    assert [(m.tool_call_id, m.text) for m in results] == [("a", "run 2")]
    retry = index_of(rec, lambda e: isinstance(e, ProviderRetry))
    first, second = ends_of(rec, "a")
    assert rec.events.index(first) < retry < rec.events.index(second)
    assert first.result.text == "run 1"  # reported, never in the history


async def test_a_retried_stream_cancels_an_eager_call_still_running() -> None:
    hang, started = sleeper()
    fetch, _ = gate_tools()
    provider = Gated(
        [
            *streamed_call(0, "a", "hang", key="a"),
            started["a"],
            ProviderError("overloaded", "busy", provider="gated"),
        ],
        [*streamed_call(0, "b", "fetch", key="b"), done(tc("b", "fetch", key="b"))],
        "ok",
    )
    config = AgentLoopConfig(provider=provider, retry=RetryPolicy(initial_delay_s=0.001))
    rec = await run_recorded(["go"], AgentContext(tools=[hang, fetch]), config)
    check(rec)
    (end,) = ends_of(rec, "a")
    assert end.result.text == DISCARDED and end.is_error
    assert "a" not in results_of(rec.after)
    assert results_of(rec.after)["b"].text == "value of b"


async def test_a_failed_answer_discards_its_eager_calls() -> None:
    fetch, started = gate_tools()
    hang, hung = sleeper()
    provider = Gated(
        [
            *streamed_call(0, "a", "fetch", key="a"),
            *streamed_call(1, "b", "hang", key="b"),
            started["a"],
            hung["b"],
            ProviderError("bad_request", "nope", provider="gated"),
        ]
    )
    rec = await run_recorded(
        ["go"], AgentContext(tools=[fetch, hang]), AgentLoopConfig(provider=provider)
    )
    check(rec)
    assert rec.end.reason == "error"
    assert not results_of(rec.after)
    assert ends_of(rec, "a")[0].result.text == "value of a"
    assert ends_of(rec, "b")[0].result.text == DISCARDED
    assert rec.events.index(ends_of(rec, "b")[0]) < assistant_end(rec)


# ---------------------------------------------------------------- strategies and limits


@pytest.mark.parametrize("strategy", [ToolExecution.sequential(), ToolExecution.batched(2)])
async def test_eager_applies_to_the_parallel_strategy_only(strategy: ToolExecution) -> None:
    fetch, _ = gate_tools()
    calls = [tc("a", "fetch", key="a"), tc("b", "fetch", key="b")]
    provider = ScriptedProvider([AssistantMessage(content=calls), "ok"])
    config = AgentLoopConfig(provider=provider, tool_execution=strategy)
    rec = await run_recorded(["go"], AgentContext(tools=[fetch]), config)
    check(rec)
    assert start_of(rec, "a") > assistant_end(rec)


async def test_max_tool_calls_bounds_what_starts_early() -> None:
    fetch, _ = gate_tools()
    calls = [tc("a", "fetch", key="a"), tc("b", "fetch", key="b")]
    provider = ScriptedProvider([AssistantMessage(content=calls)])
    config = AgentLoopConfig(provider=provider, limits=ExecutionLimits(max_tool_calls=1))
    rec = await run_recorded(["go"], AgentContext(tools=[fetch]), config)
    check(rec)
    assert start_of(rec, "a") < assistant_end(rec) < start_of(rec, "b")
    assert rec.end.reason == "limit"


async def test_max_concurrency_counts_eager_calls() -> None:
    running = 0
    peak = 0

    @tool(eager=True)
    async def busy(key: str) -> str:
        """Busy."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.01)
        running -= 1
        return key

    @tool
    async def plain(key: str) -> str:
        """Not eager."""
        return await busy.func(key)  # type: ignore[no-any-return]

    calls = [tc("a", "busy", key="a"), tc("b", "busy", key="b"), tc("c", "plain", key="c")]
    provider = ScriptedProvider([AssistantMessage(content=calls), "ok"], delay=0.001)
    config = AgentLoopConfig(
        provider=provider, tool_execution=ToolExecution.parallel(max_concurrency=1)
    )
    rec = await run_recorded(["go"], AgentContext(tools=[busy, plain]), config)
    check(rec)
    assert peak == 1
    assert [m.text for m in rec.after if m.role == "tool_result"] == ["a", "b", "c"]


async def test_a_sequential_tool_waits_for_the_eager_calls() -> None:
    log: list[str] = []

    @tool(eager=True)
    async def read(key: str) -> str:
        """Read."""
        log.append(f"start {key}")
        await anyio.sleep(0.02)
        log.append(f"end {key}")
        return key

    @tool(sequential=True)
    async def write(key: str) -> str:
        """Write, alone."""
        log.append(f"write {key}")
        return key

    calls = [tc("w", "write", key="w"), tc("r", "read", key="r")]
    provider = ScriptedProvider([AssistantMessage(content=calls), "ok"])
    rec = await run_recorded(
        ["go"], AgentContext(tools=[read, write]), AgentLoopConfig(provider=provider)
    )
    check(rec)
    assert log == ["start r", "end r", "write w"]
    assert [m.tool_call_id for m in rec.after if m.role == "tool_result"] == ["w", "r"]


async def test_an_eager_task_complete_ends_the_run() -> None:
    @tool(eager=True)
    async def finish(answer: str) -> str:
        """Finish."""
        raise TaskComplete(answer)

    provider = ScriptedProvider([AssistantMessage(content=[tc("f", "finish", answer="42")])])
    rec = await run_recorded(
        ["go"], AgentContext(tools=[finish]), AgentLoopConfig(provider=provider)
    )
    check(rec)
    assert rec.end.reason == "completed"
    assert rec.after[-1].role == "tool_result" and rec.after[-1].text == "42"


def test_eager_implies_idempotent() -> None:
    @tool(eager=True, retries=2)
    def probe() -> str:
        """Probe."""
        return "ok"

    assert probe.traits.eager and probe.traits.idempotent and probe.traits.retries == 2


# ---------------------------------------------------------------- every await point


def eager_world() -> tuple[AgentContext, AgentLoopConfig, Gated]:
    @tool(eager=True)
    async def look(q: str, ctx: ToolContext[Any]) -> str:
        """Look something up."""
        await ctx.update(f"looking for {q}")
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        return f"result for {q}"

    provider = Gated(
        [  # the first attempt starts A, then fails: A is discarded, the answer retried
            *streamed_call(0, "A", "look", q="a"),
            *text(1, "let me see"),
            ProviderError("server", "flaky", provider="gated"),
        ],
        [
            *streamed_call(0, "A", "look", q="a"),
            *streamed_call(1, "B", "look", q="b"),
            *text(2, "looking both up now"),
            done(tc("A", "look", q="a"), tc("B", "look", q="b"), TextContent(text="x")),
        ],
        "The answer is 42.",
    )
    config = AgentLoopConfig(provider=provider, retry=RetryPolicy(initial_delay_s=0.001))
    return AgentContext(tools=[look]), config, provider


@pytest.mark.parametrize("mode", ["immediate", "after_turn", "outer_scope"])
async def test_cancel_at_every_await_point_with_eager_calls(mode: str) -> None:
    """Cancel when the consumer receives event k, for every k of a run whose first answer
    is retried after an eager call started; the stream has no buffer."""
    context, config, provider = eager_world()
    baseline = await run_recorded(["question"], context, config, buffer=0)
    check(baseline)
    assert baseline.end.reason == "completed" and len(provider.requests) == 3
    assert [e.tool_call_id for e in baseline.of_type(ToolExecutionStart)] == ["A", "A", "B"]
    failures: list[str] = []
    for k in range(len(baseline.events)):
        context, config, provider = eager_world()
        token = CancellationToken()

        def on_event(rec: Recorded, event: Any, k: int = k, token: Any = token) -> None:
            if len(rec.events) - 1 != k:
                return
            if mode == "outer_scope":
                assert rec.scope is not None
                rec.scope.cancel()
            else:
                token.cancel(mode)  # type: ignore[arg-type]

        try:
            with anyio.fail_after(10):
                rec = await run_recorded(
                    ["question"], context, config, cancel=token, on_event=on_event, buffer=0
                )
            check(rec)
            assert rec.end.reason in ("cancelled", "completed")
            ids = [m.tool_call_id for m in context.messages if m.role == "tool_result"]
            assert len(ids) == len(set(ids))
        except Exception as exc:
            failures.append(f"cancel at event {k} ({baseline.events[k].type}): {exc!r}"[:400])
    assert not failures, "\n".join(failures)


async def test_an_eager_call_that_asks_mid_call_waits_for_the_message_before_the_handler() -> None:
    # The tool starts while the model streams and asks a person; the approval handler
    # never runs while the message streams, so it is asked only after message_end.
    asked = anyio.Event()
    seen: list[str] = []

    @tool(eager=True)
    async def fetch(key: str, ctx: ToolContext[Any]) -> str:
        """Fetch a value."""
        if not ctx.approved:
            asked.set()
            raise ApprovalRequired(f"fetch {key}?", {"key": key})
        return f"value of {ctx.saved['key']}"

    async def approve(run: RunHandle, call: ToolCall, ask: Ask) -> bool:
        final = [m for m in run.context.messages if isinstance(m, AssistantMessage)]
        seen.append(f"approve {call.id}: {ask.prompt}, message final: {bool(final)}")
        return True

    provider = Gated(
        [*streamed_call(0, "a", "fetch", key="a"), asked, done(tc("a", "fetch", key="a"))],
        "ok",
    )
    config = AgentLoopConfig(provider=provider, approval_handler=approve)
    rec = await run_recorded(["go"], AgentContext(tools=[fetch]), config)
    check(rec)
    assert start_of(rec, "a") < assistant_end(rec), "it started early"
    assert seen == ["approve a: fetch a?, message final: True"]
    assert results_of(rec.after)["a"].text == "value of a"
