"""The Agent facade: run / stream / run_sync, state, steering, abort, continue_, output."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from agent_support import calls, collect, say, texts, usage, usage_tuple
from pydantic import BaseModel

from treadle import (
    Agent,
    Ask,
    AssistantMessage,
    ExecutionLimits,
    Hooks,
    ModelRequest,
    ProviderError,
    RunHandle,
    ToolContext,
    ToolResultMessage,
    Usage,
    UserMessage,
    tool,
)
from treadle.agent import AgentBusy, AgentOptions, AgentSnapshot, RunFailed
from treadle.context import validate_transcript
from treadle.loop import InputFilter, Pass, Reject, ToolExecution
from treadle.testing import ScriptedProvider
from treadle.types import (
    AgentEnd,
    AgentStart,
    ContinuationKind,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)

pytestmark = pytest.mark.anyio

# ---------------------------------------------------------------- tools used by the tests

TOOL_LOG: list[str] = []


@tool
async def slow(x: str) -> str:
    """Takes a moment."""
    await anyio.sleep(0.02)
    TOOL_LOG.append(f"slow:{x}")
    return f"slow {x}"


@tool
def quick(x: str) -> str:
    """Returns at once."""
    TOOL_LOG.append(f"quick:{x}")
    return f"quick {x}"


@tool
async def hang(x: str) -> str:
    """Would run for a long time; the tests cancel it."""
    await anyio.sleep(10)
    return "never"


@dataclass
class App:
    """An application object handed to tools as ctx.deps."""

    prices: dict[str, float] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)


@tool
def price(item: str, ctx: ToolContext[App]) -> str:
    """Look up a price in the app's table."""
    ctx.deps.seen.append(item)
    return f"{item}: {ctx.deps.prices[item]}"


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    TOOL_LOG.clear()


def idle_and_valid(agent: Agent[Any]) -> None:
    assert not agent.running
    assert validate_transcript(agent.messages) == []


# ---------------------------------------------------------------- run


async def test_run_returns_text_new_messages_usage_cost_and_reason() -> None:
    provider = ScriptedProvider(
        [
            calls(("c1", "quick", {"x": "a"}), u=usage(10, 2, 0.001)),
            say("the answer", usage(30, 5, 0.002)),
        ]
    )
    agent = Agent(provider, tools=[quick])
    result = await agent.run("question")

    assert result.reason == "completed" and result.ok and result.error is None
    assert result.text == "the answer" and str(result) == "the answer"
    assert texts(result.messages) == [
        ("user", "question"),
        ("assistant", ""),
        ("tool_result", "quick a"),
        ("assistant", "the answer"),
    ]
    assert usage_tuple(result.usage) == (40, 7, 47, 0.003)
    assert result.cost_usd == pytest.approx(0.003)
    assert result.messages == agent.messages
    assert usage_tuple(agent.usage) == (40, 7, 47, 0.003)
    assert result.raise_for_error() is result
    assert list(result.usage_by_model) == ["scripted-model"]  # one model answered both turns
    assert usage_tuple(result.usage_by_model["scripted-model"]) == (40, 7, 47, 0.003)


async def test_usage_by_model_splits_a_run_between_models() -> None:
    first = calls(("c1", "quick", {"x": "a"}), u=usage(10, 2, 0.001))
    first.model = "big-1"
    second = say("the answer", usage(30, 5, None))
    second.model = "small-1"
    result = await Agent(ScriptedProvider([first, second]), tools=[quick]).run("question")
    assert {k: usage_tuple(v) for k, v in result.usage_by_model.items()} == {
        "big-1": (10, 2, 12, 0.001),
        "small-1": (30, 5, 35, None),  # a model without a price has no cost
    }


async def test_the_conversation_is_kept_between_runs() -> None:
    provider = ScriptedProvider([say("one", usage(5, 1)), say("two", usage(9, 1))])
    agent = Agent(provider)
    first = await agent.run("first")
    second = await agent.run("second")

    assert texts(second.messages) == [("user", "second"), ("assistant", "two")]
    assert texts(agent.messages) == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second"),
        ("assistant", "two"),
    ]
    # the model saw the earlier exchange
    assert texts(provider.requests[1].messages) == texts(agent.messages)[:3]
    assert usage_tuple(agent.usage) == (14, 2, 16, None)
    assert first.messages == agent.messages[:2]


