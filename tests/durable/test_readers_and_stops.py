"""Readers in the process that executes a run wake on its writes (they never poll it), and
``DurableRun.abort`` stops a run where it executes: after its turn, a durable sub-agent
running for it stops after its own turn and its answer so far comes back marked
``stopped_early``; a run waiting for a decision ends (DBOS on SQLite,
asyncio, one launch for the module)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from treadle import (
    Agent,
    Ask,
    AssistantMessage,
    Hooks,
    RunHandle,
    TextContent,
    ToolCall,
    durable,
    tool,
)
from treadle.context import validate_transcript
from treadle.errors import StateError
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GATE: dict[str, anyio.Event] = {}  # set by each test, for the tools of its run


@tool(idempotent=True)
async def take_notes(topic: str) -> str:
    """Take notes on a topic (waits until the test lets it finish)."""
    GATE["reached"].set()
    await GATE["finish"].wait()
    return f"three notes on {topic}"


@tool(category="info", idempotent=True)
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: 21 °C"


class AskAlways(Hooks):
    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Ask:
        return Ask()


def calling(*calls: ToolCall, text: str = "") -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text=text), *calls] if text else list(calls))


CHILD_SO_FAR = "Three notes mention anyio so far; checking the rest."


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("durable-stops")
    researcher_model = ScriptedProvider(
        [
            calling(
                ToolCall(id="n1", name="take_notes", arguments={"topic": "anyio"}),
                text=CHILD_SO_FAR,
            ),
            "never: the researcher was stopped after its first turn",
        ],
        chunks=4,
    )
    researcher = durable.DurableAgent(
        Agent(researcher_model, name="researcher", tools=[take_notes]), name="s-researcher"
    )
    lead_model = ScriptedProvider(
        [
            calling(ToolCall(id="r1", name="researcher", arguments={"task": "Notes on anyio."})),
            "never: the lead was stopped after its first turn",
        ]
    )
    lead = durable.DurableAgent(Agent(lead_model, tools=[researcher.as_tool()]), name="s-lead")
    asking_model = ScriptedProvider(
        [calling(ToolCall(id="c0", name="lookup", arguments={"city": "Porto"})), "never"]
    )
    asking = durable.DurableAgent(
        Agent(
            asking_model,
            tools=[lookup],
            hooks=[AskAlways()],
        ),
        name="s-ask",
    )
    script = [
        calling(ToolCall(id=f"c{i}", name="lookup", arguments={"city": f"C{i}"})) for i in range(2)
    ]
    reading = durable.DurableAgent(
        Agent(ScriptedProvider([*script, "Done.", *script, "Done."], chunks=6), tools=[lookup]),
        name="s-read",
        queue_concurrency=1,
    )
    loop = asyncio.new_event_loop()
    loop.run_until_complete(durable.launch(f"sqlite:///{root / 'db.sqlite'}"))
    try:
        yield {
            "loop": loop,
            "lead": lead,
            "lead_model": lead_model,
            "researcher_model": researcher_model,
            "asking": asking,
            "asking_model": asking_model,
            "reading": reading,
        }
    finally:
        loop.run_until_complete(durable.shutdown())
        loop.close()


def test_the_parents_abort_after_turn_stops_a_durable_sub_agent_after_its_turn(
    launched: dict[str, Any],
) -> None:
    loop: asyncio.AbstractEventLoop = launched["loop"]
    lead: durable.DurableAgent = launched["lead"]

    async def go() -> tuple[Any, Any]:
        GATE["reached"], GATE["finish"] = anyio.Event(), anyio.Event()
        run = await lead.start("Research anyio.", run_id="lead-1")
        await GATE["reached"].wait()  # the researcher is inside its first turn's tool
        run.abort("after_turn")
        GATE["finish"].set()
        return await run.result(), await durable.DurableRun("lead-1-r1").result()

    result, child = loop.run_until_complete(go())
    # the researcher finished the turn it was in, its tool included, and stopped there
    assert len(launched["researcher_model"].requests) == 1
    assert child.reason == "cancelled"
    assert [m.role for m in child.messages] == ["user", "assistant", "tool_result"]
    # its answer so far is the lead's tool result: not an error, marked stopped early
    answer = next(m for m in result.messages if m.role == "tool_result")
    assert not answer.is_error
    assert answer.text.startswith(CHILD_SO_FAR)
    assert "stopped early" in answer.text
    assert answer.details["stopped_early"] is True
    assert answer.details["run_id"] == "lead-1-r1"
    # the lead finished its own turn and stopped: no further model call
    assert result.reason == "cancelled"
    assert len(launched["lead_model"].requests) == 1
    assert validate_transcript(result.messages) == []


def test_abort_while_waiting_for_a_decision_ends_the_run(launched: dict[str, Any]) -> None:
    loop: asyncio.AbstractEventLoop = launched["loop"]
    asking: durable.DurableAgent = launched["asking"]

    async def go() -> tuple[Any, list[Any]]:
        run = await asking.start("Weather in Porto?")
        for _ in range(3000):  # a loaded machine may take a while to get there
            if await run.waiting() == ["c0"]:
                break
            await asyncio.sleep(0.01)
        run.abort("after_turn")
        return await run.result(), [e async for e in run.events()]

    result, events = loop.run_until_complete(go())
    # it ended at once: the call it waited on stays undecided, as for any loop cancelled
    # while resuming calls (contract), and no model call was made after the stop
    assert result.reason == "cancelled"
    assert result.pending_tool_calls == ["c0"]
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert len(launched["asking_model"].requests) == 1
    ends = [e.reason for e in events if e.type == "agent_end"]
    assert ends == ["suspended", "cancelled"]


def test_abort_of_a_run_that_does_not_execute_here_says_so(launched: dict[str, Any]) -> None:
    with pytest.raises(StateError, match="does not execute in this process"):
        durable.DurableRun("elsewhere").abort("after_turn")


def test_a_reader_of_a_run_executing_here_wakes_on_its_writes(
    launched: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never a poll: the reader waits for the run's writes and its end, so it never reads
    the run's status (a poll reads it each time it finds nothing new)."""
    from dbos import DBOSClient

    loop: asyncio.AbstractEventLoop = launched["loop"]
    reading: durable.DurableAgent = launched["reading"]

    async def no_status(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the reader polled the run's status")

    async def go() -> tuple[list[Any], list[Any]]:
        run = await reading.start("Two cities.")
        monkeypatch.setattr(DBOSClient, "list_workflows_async", no_status)
        followed = [e async for e in run.events(poll_s=3600)]
        monkeypatch.undo()
        return followed, [e async for e in run.events()]

    followed, stored = loop.run_until_complete(go())
    assert [e.model_dump() for e in followed] == [e.model_dump() for e in stored]
    assert followed[-1].type == "agent_end" and followed[-1].reason == "completed"


def test_a_reader_on_another_threads_loop_wakes_on_the_writes_of_a_run_here(
    launched: dict[str, Any],
) -> None:
    """A reader on an event loop of its own, in another thread (a sync web framework's
    worker), follows a queued run executing on the loop that launched DBOS: each write is
    handed over to its loop (with an hour between polls, only a wake-up ends this read)."""
    loop: asyncio.AbstractEventLoop = launched["loop"]
    reading: durable.DurableAgent = launched["reading"]

    async def follow(run_id: str) -> list[Any]:
        with anyio.fail_after(60):  # against a hang: an hour between polls otherwise
            return [e async for e in durable.DurableRun(run_id).events(poll_s=3600)]

    async def go() -> list[Any]:
        run = await reading.enqueue("Two cities.")
        return await anyio.to_thread.run_sync(asyncio.run, follow(run.run_id))

    events = loop.run_until_complete(go())
    assert events[0].type == "agent_start"
    assert events[-1].type == "agent_end" and events[-1].reason == "completed"
