"""Agent(store=..., session_id=...): write-ahead, resume, branch, reset, locks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from treadle import (
    Agent,
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    Ask,
    AssistantMessage,
    Hooks,
    ModelRequest,
    ProviderError,
    RunHandle,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    UserMessage,
    agent_loop,
    tool,
)
from treadle.agent import AgentOptions
from treadle.context import validate_transcript
from treadle.loop import InputFilter, Warn
from treadle.sessions import (
    CANCELLED_TEXT,
    MemoryStore,
    SessionError,
    SessionLocked,
    SessionRecorder,
    SessionStore,
)
from treadle.testing import ScriptedProvider
from treadle.tools import ApprovalRequired

StoreFactory = Callable[[], SessionStore]
pytestmark = pytest.mark.anyio


@tool(category="info")
async def slow(seconds: float = 0.0) -> str:
    """Wait, then say done."""
    await anyio.sleep(seconds)
    return "done"


def calls(*ids: str, seconds: float = 0.0) -> AssistantMessage:
    return AssistantMessage(
        content=[ToolCall(id=i, name="slow", arguments={"seconds": seconds}) for i in ids]
    )


def calls_of(call_id: str, name: str, **arguments: Any) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=call_id, name=name, arguments=arguments)])


def dumps(messages: list[Any]) -> list[str]:
    return [m.model_dump_json() for m in messages]


def assert_stored(store: SessionStore, agent: Agent[Any]) -> None:
    stored = store.load(agent.session_id, repair=False).messages
    assert dumps(stored) == dumps(agent.messages)


async def test_every_message_is_stored_before_anyone_hears_of_it(
    make_store: StoreFactory,
) -> None:
    store, reader = make_store(), make_store()
    seen_by_model: list[int] = []

    def answer(request: ModelRequest) -> AssistantMessage:
        stored = reader.load(agent.session_id).messages
        seen_by_model.append(len(stored))
        assert dumps(stored) == dumps(request.messages)  # the prompt was written first
        return AssistantMessage(content="all done")

    provider = ScriptedProvider([calls("a", "b"), answer])
    agent: Agent[Any] = Agent(
        provider, tools=[slow], store=store, options=AgentOptions(event_buffer=0)
    )
    ends = 0
    async with agent.stream("go") as events:
        async for event in events:
            if event.type == "message_end":
                ends += 1
                stored = reader.load(agent.session_id, repair=False).messages
                assert stored[-1] == event.message
    assert ends == 5 and seen_by_model == [4]
    assert_stored(make_store(), agent)


async def test_resume_restores_history_ids_and_usage(make_store: StoreFactory) -> None:
    first: Agent[Any] = Agent(
        ScriptedProvider([calls("a"), "four"]), tools=[slow], store=make_store()
    )
    await first.run("2+2?")
    sid, agent_id, usage = first.session_id, first.context.agent_id, first.usage
    first.close()

    again: Agent[Any] = Agent(
        ScriptedProvider(["five"]), tools=[slow], store=make_store(), session_id=sid
    )
    assert again.session_id == sid and again.context.agent_id == agent_id
    assert dumps(again.messages) == dumps(first.messages)
    assert again.usage == usage
    result = await again.run("and 2+3?")
    assert result.text == "five" and len(again.messages) == 6
    assert_stored(make_store(), again)


async def test_a_second_agent_on_the_session_is_refused(make_store: StoreFactory) -> None:
    store = make_store()
    owner: Agent[Any] = Agent(ScriptedProvider(["hi"]), store=store)
    await owner.run("hello")
    with pytest.raises(SessionLocked):
        Agent(ScriptedProvider([]), store=make_store(), session_id=owner.session_id)
    owner.close()
    with pytest.raises(SessionError, match="closed"):
        await owner.run("more")
    Agent(ScriptedProvider([]), store=store, session_id=owner.session_id).close()


async def test_new_session_with_a_chosen_id(make_store: StoreFactory) -> None:
    agent: Agent[Any] = Agent(ScriptedProvider(["ok"]), store=make_store(), session_id="user-42")
    assert agent.session_id == "user-42" and make_store().exists("user-42")
    await agent.run("hi")
    assert make_store().info("user-42").title == "hi"


async def test_continue_after_an_error_rewrites_the_stored_tail(make_store: StoreFactory) -> None:
    store = make_store()
    provider = ScriptedProvider([ProviderError("bad_request", "nope"), "recovered"])
    agent: Agent[Any] = Agent(provider, store=store)
    failed = await agent.run("try")
    assert failed.reason == "error"
    assert_stored(make_store(), agent)
    assert (await agent.continue_()).text == "recovered"
    assert [m.role for m in agent.messages] == ["user", "assistant"]
    assert_stored(make_store(), agent)


async def test_restore_and_edits_between_runs_are_stored(make_store: StoreFactory) -> None:
    store = make_store()
    agent: Agent[Any] = Agent(ScriptedProvider(["one", "two", "three"]), store=store)
    await agent.run("first")
    snap = agent.snapshot()
    await agent.run("second")
    agent.restore(snap)
    assert_stored(make_store(), agent)  # written at once
    agent.messages.append(UserMessage.of("edited in"))
    await agent.run("third")
    assert [m.text for m in agent.messages] == ["first", "one", "edited in", "third", "three"]  # type: ignore[union-attr]
    assert_stored(make_store(), agent)


async def test_run_ephemeral_writes_nothing(make_store: StoreFactory) -> None:
    store = make_store()
    agent: Agent[Any] = Agent(ScriptedProvider(["kept", "forgotten"]), store=store)
    await agent.run("keep")
    before = store.info(agent.session_id)
    result = await agent.run_ephemeral("forget")
    assert result.text == "forgotten"
    assert make_store().info(agent.session_id) == before
    assert [i.id for i in make_store().list()] == [agent.session_id]


async def test_reset_starts_a_new_stored_session(make_store: StoreFactory) -> None:
    store = make_store()
    agent: Agent[Any] = Agent(ScriptedProvider(["a", "b"]), store=store)
    await agent.run("one")
    old = agent.session_id
    agent.reset()
    assert agent.session_id != old and agent.messages == []
    await agent.run("two")
    reader = make_store()
    assert len(reader.load(old).messages) == 2
    assert [m.text for m in reader.load(agent.session_id).messages] == ["two", "b"]  # type: ignore[union-attr]
    Agent(ScriptedProvider([]), store=store, session_id=old).close()  # the old lock is gone


async def run_recorded(agent: Agent[Any], prompt: str) -> list[AgentEvent]:
    seen: list[AgentEvent] = []
    async with agent.stream(prompt) as events:
        async for event in events:
            seen.append(event)
    return seen


@pytest.mark.parametrize("with_store", [True, False])
async def test_branch_from_any_message(make_store: StoreFactory, with_store: bool) -> None:
    store = make_store() if with_store else None
    provider = ScriptedProvider([calls("a"), "first answer", "branch answer", "later"])
    agent: Agent[Any] = Agent(provider, tools=[slow], store=store)
    await agent.run("question")
    original = dumps(agent.messages)
    loop_id = agent.context.loop_id

    other = agent.branch(1)  # keep only the question
    assert other.session_id != agent.session_id
    assert dumps(other.messages) == original[:1]
    events = await run_recorded(other, "ask differently")
    start = events[0]
    assert start.type == "agent_start" and start.continuation_kind == "branch"
    assert start.parent_loop_id == loop_id and start.session_id == other.session_id
    assert next(e for e in events if e.type == "turn_start").trigger == "branch"
    assert dumps(agent.messages) == original  # the original is untouched
    later = await run_recorded(other, "and then")
    assert later[0].continuation_kind == "initial" and later[0].parent_loop_id is None

    if store is not None:
        reader = make_store()
        info = reader.info(other.session_id)
        assert info.parent_id == agent.session_id and info.branch_index == 1
        assert dumps(reader.load(agent.session_id).messages) == original
        assert_stored(reader, other)
    whole = agent.branch()
    assert dumps(whole.messages) == original
    with pytest.raises(IndexError):
        agent.branch(len(original) + 1)


async def test_branch_inside_a_tool_batch_cancels_the_open_calls(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    agent: Agent[Any] = Agent(ScriptedProvider([calls("a", "b"), "ok"]), tools=[slow], store=store)
    await agent.run("go")
    cut = agent.branch(3)  # user, assistant(a, b), result a
    last = cut.messages[-1]
    assert isinstance(last, ToolResultMessage) and last.tool_call_id == "b"
    assert last.text == CANCELLED_TEXT
    assert validate_transcript(cut.messages) == []
    assert_stored(make_store(), cut)


async def test_resume_after_a_crash_repairs_and_stores_the_repair(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    sid = store.create()
    with store.open_writer(sid) as w:  # what a process killed mid-tool leaves behind
        w.extend(
            [
                UserMessage.of("go"),
                calls("a", "b"),
                ToolResultMessage(tool_call_id="a", tool_name="slow", content="done"),
            ]
        )
    agent: Agent[Any] = Agent(
        ScriptedProvider(["picked up"]), tools=[slow], store=make_store(), session_id=sid
    )
    last = agent.messages[-1]
    assert isinstance(last, ToolResultMessage) and last.text == CANCELLED_TEXT
    assert_stored(make_store(), agent)  # the repair is persisted, not only applied
    result = await agent.continue_()
    assert result.text == "picked up"
    assert validate_transcript(make_store().load(sid).messages) == []


class AskFirst(Hooks):
    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Ask:
        return Ask("may I?")


async def test_a_suspended_run_can_be_approved_after_a_restart(make_store: StoreFactory) -> None:
    first: Agent[Any] = Agent(
        ScriptedProvider([calls("x")]), tools=[slow], hooks=[AskFirst()], store=make_store()
    )
    result = await first.run("do it")
    assert result.reason == "suspended" and result.pending_tool_calls == ["x"]
    first.close()
    again: Agent[Any] = Agent(
        ScriptedProvider(["did it"]), tools=[slow], store=make_store(), session_id=first.session_id
    )
    assert again.context.pending_tool_calls == ["x"]  # not cancelled: still waiting
    again.context.approve("x")
    done = await again.continue_()
    assert done.reason == "completed" and done.text == "did it"
    assert_stored(make_store(), again)


async def test_a_mid_call_question_and_its_saved_state_survive_a_restart(
    make_store: StoreFactory,
) -> None:
    # A tool asks mid-call (ApprovalRequired); the process ends; another one restores the
    # session: the suspension keeps its question and the tool's saved state, and the
    # approved call gets that state back.
    seen: list[tuple[bool, Any]] = []

    @tool
    async def pay(amount: int, ctx: ToolContext[Any]) -> str:
        seen.append((ctx.approved, ctx.saved))
        if not ctx.approved:
            raise ApprovalRequired(f"Pay {amount}?", {"quote": "q-7", "amount": amount})
        return f"paid with {ctx.saved['quote']}"

    first: Agent[Any] = Agent(
        ScriptedProvider([calls_of("p", "pay", amount=500)]), tools=[pay], store=make_store()
    )
    result = await first.run("pay")
    assert result.reason == "suspended" and result.pending_tool_calls == ["p"]
    first.close()
    again: Agent[Any] = Agent(
        ScriptedProvider(["paid"]), tools=[pay], store=make_store(), session_id=first.session_id
    )
    record = again.context.suspended["p"]
    assert (record.prompt, record.saved) == ("Pay 500?", {"quote": "q-7", "amount": 500})
    again.context.approve("p")
    done = await again.continue_()
    assert done.reason == "completed"
    assert seen == [(False, None), (True, {"quote": "q-7", "amount": 500})]
    last = [m for m in again.messages if isinstance(m, ToolResultMessage)][-1]
    assert last.text == "paid with q-7"
    assert_stored(make_store(), again)


async def test_the_prompt_is_stored_before_a_planning_call(make_store: StoreFactory) -> None:
    store, reader = make_store(), make_store()

    def plan(request: ModelRequest) -> AssistantMessage:
        stored = reader.load(agent.session_id).messages
        assert [m.text for m in stored] == ["big task"]  # type: ignore[union-attr]
        return AssistantMessage(content="DIRECT")

    agent: Agent[Any] = Agent(ScriptedProvider([plan, "done"]), store=store, planning=True)
    assert agent._recorder is not None
    writer = agent._recorder.writer
    cuts: list[int] = []
    real_cut = writer._write_truncate  # type: ignore[attr-defined]
    writer._write_truncate = lambda n: (cuts.append(n), real_cut(n))  # type: ignore[attr-defined]
    assert (await agent.run("big task")).text == "done"
    assert_stored(reader, agent)
    assert cuts == []  # the written-ahead prompt was not dropped and written again


class WarnAll(InputFilter):
    def filter(self, text: str) -> Warn:
        return Warn("careful")


async def test_planned_prompts_edited_by_a_filter_are_stored_as_edited(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    provider = ScriptedProvider([AssistantMessage(content="DIRECT"), "done"])
    agent: Agent[Any] = Agent(provider, store=store, planning=True, input_filters=[WarnAll()])
    await agent.run([UserMessage.of("one"), UserMessage.of("two")])
    assert "[Warning: careful]" in agent.messages[1].text  # type: ignore[union-attr]
    assert_stored(make_store(), agent)


async def test_cancelling_mid_tool_still_stores_a_valid_history(make_store: StoreFactory) -> None:
    store = make_store()
    started = anyio.Event()

    @tool(name="slow")
    async def waits(seconds: float = 0.0) -> str:
        """Say it started, then wait."""
        started.set()
        await anyio.sleep(seconds)
        return "done"

    provider = ScriptedProvider([calls("a", "b", seconds=5)])
    agent: Agent[Any] = Agent(provider, tools=[waits], store=store)
    async with anyio.create_task_group() as tg:  # cancelled once a tool runs, not on a clock
        tg.start_soon(agent.run, "slow please")
        await started.wait()
        tg.cancel_scope.cancel()
    assert agent.messages[-1].role == "tool_result"
    assert validate_transcript(agent.messages) == []
    assert_stored(make_store(), agent)


async def test_a_failing_store_ends_the_run_with_an_error() -> None:
    store = MemoryStore()
    agent: Agent[Any] = Agent(ScriptedProvider(["never stored"]), store=store)
    assert agent._recorder is not None
    writer = agent._recorder.writer

    def broken(messages: Any) -> None:
        raise OSError("disk full")

    writer._write_messages = broken  # type: ignore[method-assign]
    result = await agent.run("hello")
    assert result.reason == "error" and result.error is not None
    assert "disk full" in result.error.message


class SquashHistory(Hooks):
    """Rewrites the history in place before the second turn, as compaction does."""

    def __init__(self, context: AgentContext) -> None:
        self.context = context

    async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
        if turn_index == 1:
            kept = run.context.messages[-2:]
            run.context.messages[:] = [UserMessage.of("(summary of earlier work)"), *kept]
        return True


async def test_a_history_rewritten_mid_run_is_followed(make_store: StoreFactory) -> None:
    store = make_store()
    agent: Agent[Any] = Agent(ScriptedProvider(["a", "b", "c"]), store=store)
    await agent.run("first")
    agent._user_hooks.append(SquashHistory(agent.context))
    agent.follow_up("second")
    assert (await agent.run("go on")).text == "c"
    expected = ["(summary of earlier work)", "go on", "b", "second", "c"]
    assert [m.text for m in agent.messages] == expected  # type: ignore[union-attr]
    assert agent.messages[0].text == "(summary of earlier work)"  # type: ignore[union-attr]
    assert_stored(make_store(), agent)


async def test_recorder_with_agent_loop(make_store: StoreFactory) -> None:
    store = make_store()
    context = AgentContext(tools=[slow])
    recorder = SessionRecorder.open(store, context)
    config = AgentLoopConfig(provider=ScriptedProvider([calls("a"), "ok"]), hooks=[recorder])
    new = await agent_loop([UserMessage.of("hi")], context, config)
    assert len(new) == 4 and context.session_id == recorder.session_id
    recorder.close()
    resumed = AgentContext(tools=[slow])
    again = await anyio.to_thread.run_sync(SessionRecorder.open, store, resumed, context.session_id)
    assert dumps(resumed.messages) == dumps(context.messages)
    again.close()