async def test_a_failed_run_is_reported_not_raised() -> None:
    agent = Agent(ScriptedProvider([ProviderError("auth", "bad key")]))
    result = await agent.run("hi")

    assert result.reason == "error" and not result.ok
    assert result.error is not None and result.error.kind == "auth"
    last = agent.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    with pytest.raises(RunFailed, match="auth"):
        result.raise_for_error()
    idle_and_valid(agent)


# ---------------------------------------------------------------- stream


async def test_stream_yields_typed_events_and_the_result_afterwards() -> None:
    provider = ScriptedProvider(
        [calls(("c1", "quick", {"x": "a"}), u=usage(3, 1)), say("done", usage(4, 1))]
    )
    agent = Agent(provider, tools=[quick])
    events, result = await collect(agent, "go")

    assert isinstance(events[0], AgentStart) and isinstance(events[-1], AgentEnd)
    kinds = [type(e) for e in events]
    assert kinds.count(TurnStart) == kinds.count(TurnEnd) == 2
    assert any(isinstance(e, MessageUpdate) for e in events)
    assert [e.seq for e in events] == sorted({e.seq for e in events})
    end = events[-1]
    assert isinstance(end, AgentEnd) and end.reason == "completed"
    assert end.messages == result.messages == agent.messages
    assert result.text == "done"
    starts = [e for e in events if isinstance(e, ToolExecutionStart)]
    ends = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert [(e.tool_name, e.args) for e in starts] == [("quick", {"x": "a"})]
    assert [e.result.text for e in ends] == ["quick a"]
    idle_and_valid(agent)


async def test_a_slow_consumer_never_loses_an_event() -> None:
    def script() -> ScriptedProvider:
        return ScriptedProvider(
            [
                calls(("c1", "quick", {"x": "a"}), ("c2", "slow", {"x": "b"})),
                say("a fairly long final answer, streamed in pieces"),
            ],
            chunks=8,
        )

    fast_events, _ = await collect(Agent(script(), tools=[quick, slow]), "go")

    slow_agent = Agent(script(), tools=[quick, slow], options=AgentOptions(event_buffer=1))
    slow_events = []
    async with slow_agent.stream("go") as stream:
        async for event in stream:
            slow_events.append(event)
            for _ in range(3):  # a consumer slower than the producer
                await anyio.lowlevel.checkpoint()

    # a lagging consumer gets deltas merged (the default policy): every lifecycle event, in
    # the same order, and the same text once the deltas are put back together
    def lifecycle(events: list[Any]) -> list[str]:
        return [e.type for e in events if e.type != "message_update"]

    def text(events: list[Any]) -> str:
        return "".join(
            e.delta.text for e in events if e.type == "message_update" and e.delta.type == "text"
        )

    assert lifecycle(slow_events) == lifecycle(fast_events)
    assert (
        text(slow_events) == text(fast_events) == "a fairly long final answer, streamed in pieces"
    )
    # seq is stamped at delivery: no gap means nothing was dropped
    assert [e.seq for e in slow_events] == list(
        range(slow_events[0].seq, slow_events[0].seq + len(slow_events))
    )
    assert stream.result is not None and stream.result.reason == "completed"


async def test_events_arrive_while_the_run_is_in_progress() -> None:
    turn_seen = anyio.Event()

    async def answer_after_the_consumer_saw_the_turn(request: ModelRequest) -> AssistantMessage:
        await turn_seen.wait()  # the model call cannot finish before the event was consumed
        return say("live")

    agent = Agent(ScriptedProvider([answer_after_the_consumer_saw_the_turn]))
    with anyio.fail_after(5):  # a guard against a hang, not a timing assertion
        async with agent.stream("go") as stream:
            async for event in stream:
                if isinstance(event, TurnStart):
                    assert not stream.finished and agent.running
                    turn_seen.set()
    assert stream.result is not None and stream.result.text == "live"


