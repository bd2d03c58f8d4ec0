"""docs/contract.md §3: every hook method gets the run it is called for (``RunHandle``), so
one hook object serves any number of runs at once — forks of an Agent in a server, side
by side — and keeps what it knows about a run in ``run.state_for(self)``."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import anyio
import pytest
from harness import call, calls_message, run_recorded

from treadle import (
    Agent,
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    Hooks,
    RunEnding,
    RunHandle,
    ToolContext,
    agent_loop,
    tool,
)
from treadle.ext import engine
from treadle.ext.workers import SessionEnd, SessionEndInfo
from treadle.sessions import MemoryStore
from treadle.testing import ScriptedProvider
from treadle.types import CustomEvent

pytestmark = pytest.mark.anyio


class Reports(Hooks):
    """Reports each run's session and context from the run handle, at its start and end,
    and keeps a note per run in ``run.state_for(self)``."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str | None]] = []
        self.ended: list[tuple[str | None, AgentContext, str]] = []
        self.mixed: list[str] = []

    async def before_loop(self, run: RunHandle) -> bool:
        self.log.append(("start", run.session_id))
        run.state_for(self)["session"] = run.session_id
        return True

    async def on_message(self, run: RunHandle, message: Any) -> None:
        if run.state_for(self)["session"] != run.session_id:
            self.mixed.append(f"{run.session_id} saw {run.state_for(self)['session']}")

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        self.log.append(("end", run.session_id))
        self.ended.append((run.session_id, run.context, ending.reason))


def interleaving(n: int) -> ScriptedProvider:
    """Answers streamed in pieces with a sleep before each, so runs side by side take turns."""
    return ScriptedProvider([f"answer {i}" for i in range(n)], chunks=4, delay=0.005)


async def test_forks_running_at_once_each_see_their_own_run() -> None:
    hook = Reports()
    sessions: list[SessionEndInfo] = []
    store = MemoryStore()
    agent = Agent(interleaving(4), hooks=[hook, SessionEnd(sessions.append)], store=store)
    forks = {sid: agent.fork(sid) for sid in ("s1", "s2")}
    async with anyio.create_task_group() as tg:
        for fork in forks.values():
            tg.start_soon(fork.run, "hello")
    # the runs were side by side: both started before either ended
    assert sorted(hook.log[:2]) == [("start", "s1"), ("start", "s2")]
    assert not hook.mixed
    assert sorted((sid, reason) for sid, _, reason in hook.ended) == [
        ("s1", "completed"),
        ("s2", "completed"),
    ]
    for sid, context, _ in hook.ended:
        assert context is forks[str(sid)].context
    assert sorted(str(s.session_id) for s in sessions) == ["s1", "s2"]
    for info in sessions:  # each callback got its own run's context, not the other's
        assert info.context is forks[str(info.session_id)].context
        assert info.context is not None and info.context.session_id == info.session_id


async def test_the_engine_s_hooks_serve_forks_side_by_side() -> None:
    ends: list[SessionEndInfo] = []
    parts = engine(":memory:", skills=None, user_id="ada", on_session_end=ends.append)
    try:
        agent = parts.agent(interleaving(4))
        forks = [agent.fork(), agent.fork()]
        async with anyio.create_task_group() as tg:
            for i, fork in enumerate(forks):
                tg.start_soon(fork.run, f"question number {i}")
        assert sorted(str(e.session_id) for e in ends) == sorted(str(f.session_id) for f in forks)
        for info in ends:
            owner = next(f for f in forks if f.session_id == info.session_id)
            assert info.context is owner.context
            assert [m.text for m in info.new_messages if m.role == "user"] == [
                m.text for m in owner.messages if m.role == "user"
            ]
    finally:
        parts.close()


async def test_run_emit_reaches_the_observers_and_the_stream() -> None:
    returned: list[Any] = []
    observed: list[AgentEvent] = []

    class Emits(Hooks):
        async def before_loop(self, run: RunHandle) -> bool:
            returned.append(await run.emit("too.early"))  # before agent_start: nothing
            return True

        async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
            returned.append(await run.emit("app.turn", {"turn": turn_index}))
            return True

        async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
            returned.append(await run.emit("too.late"))  # after agent_end: nothing

    class Observer(Hooks):
        def on_event(self, run: RunHandle, event: AgentEvent) -> None:
            observed.append(event)

    config = AgentLoopConfig(provider=ScriptedProvider(["hi"]), hooks=[Emits(), Observer()])
    rec = await run_recorded(["go"], AgentContext(), config)
    custom = rec.of_type(CustomEvent)
    assert [(e.name, e.value) for e in custom] == [("app.turn", {"turn": 0})]
    assert returned[0] is None and returned[2] is None
    assert returned[1] is custom[0]  # the event on the stream, seq and all
    assert [e for e in observed if isinstance(e, CustomEvent)] == custom
    assert rec.types().index("custom") < rec.types().index("turn_start")

    # without a stream, the observers still hear it
    observed.clear()
    await agent_loop(
        "go", AgentContext(), config.model_copy(update={"provider": ScriptedProvider(["hi"])})
    )
    assert [e.name for e in observed if isinstance(e, CustomEvent)] == ["app.turn"]


