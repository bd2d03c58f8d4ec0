"""A durable run in this process (DBOS on SQLite, asyncio — DBOS runs on asyncio only):
its result, its events from any cursor, the session store, approvals and cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from treadle import (
    Agent,
    Ask,
    AssistantMessage,
    Hooks,
    RunHandle,
    TextContent,
    ToolCall,
    ToolContext,
    UsageError,
    durable,
    tool,
)
from treadle.providers import StreamDone, StreamStart, TextDelta
from treadle.sessions import JsonlStore
from treadle.testing import ScriptedProvider
from treadle.tools import ApprovalRequired

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@tool(category="info", idempotent=True)
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: 21 °C"


class AskAlways(Hooks):
    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Ask:
        return Ask()


class Burst:
    """Streams its answer's pieces with no pause between them, so a reader cannot look at
    one before the next comes: what the stream joins then depends on timing alone."""

    name = "burst"
    model = "burst-model"
    pieces = ["Lis", "bon", " is", " sunny", "."]

    async def stream(self, request: Any, *, cancel: Any = None) -> AsyncIterator[Any]:
        yield StreamStart(model=self.model)
        for piece in self.pieces:
            yield TextDelta(index=0, text=piece)
        text = TextContent(text="".join(self.pieces))
        yield StreamDone(message=AssistantMessage(content=[text], model=self.model))


@tool(category="info")
def pay(amount: int, ctx: ToolContext[Any]) -> str:
    """Pay an amount; over 100 a person approves it first."""
    if amount > 100 and not ctx.approved:
        raise ApprovalRequired(f"Pay {amount}?", {"quote": f"q-{amount}"})
    return f"paid {amount} with {ctx.saved['quote']}"


def script(n: int) -> list[object]:
    calls = [
        AssistantMessage(content=[ToolCall(id=f"c{i}", name="lookup", arguments={"city": f"C{i}"})])
        for i in range(n)
    ]
    return [*calls, "Done."]


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    root = tmp_path_factory.mktemp("durable")
    store = JsonlStore(root / "sessions")
    agents = {
        "plain": durable.DurableAgent(
            Agent(ScriptedProvider(script(2) * 3, chunks=4), tools=[lookup]),
            name="t-plain",
            store=store,
        ),
        "burst": durable.DurableAgent(Agent(Burst()), name="t-burst"),  # type: ignore[arg-type]
        "ask": durable.DurableAgent(
            Agent(ScriptedProvider(script(1), chunks=2), tools=[lookup], hooks=[AskAlways()]),
            name="t-ask",
        ),
        # its own script: a ScriptedProvider answers once, and "ask" serves another test
        "ask-gate": durable.DurableAgent(
            Agent(ScriptedProvider(script(1), chunks=2), tools=[lookup], hooks=[AskAlways()]),
            name="t-ask-gate",
        ),
    }
    agents["pay"] = durable.DurableAgent(
        Agent(
            ScriptedProvider(
                [
                    AssistantMessage(
                        content=[ToolCall(id="p0", name="pay", arguments={"amount": 500})]
                    ),
                    "Paid.",
                ]
            ),
            tools=[pay],
        ),
        name="t-pay",
    )
    loop = asyncio.new_event_loop()
    loop.run_until_complete(durable.launch(f"sqlite:///{root / 'db.sqlite'}"))
    try:
        yield {"loop": loop, "store": store, **agents}
    finally:
        loop.run_until_complete(durable.shutdown())
        loop.close()


def test_result_events_and_session(launched: dict[str, object]) -> None:
    loop: asyncio.AbstractEventLoop = launched["loop"]  # type: ignore[assignment]
    agent: durable.DurableAgent = launched["plain"]  # type: ignore[assignment]

    async def go() -> tuple[object, list[object], list[object]]:
        run = await agent.start("Two cities, please.")
        result = await run.result()
        every = [e async for e in run.events()]
        later = [e async for e in run.events(after=5)]
        assert [e.seq async for e in run.events(from_seq=6)] == [e.seq for e in later]
        return result, every, later

    result, every, later = loop.run_until_complete(go())
    assert result.reason == "completed" and result.text == "Done."  # type: ignore[attr-defined]
    seqs = [e.seq for e in every]  # type: ignore[attr-defined]
    assert seqs == list(range(len(every)))
    assert [e.seq for e in later] == seqs[6:]  # type: ignore[attr-defined]
    assert every[0].type == "agent_start" and every[-1].type == "agent_end"  # type: ignore[attr-defined]
    store: JsonlStore = launched["store"]  # type: ignore[assignment]
    run_id = loop.run_until_complete(agent.runs())[0]["run_id"]
    stored = store.load(run_id).messages
    assert [m.model_dump(exclude={"timestamp"}) for m in stored] == [
        m.model_dump(exclude={"timestamp"})
        for m in result.messages  # type: ignore[attr-defined]
    ]


def test_a_durable_run_stores_the_deltas_of_one_write_as_one_update(
    launched: dict[str, object],
) -> None:
    """Deltas streamed between two writes of the event log are stored as one update (a
    replayed answer is matched with the stored one by its text, not update by update), so
    a burst of five deltas is one stored update with all of their text."""
    loop: asyncio.AbstractEventLoop = launched["loop"]  # type: ignore[assignment]
    agent: durable.DurableAgent = launched["burst"]  # type: ignore[assignment]

    async def go() -> list[Any]:
        run = await agent.start("Weather?")
        await run.result()
        return [e async for e in run.events()]

    updates = [e.delta.text for e in loop.run_until_complete(go()) if e.type == "message_update"]
    assert updates == ["".join(Burst.pieces)]


def test_approval_waits_then_a_denial_answers_the_call(launched: dict[str, object]) -> None:
    loop: asyncio.AbstractEventLoop = launched["loop"]  # type: ignore[assignment]
    agent: durable.DurableAgent = launched["ask"]  # type: ignore[assignment]

    async def go() -> object:
        run = await agent.start("Look C0 up.")
        for _ in range(200):
            if await run.waiting() == ["c0"]:
                break
            await asyncio.sleep(0.02)
        assert await run.status() == "PENDING"
        await run.deny("c0", "not now")
        return await run.result()

    result = loop.run_until_complete(go())
    assert result.reason == "completed"  # type: ignore[attr-defined]
    denied = [m for m in result.messages if m.role == "tool_result"]  # type: ignore[attr-defined]
    assert denied[0].is_error and "not now" in denied[0].text


def test_a_tool_that_asks_mid_call_waits_and_gets_its_state_back(
    launched: dict[str, object],
) -> None:
    loop: asyncio.AbstractEventLoop = launched["loop"]  # type: ignore[assignment]
    agent: durable.DurableAgent = launched["pay"]  # type: ignore[assignment]

    async def go() -> object:
        run = await agent.start("Pay 500.")
        for _ in range(3000):
            if await run.waiting() == ["p0"]:
                break
            await asyncio.sleep(0.02)
        assert await run.status() == "PENDING"
        await run.approve("p0")
        return await run.result()

    result = loop.run_until_complete(go())
    assert result.reason == "completed"  # type: ignore[attr-defined]
    paid = [m for m in result.messages if m.role == "tool_result"]  # type: ignore[attr-defined]
    assert [m.text for m in paid] == ["paid 500 with q-500"]


def test_a_decision_names_a_call_the_run_waits_on(launched: dict[str, object]) -> None:
    """The one gate: a decision for a call the run is not waiting on is refused (it would
    wait in the run's inbox for a later call with that id); one sent twice is not taken by
    a later suspension."""
    loop: asyncio.AbstractEventLoop = launched["loop"]  # type: ignore[assignment]
    agent: durable.DurableAgent = launched["ask-gate"]  # type: ignore[assignment]

    async def go() -> object:
        run = await agent.start("Look C0 up.")
        with pytest.raises(UsageError, match="'c9'"):
            await run.approve("c9")  # a call that does not exist (yet)
        for _ in range(3000):  # a loaded machine may take a while to get there
            if await run.waiting() == ["c0"]:
                break
            await asyncio.sleep(0.02)
        with pytest.raises(UsageError, match=r"'c9'.*waiting: 'c0'"):
            await run.approve("c9")
        await run.deny("c0", "not now")
        return await run.result()

    result = loop.run_until_complete(go())
    denied = [m for m in result.messages if m.role == "tool_result"]  # type: ignore[attr-defined]
    assert denied[0].is_error and "not now" in denied[0].text


def test_an_agent_made_again_with_the_same_name_replaces_the_first(
    launched: dict[str, object],
) -> None:
    """A notebook cell run twice: the newest definition serves the name, no error."""
    loop: asyncio.AbstractEventLoop = launched["loop"]  # type: ignore[assignment]
    durable.DurableAgent(Agent(ScriptedProvider("First version.")), name="t-again")
    second = durable.DurableAgent(Agent(ScriptedProvider("Second version.")), name="t-again")

    async def go() -> object:
        return await (await second.start("Which version?")).result()

    assert loop.run_until_complete(go()).text == "Second version."  # type: ignore[attr-defined]


def test_an_agent_with_its_own_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="DurableAgent\\(store="):
        durable.DurableAgent(
            Agent(ScriptedProvider("x"), store=JsonlStore(tmp_path)), name="t-store"
        )


def test_a_durable_sub_agent_is_a_child_workflow(
    tmp_path: Path, launched: dict[str, object]
) -> None:
    loop: asyncio.AbstractEventLoop = launched["loop"]  # type: ignore[assignment]
    child = durable.DurableAgent(
        Agent(ScriptedProvider(["The capital is Lisbon."], chunks=2), name="geo"), name="t-geo"
    )
    call = ToolCall(id="g1", name="geo", arguments={"task": "Capital of Portugal?"})
    parent = durable.DurableAgent(
        Agent(
            ScriptedProvider([AssistantMessage(content=[call]), "Lisbon."]), tools=[child.as_tool()]
        ),
        name="t-parent",
    )

    async def go() -> tuple[object, list[object], object]:
        run = await parent.start("Ask geo.", run_id="parent-1")
        result = await run.result()
        child_run = durable.DurableRun("parent-1-g1")
        child_events = [e async for e in child_run.events()]
        return result, child_events, await child_run.result()

    result, child_events, child_result = loop.run_until_complete(go())
    answer = next(m for m in result.messages if m.role == "tool_result")  # type: ignore[attr-defined]
    assert answer.text == "The capital is Lisbon."
    assert answer.details["run_id"] == "parent-1-g1"
    assert child_result.text == "The capital is Lisbon."  # type: ignore[attr-defined]
    assert child_events[0].type == "agent_start" and child_events[-1].type == "agent_end"  # type: ignore[attr-defined]

    async def parent_of() -> str | None:
        from dbos import DBOS

        found = await DBOS.list_workflows_async(workflow_ids=["parent-1-g1"])
        return found[0].parent_workflow_id

    assert loop.run_until_complete(parent_of()) == "parent-1"


def test_the_child_tool_outside_a_durable_run_says_so() -> None:
    child = durable.DurableAgent(Agent(ScriptedProvider("x"), name="lone"), name="t-lone")
    call = ToolCall(id="l1", name="lone", arguments={"task": "hi"})
    agent = Agent(
        ScriptedProvider([AssistantMessage(content=[call]), "ok"]), tools=[child.as_tool()]
    )
    result = asyncio.run(agent.run("go"))
    answer = next(m for m in result.messages if m.role == "tool_result")
    assert answer.is_error and "DurableAgent's run" in answer.text


def test_an_unknown_run_is_a_clear_error(launched: dict[str, object]) -> None:
    loop: asyncio.AbstractEventLoop = launched["loop"]  # type: ignore[assignment]
    with pytest.raises(LookupError, match="no durable run 'nope'"):
        loop.run_until_complete(durable.DurableRun("nope").result())