async def test_leaving_the_stream_early_aborts_the_run_cleanly() -> None:
    provider = ScriptedProvider(["a long answer that streams slowly", "next"], chunks=10)
    agent = Agent(provider, options=AgentOptions(event_buffer=1))
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, MessageUpdate):
                break

    assert stream.result is not None and stream.result.reason == "cancelled"
    last = agent.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "aborted"
    idle_and_valid(agent)
    assert (await agent.run("again")).text == "next"


async def test_an_exception_in_the_stream_block_leaves_the_agent_usable() -> None:
    agent = Agent(ScriptedProvider(["streamed text here", "later"], chunks=5))
    with pytest.raises(BaseException):  # noqa: B017 - the exact type is the next test's subject
        async with agent.stream("go") as stream:
            async for _ in stream:
                raise KeyError("consumer bug")
    idle_and_valid(agent)
    assert (await agent.run("again")).text == "later"


async def test_an_exception_in_the_stream_block_propagates_unchanged() -> None:
    agent = Agent(ScriptedProvider(["streamed text here"], chunks=5))
    with pytest.raises(KeyError):
        async with agent.stream("go") as stream:
            async for _ in stream:
                raise KeyError("consumer bug")


# ---------------------------------------------------------------- run_sync


def test_run_sync_in_a_plain_script() -> None:
    provider = ScriptedProvider(["first", "second"])
    agent = Agent(provider)
    assert agent.run_sync("one").text == "first"
    assert agent.run_sync("two").text == "second"
    assert texts(agent.messages)[-2:] == [("user", "two"), ("assistant", "second")]
    assert len(provider.requests[1].messages) == 3


def _notebook_cell(agent: Agent[Any], prompt: str) -> str:
    """A plain function, as a notebook cell is: it calls run_sync in the loop's thread."""
    return agent.run_sync(prompt).text


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_run_sync_inside_a_running_event_loop(backend: str) -> None:
    agent = Agent(ScriptedProvider([calls(("c1", "quick", {"x": "n"})), "from the notebook"]))
    agent.context.tools = [quick]
    loop_thread: list[int] = []

    async def cell() -> str:
        loop_thread.append(threading.get_ident())
        return _notebook_cell(agent, "hi")

    assert anyio.run(cell, backend=backend) == "from the notebook"
    assert loop_thread == [threading.get_ident()]  # run_sync was called in the loop thread
    assert texts(agent.messages)[-1] == ("assistant", "from the notebook")
    assert TOOL_LOG == ["quick:n"]
    idle_and_valid(agent)


# ---------------------------------------------------------------- one run at a time


async def wait_running(agent: Agent[Any]) -> None:
    while not agent.running:
        await anyio.lowlevel.checkpoint()


async def test_a_second_run_while_one_is_in_progress_is_a_clear_error() -> None:
    provider = ScriptedProvider(["the first answer, slowly", "after"], chunks=5, delay=0.005)
    agent = Agent(provider)
    results: list[Any] = []

    async def first() -> None:
        results.append(await agent.run("first"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await wait_running(agent)
        with pytest.raises(AgentBusy, match="already running"):
            await agent.run("second")
        with pytest.raises(AgentBusy):
            async with agent.stream("third"):
                pass
        with pytest.raises(AgentBusy):
            agent.reset()
        with pytest.raises(AgentBusy):
            agent.restore(AgentSnapshot())
        with pytest.raises(AgentBusy):
            await agent.continue_()

    assert results[0].reason == "completed"
    assert texts(agent.messages) == [("user", "first"), ("assistant", "the first answer, slowly")]
    assert len(provider.requests) == 1
    idle_and_valid(agent)
    assert (await agent.run("second")).text == "after"


# ---------------------------------------------------------------- steering and follow-ups


async def test_steer_after_batch_is_seen_after_the_tool_batch() -> None:
    provider = ScriptedProvider(
        [calls(("c1", "slow", {"x": "a"}), ("c2", "quick", {"x": "b"})), "ok", "unused"]
    )
    agent = Agent(provider, tools=[slow, quick], options=AgentOptions(event_buffer=1))
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, ToolExecutionStart) and event.tool_name == "slow":
                agent.steer("also this")

    assert texts(agent.messages) == [
        ("user", "go"),
        ("assistant", ""),
        ("tool_result", "slow a"),
        ("tool_result", "quick b"),
        ("user", "also this"),
        ("assistant", "ok"),
    ]
    assert texts(provider.requests[1].messages)[-1] == ("user", "also this")
    idle_and_valid(agent)


async def test_steer_after_batch_does_not_skip_sequential_tools() -> None:
    provider = ScriptedProvider(
        [calls(("c1", "slow", {"x": "a"}), ("c2", "quick", {"x": "b"})), "ok"]
    )
    agent = Agent(
        provider,
        tools=[slow, quick],
        options=AgentOptions(tool_execution=ToolExecution.sequential(), event_buffer=1),
    )
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, ToolExecutionStart) and event.tool_name == "slow":
                agent.steer("also this", mode="after_batch")

    assert TOOL_LOG == ["slow:a", "quick:b"]
    assert [r.text for r in agent.messages if isinstance(r, ToolResultMessage)] == [
        "slow a",
        "quick b",
    ]
    assert texts(agent.messages)[-2:] == [("user", "also this"), ("assistant", "ok")]


