"""The Agent's optional planning phase: one tool-free call answering DIRECT or a plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from agent_support import calls, collect, say, texts, usage, usage_tuple

from treadle import Agent, AssistantMessage, ProviderError, tool
from treadle.context import validate_transcript
from treadle.loop import InputFilter, Pass, Reject, Warn
from treadle.sessions import JsonlStore
from treadle.testing import ScriptedProvider
from treadle.types import AgentStart, MessageStart, PlanCreated

pytestmark = pytest.mark.anyio


@tool
def lookup(key: str) -> str:
    """Look something up."""
    return f"value of {key}"


PLAN = "1. Look up the key\n2) Answer with it"


async def test_a_numbered_plan_is_added_to_the_history_and_announced() -> None:
    provider = ScriptedProvider(
        [say(PLAN), calls(("c1", "lookup", {"key": "k"})), say("the value is known")]
    )
    agent = Agent(provider, tools=[lookup], planning=True, system_prompt="Be useful.")
    events, result = await collect(agent, "find k")

    planning = provider.requests[0]
    assert planning.tools == []  # the planning call offers no tools
    assert planning.system_prompt is not None
    assert planning.system_prompt.startswith("Be useful.") and "DIRECT" in planning.system_prompt
    assert texts(planning.messages) == [("user", "find k")]

    plans = [e for e in events if isinstance(e, PlanCreated)]
    assert len(plans) == 1
    plan = plans[0]
    assert plan.plan == PLAN and plan.steps == ["Look up the key", "Answer with it"]
    start = events[0]
    assert isinstance(start, AgentStart)
    assert plan.loop_id == start.loop_id and plan.depth == 0
    first_assistant = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, MessageStart) and e.message.role == "assistant" and e.message.text != PLAN
    )
    assert events.index(plan) < first_assistant

    planned = [m for m in agent.messages if isinstance(m, AssistantMessage) and m.text == PLAN]
    assert len(planned) == 1 and planned[0].stop_reason == "stop"
    assert agent.messages.index(planned[0]) == 1  # right after the user's request
    # the main loop saw the plan as the assistant's own earlier message, with its tools
    main = provider.requests[1]
    assert ("assistant", PLAN) in texts(main.messages)
    assert [t.name for t in main.tools] == ["lookup"]
    assert main.system_prompt == "Be useful."
    assert result.reason == "completed" and result.text == "the value is known"
    assert validate_transcript(agent.messages) == []


async def test_direct_skips_the_plan() -> None:
    provider = ScriptedProvider(["DIRECT", "four"])
    agent = Agent(provider, planning=True)
    events, result = await collect(agent, "2+2?")

    assert not [e for e in events if isinstance(e, PlanCreated)]
    assert texts(agent.messages) == [("user", "2+2?"), ("assistant", "four")]
    assert len(provider.requests) == 2 and provider.requests[1].system_prompt is None
    assert result.text == "four"


async def test_planning_runs_once_per_run_and_not_without_it() -> None:
    provider = ScriptedProvider(["DIRECT", "a", "DIRECT", "b"])
    agent = Agent(provider, planning=True)
    await agent.run("one")
    await agent.run("two")
    assert len(provider.requests) == 4
    planning_calls = ["DIRECT" in (r.system_prompt or "") for r in provider.requests]
    assert planning_calls == [True, False, True, False]

    plain = ScriptedProvider(["only answer"])
    await Agent(plain).run("no planning")
    assert len(plain.requests) == 1


async def test_the_planning_call_is_counted_once_in_usage() -> None:
    provider = ScriptedProvider([say(PLAN, usage(10, 5, 0.1)), say("done", usage(20, 7, 0.2))])
    agent = Agent(provider, planning=True)
    result = await agent.run("go")
    assert usage_tuple(result.usage) == (30, 12, 42, 0.3)
    assert usage_tuple(agent.usage) == (30, 12, 42, 0.3)


async def test_a_reply_without_numbered_steps_is_not_a_plan() -> None:
    provider = ScriptedProvider(["Sure, I can help with that.", "the answer"])
    agent = Agent(provider, planning=True)
    events, _ = await collect(agent, "go")
    assert not [e for e in events if isinstance(e, PlanCreated)]
    assert texts(agent.messages) == [("user", "go"), ("assistant", "the answer")]


async def test_a_failed_planning_call_does_not_raise() -> None:
    provider = ScriptedProvider([ProviderError("auth", "bad key"), "the answer"])
    agent = Agent(provider, planning=True)
    result = await agent.run("go")
    assert result.reason in ("completed", "error")
    assert validate_transcript(agent.messages) == []


async def test_abort_during_the_planning_call_cancels_the_run() -> None:
    provider = ScriptedProvider([PLAN, "never"], chunks=10, delay=0.002)
    agent = Agent(provider, planning=True)
    box: list[Any] = []

    async def runner() -> None:
        box.append(await agent.run("go"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(runner)
        while not provider.requests:
            await anyio.lowlevel.checkpoint()
        agent.abort()

    assert box[0].reason == "cancelled"
    assert len(provider.requests) == 1
    assert not agent.running


class NoPasswords(InputFilter):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def filter(self, text: str) -> Pass | Warn | Reject:
        self.seen.append(text)
        if "password" in text:
            return Reject("looks like a password")
        return Warn("be careful") if "careful" in text else Pass()


async def test_a_rejected_prompt_is_never_planned_nor_stored(tmp_path: Path) -> None:
    # The contract: a rejected prompt reaches no model. With planning it used to be sent in
    # the planning request and written ahead to the store first.
    provider = ScriptedProvider([say(PLAN), say("never")])
    check = NoPasswords()
    store = JsonlStore(tmp_path)
    agent = Agent(provider, planning=True, input_filters=[check], store=store)
    result = await agent.run("my password is hunter2")
    assert result.reason == "rejected"
    assert provider.requests == [], "no model call, planning included"
    assert check.seen == ["my password is hunter2"], "judged once"
    raw = store.path(agent.session_id).read_bytes()  # the file is append-only: all it ever held
    assert b"hunter2" not in raw
    assert agent.messages == []
    agent.close()


async def test_a_filter_judges_planned_prompts_once() -> None:
    provider = ScriptedProvider([say(PLAN), say("done")])
    check = NoPasswords()
    agent = Agent(provider, planning=True, input_filters=[check])
    result = await agent.run("be careful with this")
    assert result.reason == "completed"
    assert len(provider.requests) == 2  # the plan, then the run
    assert check.seen == ["be careful with this"]
    assert "[Warning: be careful]" in "".join(m.text for m in agent.messages)  # type: ignore[union-attr]