async def test_state_for_is_per_run_and_dropped_when_the_run_ends() -> None:
    class Note:
        pass

    kept: list[weakref.ref[Note]] = []
    handles: list[RunHandle] = []
    seen: list[dict[str, Any]] = []

    class Keeps(Hooks):
        async def before_loop(self, run: RunHandle) -> bool:
            state = run.state_for(self)
            seen.append(dict(state))  # empty: each run starts afresh
            note = state["note"] = Note()
            kept.append(weakref.ref(note))
            handles.append(run)
            return True

        async def after_turn(self, run: RunHandle, event: Any) -> None:
            assert run.state_for(self) is run.state_for(self)  # the same dict all run long
            assert isinstance(run.state_for(self)["note"], Note)
            assert run.state_for(object()) == {}  # another owner, another dict

        async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
            assert "note" in run.state_for(self)  # still there for the last hook

    hook = Keeps()
    config = AgentLoopConfig(provider=ScriptedProvider(["one", "two"]), hooks=[hook])
    context = AgentContext()
    await agent_loop("first", context, config)
    await agent_loop("second", context, config)
    assert seen == [{}, {}]
    assert handles[0] is not handles[1]
    gc.collect()
    assert [ref() for ref in kept] == [None, None]  # dropped with the run
    assert handles[0].state_for(hook) == {}


async def test_the_handle_reads_the_run() -> None:
    seen: dict[str, Any] = {}

    class Reads(Hooks):
        async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
            seen.setdefault("turns", []).append((turn_index, run.turn_index))
            return True

        async def after_turn(self, run: RunHandle, event: Any) -> None:
            seen["usage_after_turn"] = run.usage

        async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
            seen["ids"] = (run.loop_id, run.session_id, run.agent_id, run.parent_loop_id)
            seen["depth"], seen["deps"], seen["config"] = run.depth, run.deps, run.config
            seen["usage"], seen["ending"] = run.usage, ending.usage
            seen["parent"] = run.parent

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    deps = object()
    provider = ScriptedProvider([calls_message(call("c1", "ping")), "done"])
    config = AgentLoopConfig(provider=provider, hooks=[Reads()], deps=deps)
    context = AgentContext(tools=[ping], session_id="s", agent_id="a")
    await agent_loop("go", context, config)
    assert seen["turns"] == [(0, 0), (1, 1)]
    assert seen["ids"] == (context.loop_id, "s", "a", None)
    assert seen["depth"] == 0 and seen["deps"] is deps and seen["config"] is config
    assert seen["usage"] == seen["ending"] and seen["usage"].total_tokens > 0
    assert seen["usage_after_turn"] == seen["usage"]
    assert seen["parent"] is None


async def test_a_sub_agent_s_run_knows_its_parent_and_reaches_its_observers() -> None:
    observed: list[tuple[str | None, int, str]] = []
    parents: list[RunHandle | None] = []
    top: list[RunHandle] = []

    class Observer(Hooks):
        async def before_loop(self, run: RunHandle) -> bool:
            top.append(run)
            return True

        def on_event(self, run: RunHandle, event: AgentEvent) -> None:
            if event.type == "agent_start":
                observed.append((run.loop_id, run.depth, event.loop_id))
                parents.append(run.parent)

    child = Agent(ScriptedProvider(["child answer"]), name="helper")
    provider = ScriptedProvider([calls_message(call("c1", "helper", task="help")), "parent answer"])
    config = AgentLoopConfig(provider=provider, hooks=[Observer()])
    await agent_loop("go", AgentContext(tools=[child.as_tool()]), config)
    assert [depth for _, depth, _ in observed] == [0, 1]
    assert all(loop_id == event_loop for loop_id, _, event_loop in observed)
    assert parents == [None, top[0]]  # the sub-agent's run leads back to the parent's


async def test_a_tool_passes_its_run_to_a_loop_it_starts() -> None:
    """The nesting is explicit: a loop started by a tool with ``parent=ctx.run`` reports to
    the parent's observers; one started without it is a run of its own."""
    depths: list[tuple[str, int]] = []

    class Observer(Hooks):
        def on_event(self, run: RunHandle, event: AgentEvent) -> None:
            if event.type == "agent_start":
                depths.append((str(run.parent is not None), event.depth))

    @tool
    async def nested(ctx: ToolContext[Any], link: bool) -> str:
        """Start a loop of its own."""
        inner = AgentContext(depth=ctx.depth + 1, parent_loop_id=ctx.loop_id)
        config = AgentLoopConfig(provider=ScriptedProvider(["inner"]))
        await agent_loop("inner", inner, config, parent=ctx.run if link else None)
        return "ok"

    provider = ScriptedProvider(
        [calls_message(call("c1", "nested", link=True), call("c2", "nested", link=False)), "done"]
    )
    config = AgentLoopConfig(provider=provider, hooks=[Observer()], tool_execution="sequential")
    await agent_loop("go", AgentContext(tools=[nested]), config)
    assert depths == [("False", 0), ("True", 1)]