async def test_steer_after_batch_does_not_skip_tools_after_an_unknown_one() -> None:
    provider = ScriptedProvider(
        [
            AssistantMessage(
                content=[
                    *say("calling tools").content,
                    *calls(("c1", "no_such_tool", {}), ("c2", "quick", {"x": "b"})).content,
                ]
            ),
            "ok",
        ]
    )
    agent = Agent(
        provider,
        tools=[quick],
        options=AgentOptions(tool_execution=ToolExecution.sequential(), event_buffer=1),
    )
    steered = False
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, MessageUpdate) and not steered:
                steered = True
                agent.steer("by the way", mode="after_batch")

    assert TOOL_LOG == ["quick:b"]


async def test_steer_next_tool_skips_the_rest_of_a_sequential_batch() -> None:
    provider = ScriptedProvider(
        [calls(("c1", "slow", {"x": "a"}), ("c2", "quick", {"x": "b"})), "changed course"]
    )
    agent = Agent(
        provider,
        tools=[slow, quick],
        options=AgentOptions(tool_execution=ToolExecution.sequential(), event_buffer=1),
    )
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, ToolExecutionStart) and event.tool_name == "slow":
                agent.steer("stop, use the cache", mode="next_tool")

    assert TOOL_LOG == ["slow:a"]  # quick never ran
    assert texts(agent.messages) == [
        ("user", "go"),
        ("assistant", ""),
        ("tool_result", "slow a"),
        ("tool_result", "Skipped: a user message arrived"),
        ("user", "stop, use the cache"),
        ("assistant", "changed course"),
    ]
    assert stream.result is not None and stream.result.reason == "completed"
    idle_and_valid(agent)


async def test_steer_interrupt_stops_the_model_call_and_goes_on_with_the_message() -> None:
    provider = ScriptedProvider(
        ["a long answer that is still streaming", "answer to the interruption"], chunks=10
    )
    agent = Agent(provider, options=AgentOptions(event_buffer=1))
    interrupted = False
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, MessageUpdate) and not interrupted:
                interrupted = True
                agent.steer("actually, answer in French", mode="interrupt")

    result = stream.result
    assert result is not None and result.reason == "completed"
    aborted = agent.messages[1]
    assert isinstance(aborted, AssistantMessage) and aborted.stop_reason == "aborted"
    assert aborted.text and "a long answer that is still streaming".startswith(aborted.text)
    assert aborted.text != "a long answer that is still streaming"
    assert texts(agent.messages)[2:] == [
        ("user", "actually, answer in French"),
        ("assistant", "answer to the interruption"),
    ]
    assert result.text == "answer to the interruption"
    assert result.messages == agent.messages
    assert len(provider.requests) == 2
    idle_and_valid(agent)


async def test_steer_interrupt_cancels_running_tools() -> None:
    provider = ScriptedProvider([calls(("c1", "hang", {"x": "a"})), "went on"])
    agent = Agent(provider, tools=[hang], options=AgentOptions(event_buffer=1))
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, ToolExecutionStart):
                agent.steer("never mind", mode="interrupt")

    assert texts(agent.messages) == [
        ("user", "go"),
        ("assistant", ""),
        ("tool_result", "Cancelled"),
        ("user", "never mind"),
        ("assistant", "went on"),
    ]
    assert stream.result is not None and stream.result.reason == "completed"
    idle_and_valid(agent)


async def test_abort_after_an_interrupt_still_stops_the_run() -> None:
    provider = ScriptedProvider(["a long answer that is still streaming", "more"], chunks=10)
    agent = Agent(provider, options=AgentOptions(event_buffer=1))
    done = False
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, MessageUpdate) and not done:
                done = True
                agent.steer("change of plan", mode="interrupt")
                agent.abort()

    assert stream.result is not None and stream.result.reason == "cancelled"
    assert len(provider.requests) == 1


async def test_steering_without_a_run_joins_the_next_prompt() -> None:
    provider = ScriptedProvider(["ok"])
    agent = Agent(provider)
    agent.steer("some context first")
    result = await agent.run("the question")
    assert texts(result.messages) == [
        ("user", "some context first"),
        ("user", "the question"),
        ("assistant", "ok"),
    ]


async def test_steer_rejects_an_unknown_mode() -> None:
    agent = Agent(ScriptedProvider([]))
    with pytest.raises(ValueError, match="mode"):
        agent.steer("x", mode="whenever")  # type: ignore[arg-type]


async def test_follow_up_is_handled_when_the_run_would_end() -> None:
    provider = ScriptedProvider(["first answer", "second answer"])
    agent = Agent(provider, options=AgentOptions(event_buffer=1))
    queued = False
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, MessageUpdate) and not queued:
                queued = True
                agent.follow_up("then summarise")

    result = stream.result
    assert result is not None and result.reason == "completed"
    assert texts(result.messages) == [
        ("user", "go"),
        ("assistant", "first answer"),
        ("user", "then summarise"),
        ("assistant", "second answer"),
    ]
    assert result.text == "second answer"


# ---------------------------------------------------------------- abort


async def test_abort_immediate_cancels_a_running_tool() -> None:
    provider = ScriptedProvider([calls(("c1", "hang", {"x": "a"})), "unused"])
    agent = Agent(provider, tools=[hang], options=AgentOptions(event_buffer=1))
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, ToolExecutionStart):
                agent.abort()

    result = stream.result
    assert result is not None and result.reason == "cancelled"
    assert texts(agent.messages)[-1] == ("tool_result", "Cancelled")
    assert len(provider.requests) == 1
    idle_and_valid(agent)
    assert (await agent.run("again")).text == "unused"  # a fresh run is not cancelled


async def test_abort_immediate_from_a_plain_run_and_another_task() -> None:
    provider = ScriptedProvider([calls(("c1", "hang", {"x": "a"}))])
    started = anyio.Event()

    class Watch(Hooks):
        async def before_tool_call(self, run: RunHandle, call: Any) -> None:
            started.set()

    agent = Agent(provider, tools=[hang], hooks=[Watch()])
    box: list[Any] = []

    async def runner() -> None:
        box.append(await agent.run("go"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(runner)
        await started.wait()
        agent.abort("immediate")

    assert box[0].reason == "cancelled"
    idle_and_valid(agent)


async def test_abort_from_another_thread() -> None:
    holder: dict[str, Agent[Any]] = {}

    @tool
    def stopper() -> str:
        """Runs in a worker thread and aborts the run from there."""
        holder["agent"].abort()
        return "asked to stop"

    provider = ScriptedProvider([calls(("c1", "stopper", {})), "unused"])
    agent = holder["agent"] = Agent(provider, tools=[stopper])
    result = await agent.run("go")

    assert result.reason == "cancelled"
    assert len(provider.requests) == 1
    idle_and_valid(agent)


async def test_abort_after_turn_finishes_the_tools_and_makes_no_further_call() -> None:
    provider = ScriptedProvider([calls(("c1", "slow", {"x": "a"})), "unused"])
    agent = Agent(provider, tools=[slow], options=AgentOptions(event_buffer=1))
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, ToolExecutionStart):
                agent.abort("after_turn")

    assert stream.result is not None and stream.result.reason == "cancelled"
    assert texts(agent.messages)[-1] == ("tool_result", "slow a")
    assert TOOL_LOG == ["slow:a"]
    assert len(provider.requests) == 1
    idle_and_valid(agent)


async def test_abort_without_a_run_does_not_affect_the_next_one() -> None:
    agent = Agent(ScriptedProvider(["fine"]))
    agent.abort()
    assert (await agent.run("hi")).reason == "completed"


# ---------------------------------------------------------------- continue_


async def test_continue_retries_after_an_error() -> None:
    seen: list[ContinuationKind] = []

    class Kind(Hooks):
        async def before_loop(self, run: RunHandle) -> bool:
            seen.append(run.context.continuation_kind)
            return True

    provider = ScriptedProvider([ProviderError("auth", "expired key"), say("recovered")])
    agent = Agent(provider, hooks=[Kind()])
    failed = await agent.run("question")
    assert failed.reason == "error"

    result = await agent.continue_()
    assert result.reason == "completed" and result.text == "recovered"
    assert texts(result.messages) == [("assistant", "recovered")]
    # the failed assistant message is gone; the model saw the question again
    assert texts(agent.messages) == [("user", "question"), ("assistant", "recovered")]
    assert texts(provider.requests[1].messages) == [("user", "question")]
    assert seen[-1] == ContinuationKind.RERUN
    assert agent.context.continuation_kind == ContinuationKind.INITIAL
    idle_and_valid(agent)


async def test_continue_after_an_after_turn_abort_goes_on_from_the_tool_results() -> None:
    provider = ScriptedProvider([calls(("c1", "slow", {"x": "a"})), "finished"])
    agent = Agent(provider, tools=[slow], options=AgentOptions(event_buffer=1))
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, ToolExecutionStart):
                agent.abort("after_turn")
    assert stream.result is not None and stream.result.reason == "cancelled"

    result = await agent.continue_()
    assert result.reason == "completed" and result.text == "finished"
    assert texts(provider.requests[1].messages)[-1] == ("tool_result", "slow a")
    idle_and_valid(agent)


async def test_continue_with_nothing_to_continue_is_a_caller_error() -> None:
    agent = Agent(ScriptedProvider(["done"]))
    await agent.run("hi")
    with pytest.raises(ValueError):
        await agent.continue_()
    assert not agent.running


async def test_continue_after_a_suspension_once_approved() -> None:
    class Gate(Hooks):
        async def before_tool_call(self, run: RunHandle, call: Any) -> Ask:
            return Ask(prompt="sure?")

    provider = ScriptedProvider([calls(("d1", "quick", {"x": "rm"})), "removed"])
    agent = Agent(provider, tools=[quick], hooks=[Gate()])
    suspended = await agent.run("clean up")

    assert suspended.reason == "suspended" and suspended.pending_tool_calls == ["d1"]
    assert TOOL_LOG == []
    assert validate_transcript(agent.messages, allow_pending=["d1"]) == []
    agent.context.approve("d1")
    result = await agent.continue_()
    assert result.reason == "completed" and result.text == "removed"
    assert TOOL_LOG == ["quick:rm"]
    idle_and_valid(agent)


async def test_input_filters_and_limits_apply_to_agent_runs() -> None:
    class NoSecrets(InputFilter):
        def filter(self, text: str) -> Pass | Reject:
            return Reject("no secrets") if "password" in text else Pass()

    provider = ScriptedProvider([calls(("c1", "quick", {"x": "a"})), "unused"])
    agent = Agent(
        provider,
        tools=[quick],
        input_filters=[NoSecrets()],
        limits=ExecutionLimits(max_turns=1),
    )
    rejected = await agent.run("my password is hunter2")
    assert rejected.reason == "rejected" and agent.messages == []
    assert provider.requests == []

    limited = await agent.run("do a thing")
    assert limited.reason == "limit" and len(provider.requests) == 1
    idle_and_valid(agent)


# ---------------------------------------------------------------- state


async def test_reset_forgets_the_conversation_and_usage() -> None:
    provider = ScriptedProvider([say("one", usage(4, 1)), say("two", usage(2, 1))])
    agent = Agent(provider)
    await agent.run("first")
    session = agent.context.session_id
    agent.reset()

    assert agent.messages == []
    assert usage_tuple(agent.usage) == (0, 0, 0, None)
    assert agent.context.session_id != session
    await agent.run("second")
    assert texts(provider.requests[1].messages) == [("user", "second")]


async def test_snapshot_round_trips_through_json_and_restores() -> None:
    provider = ScriptedProvider([say("one", usage(4, 1)), say("two"), say("three")])
    agent = Agent(provider)
    await agent.run("first")
    snapshot = agent.snapshot()
    stored = snapshot.model_dump_json()

    await agent.run("second")
    assert len(snapshot.messages) == 2  # a snapshot is a copy, not a view

    loaded = AgentSnapshot.model_validate_json(stored)
    assert loaded == snapshot
    other = Agent(provider)
    other.restore(loaded)
    assert other.messages == snapshot.messages
    assert usage_tuple(other.usage) == (4, 1, 5, None)
    assert other.context.session_id == agent.context.session_id

    await other.run("again")
    assert texts(provider.requests[-1].messages) == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "again"),
    ]
    agent.restore(snapshot)
    assert texts(agent.messages) == [("user", "first"), ("assistant", "one")]
    json.loads(stored)  # plain JSON


async def test_run_ephemeral_touches_no_stored_state() -> None:
    provider = ScriptedProvider([say("kept", usage(3, 1)), say("side answer", usage(50, 50))])
    agent = Agent(provider)
    await agent.run("first")
    before = agent.snapshot()
    tools_before = list(agent.context.tools)

    result = await agent.run_ephemeral("a side question")

    assert result.text == "side answer" and result.reason == "completed"
    assert usage_tuple(result.usage) == (50, 50, 100, None)
    # it saw the conversation ...
    assert texts(provider.requests[1].messages) == [
        ("user", "first"),
        ("assistant", "kept"),
        ("user", "a side question"),
    ]
    # ... and changed nothing
    assert agent.snapshot() == before
    assert agent.context.tools == tools_before
    assert not agent.running


async def test_run_ephemeral_while_a_run_is_in_progress() -> None:
    def echo(request: ModelRequest) -> AssistantMessage:
        last = request.messages[-1]
        assert isinstance(last, UserMessage)
        return say(f"re: {last.text}")

    provider = ScriptedProvider([echo, echo], chunks=5, delay=0.002)
    agent = Agent(provider)
    box: list[Any] = []

    async def main_run() -> None:
        box.append(await agent.run("main"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(main_run)
        await wait_running(agent)
        side = await agent.run_ephemeral("side")

    assert side.text == "re: side"
    assert box[0].text == "re: main"
    assert texts(agent.messages) == [("user", "main"), ("assistant", "re: main")]


# ---------------------------------------------------------------- system prompt, deps


async def test_a_callable_system_prompt_is_rebuilt_on_every_call_and_never_stored() -> None:
    counter = iter(range(100))

    def system() -> str:
        return f"SYSTEM-{next(counter)}"

    provider = ScriptedProvider([calls(("c1", "quick", {"x": "a"})), "done", "again"])
    agent = Agent(provider, tools=[quick], system_prompt=system)
    await agent.run("one")
    await agent.run("two")

    prompts = [r.system_prompt for r in provider.requests]
    assert len(prompts) == 3 and len(set(prompts)) == 3
    assert all(p is not None and p.startswith("SYSTEM-") for p in prompts)
    dumped = "".join(m.model_dump_json() for m in agent.messages)
    assert "SYSTEM-" not in dumped
    assert {m.role for m in agent.messages} <= {"user", "assistant", "tool_result"}


async def test_deps_reach_tools_through_a_typed_tool_context() -> None:
    app = App(prices={"tea": 2.5, "cake": 4.0})
    provider = ScriptedProvider(
        [
            calls(("c1", "price", {"item": "tea"})),
            "ok",
            calls(("c2", "price", {"item": "cake"})),
            "ok",
        ]
    )
    agent = Agent(provider, tools=[price], deps=app)
    await agent.run("tea?")
    assert app.seen == ["tea"]
    assert texts(agent.messages)[2] == ("tool_result", "tea: 2.5")
    # the context parameter is not part of the schema the model sees
    spec = provider.requests[0].tools[0]
    assert spec.name == "price" and set(spec.parameters["properties"]) == {"item"}

    other = App(prices={"cake": 9.0})
    await agent.run("cake?", deps=other)
    assert other.seen == ["cake"] and app.seen == ["tea"]
    assert texts(agent.messages)[-2] == ("tool_result", "cake: 9.0")


# ---------------------------------------------------------------- structured output


class Trip(BaseModel):
    city: str
    days: int


async def test_structured_output_is_validated_and_errors_are_fed_back() -> None:
    provider = ScriptedProvider(
        [
            calls(("f1", "final_result", {"city": "Porto"})),
            calls(("f2", "final_result", {"city": "Porto", "days": 3})),
        ]
    )
    agent: Agent[Trip] = Agent(provider, output_type=Trip)
    result = await agent.run("plan a trip")

    assert result.reason == "completed"
    assert isinstance(result.output, Trip) and result.output == Trip(city="Porto", days=3)
    assert [t.name for t in provider.requests[0].tools] == ["final_result"]
    assert set(provider.requests[0].tools[0].parameters["required"]) == {"city", "days"}
    feedback = provider.requests[1].messages[-1]
    assert isinstance(feedback, ToolResultMessage) and feedback.is_error
    assert "days" in feedback.text and "final_result" in feedback.text
    assert agent.context.tools == []  # the final-result tool does not outlive the run
    idle_and_valid(agent)


async def test_structured_output_retries_are_bounded() -> None:
    provider = ScriptedProvider(
        [
            calls(("f1", "final_result", {"city": "Porto"})),
            calls(("f2", "final_result", {"city": "Porto", "days": "many"})),
            calls(("f3", "final_result", {"city": "Porto", "days": 2})),
        ]
    )
    agent: Agent[Trip] = Agent(provider, output_type=Trip, options=AgentOptions(output_retries=1))
    result = await agent.run("plan a trip")

    assert result.reason == "error" and result.output is None
    assert result.error is not None and result.error.kind == "output_validation"
    assert "days" in result.error.message
    assert len(provider.requests) == 2 and provider.remaining == 1
    with pytest.raises(RunFailed, match="output_validation"):
        result.raise_for_error()
    idle_and_valid(agent)


async def test_a_model_that_answers_in_text_is_reminded_a_bounded_number_of_times() -> None:
    provider = ScriptedProvider(["it is 42", "really, 42", "42!", "unused"])
    agent: Agent[int] = Agent(provider, output_type=int, options=AgentOptions(output_retries=2))
    result = await agent.run("the answer?")

    assert result.reason == "error"
    assert result.error is not None and result.error.kind == "output_validation"
    assert len(provider.requests) == 3
    reminders = [m.text for m in provider.requests[-1].messages if isinstance(m, UserMessage)][1:]
    assert len(reminders) == 2 and all("final_result" in r for r in reminders)


async def test_non_model_output_types_are_wrapped_as_value() -> None:
    provider = ScriptedProvider([calls(("f1", "final_result", {"value": 42}))])
    agent: Agent[int] = Agent(provider, output_type=int)
    events, result = await collect(agent, "the answer?")

    assert result.reason == "completed" and result.output == 42
    assert provider.requests[0].tools[0].parameters["properties"] == {"value": {"type": "integer"}}
    assert isinstance(events[-1], AgentEnd) and events[-1].reason == "completed"


async def test_message_events_pair_up_in_an_agent_stream() -> None:
    provider = ScriptedProvider([calls(("c1", "quick", {"x": "a"})), "done"])
    events, _ = await collect(Agent(provider, tools=[quick]), "go")
    depth = 0
    for event in events:
        if isinstance(event, MessageStart):
            assert depth == 0
            depth = 1
        elif isinstance(event, MessageEnd):
            assert depth == 1
            depth = 0
    assert depth == 0
    assert isinstance(events[-1], AgentEnd)
    assert usage_tuple(events[-1].usage) != usage_tuple(Usage())
