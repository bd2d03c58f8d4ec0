"""Where durable runs meet the Agent's other features: a durable sub-agent's usage, the
first loop's continuation kind, structured output, planning, and the runtime's async
launch/shutdown (DBOS on SQLite, asyncio)."""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from treadle import Agent, AssistantMessage, TextContent, ToolCall, Usage, durable
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class Trip(BaseModel):
    city: str
    days: int


def used(n: int) -> Usage:
    return Usage(input=n, output=0, total_tokens=n)


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[asyncio.AbstractEventLoop]:
    root = tmp_path_factory.mktemp("durable-features")
    loop = asyncio.new_event_loop()
    loop.run_until_complete(durable.launch(f"sqlite:///{root / 'db.sqlite'}"))
    try:
        yield loop
    finally:
        loop.run_until_complete(durable.shutdown())
        loop.close()


def run(loop: asyncio.AbstractEventLoop, agent: durable.DurableAgent, prompt: str) -> Any:
    async def go() -> tuple[Any, list[Any], str]:
        handle = await agent.start(prompt)
        result = await handle.result()
        return result, [e async for e in handle.events()], handle.run_id

    return loop.run_until_complete(go())


def test_a_durable_sub_agents_usage_is_in_the_parents_result(
    loop: asyncio.AbstractEventLoop,
) -> None:
    answer = AssistantMessage(content=[TextContent(text="Lisbon.")], usage=used(100))
    child = durable.DurableAgent(Agent(ScriptedProvider([answer]), name="geo"), name="f-geo")
    call = ToolCall(id="g1", name="geo", arguments={"task": "Capital of Portugal?"})
    parent = durable.DurableAgent(
        Agent(
            ScriptedProvider(
                [
                    AssistantMessage(content=[call], usage=used(10)),
                    AssistantMessage(content=[TextContent(text="Lisbon.")], usage=used(20)),
                ]
            ),
            tools=[child.as_tool()],
        ),
        name="f-parent",
    )
    result, _, _ = run(loop, parent, "Ask geo.")
    assert result.reason == "completed"
    assert result.usage.input == 130  # the parent's two requests and the child's one


def test_a_fresh_durable_run_is_an_initial_loop(loop: asyncio.AbstractEventLoop) -> None:
    agent = durable.DurableAgent(Agent(ScriptedProvider("Hello.")), name="f-initial")
    _, events, _ = run(loop, agent, "Hi.")
    start = events[0]
    assert start.type == "agent_start"
    assert start.continuation_kind == "initial"
    assert start.parent_loop_id is None


def test_a_durable_run_keeps_its_structured_output(loop: asyncio.AbstractEventLoop) -> None:
    call = ToolCall(id="o1", name="final_result", arguments={"city": "Porto", "days": 3})
    agent = durable.DurableAgent(
        Agent(ScriptedProvider([AssistantMessage(content=[call]), "Done."]), output_type=Trip),
        name="f-output",
    )
    result, _, run_id = run(loop, agent, "Plan three days in Porto.")
    assert result.output == Trip(city="Porto", days=3)
    # a handle made from the run id alone, as another process makes it: the JSON value
    again = loop.run_until_complete(durable.DurableRun(run_id).result())
    assert again.output == {"city": "Porto", "days": 3}


def test_a_durable_planning_run_plans_then_answers(loop: asyncio.AbstractEventLoop) -> None:
    provider = ScriptedProvider(["1. Look it up\n2. Answer", "Done as planned."])
    agent = durable.DurableAgent(Agent(provider, planning=True), name="f-plan")
    result, events, _ = run(loop, agent, "Plan it.")
    assert result.reason == "completed" and result.text == "Done as planned."
    assert [e.type for e in events if e.type == "plan_created"] == ["plan_created"]


def test_launch_and_shutdown_are_both_awaited() -> None:
    assert inspect.iscoroutinefunction(durable.launch)
    assert inspect.iscoroutinefunction(durable.shutdown)


def test_a_planning_agent_takes_a_list_of_prompts(tmp_path: Path) -> None:
    provider = ScriptedProvider(["1. Read a\n2. Read b", "Both read."])
    result = asyncio.run(Agent(provider, planning=True).run(["a", "b"]))
    assert result.reason == "completed" and result.text == "Both read."
    sent = [m.text for m in provider.requests[0].messages if m.role == "user"]
    assert sent == ["a", "b"]


def test_a_run_started_here_is_awaited_not_polled(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``result()`` on the handle ``start()`` returned waits on the run's own end in this
    process: it never reads the run's status (a poll with growing sleeps learnt the end up
    to 250 ms late)."""
    from dbos import DBOSClient

    agent = durable.DurableAgent(Agent(ScriptedProvider("Hello.")), name="f-awaited")

    async def no_status(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("result() read the workflow status")

    async def go() -> Any:
        handle = await agent.start("Hi.")
        monkeypatch.setattr(DBOSClient, "list_workflows_async", no_status)
        monkeypatch.setattr(DBOSClient, "retrieve_workflow_async", no_status)
        return await handle.result()

    assert loop.run_until_complete(go()).text == "Hello."


def test_only_a_tool_not_idempotent_has_steps_of_its_own(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """The marker step exists to tell a call cut by a crash from one never started, and
    the result step to keep a side effect from happening twice: an idempotent tool needs
    neither (its result is kept with the event log's write of its end), so its calls are
    no DBOS step; a tool not idempotent has both."""
    from dbos import DBOS

    from treadle import tool

    @tool(idempotent=True)
    def again(n: int) -> str:
        """Safe to repeat."""
        return f"again {n}"

    @tool
    def once(n: int) -> str:
        """Not safe to repeat."""
        return f"once {n}"

    calls = [
        ToolCall(id="a1", name="again", arguments={"n": 1}),
        ToolCall(id="o1", name="once", arguments={"n": 1}),
    ]
    agent = durable.DurableAgent(
        Agent(ScriptedProvider([AssistantMessage(content=calls), "Done."]), tools=[again, once]),
        name="f-markers",
    )
    result, _, run_id = run(loop, agent, "Both.")
    assert [m.text for m in result.messages if m.role == "tool_result"] == ["again 1", "once 1"]
    steps = loop.run_until_complete(DBOS.list_workflow_steps_async(run_id))
    names = [s["function_name"] for s in steps]
    assert names.count("treadle.tool.start") == 1
    assert names.count("treadle.tool") == 1
    store = durable._connection.require("events")
    kept = loop.run_until_complete(store.kept_results(run_id))
    assert list(kept) == ["a1"] and "again 1" in kept["a1"]


def test_a_model_request_is_kept_with_the_event_log_not_as_a_step(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """A model request's checkpoint (what the provider streamed) is stored with the event
    log, in the write of its message_end or an earlier one: no DBOS step of its own."""
    from dbos import DBOS

    from treadle import tool

    @tool(idempotent=True)
    def again(n: int) -> str:
        """Safe to repeat."""
        return f"again {n}"

    call = ToolCall(id="a1", name="again", arguments={"n": 1})
    agent = durable.DurableAgent(
        Agent(ScriptedProvider([AssistantMessage(content=[call]), "Done."]), tools=[again]),
        name="f-answers",
    )
    result, _, run_id = run(loop, agent, "Go.")
    assert result.text == "Done."
    assert loop.run_until_complete(DBOS.list_workflow_steps_async(run_id)) == []
    store = durable._connection.require("events")
    results, answers = loop.run_until_complete(store.kept(run_id))
    assert sorted(answers) == [0, 1] and list(results) == ["a1"]
    assert '"a1"' in answers[0] and "Done." in answers[1]


def _hold_write_lock(path: str, hold_s: float) -> None:
    """Another connection takes the database's write lock and keeps it ``hold_s``: the
    event log's next write waits for it (returns once the lock is taken)."""
    taken = threading.Event()

    def hold() -> None:
        with sqlite3.connect(path, timeout=5, isolation_level=None) as db:
            db.execute("BEGIN IMMEDIATE")
            taken.set()
            time.sleep(hold_s)
            db.execute("COMMIT")

    threading.Thread(target=hold, daemon=True).start()
    taken.wait(5)


class _Counting:
    """Answers as ``inner`` does; at each request counts the tool results the run has
    stored."""

    def __init__(self, inner: Any, path: str) -> None:
        self.inner, self.path = inner, path
        self.name, self.model = "counting", "counting"
        self.stored: list[int] = []

    async def stream(self, request: Any, *, cancel: Any = None) -> Any:
        from dbos import DBOS

        with sqlite3.connect(self.path, timeout=5) as db:
            found = db.execute(
                "select count(*) from treadle_durable_results where workflow_id = ?",
                (DBOS.workflow_id,),
            ).fetchone()
        self.stored.append(found[0])
        async for event in self.inner.stream(request, cancel=cancel):
            yield event


def test_the_next_request_waits_for_a_tool_result_already_being_written(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """An idempotent call's result is stored before the next model request goes out, also
    when the event log's flusher took it and its write is still in flight (a check that
    found nothing queued let the request go before the write committed)."""
    from treadle import Hooks, RunHandle, tool

    path = str(durable._connection.require("events").engine.url.database)

    @tool(idempotent=True)
    def look(n: int) -> str:
        """Looks, and leaves the database locked for a while."""
        _hold_write_lock(path, 0.4)  # the flusher's write of this result waits for it
        return "ok"

    class Slow(Hooks):
        async def after_tool_call(self, run: RunHandle, call: Any, result: Any) -> Any:
            await asyncio.sleep(0.15)  # the flusher takes the result meanwhile
            return None

    call = ToolCall(id="l1", name="look", arguments={"n": 1})
    provider = _Counting(ScriptedProvider([AssistantMessage(content=[call]), "Done."]), path)
    agent = durable.DurableAgent(
        Agent(provider, tools=[look], hooks=[Slow()]), name="f-result-first"
    )
    result, _, _ = run(loop, agent, "Look.")
    assert result.text == "Done."
    assert provider.stored == [0, 1]  # the second request saw the result stored


def test_an_answers_citations_are_in_the_result_and_the_stored_events(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """Citations come on a text block's end (not as deltas): the durable run's stored
    events and its result carry them, as the Agent's do."""
    from treadle.types import Citation

    page = Citation(kind="url_citation", url="https://example.com/tea", start=0, end=9)
    answer = AssistantMessage(content=[TextContent(text="Green tea is steamed.", citations=[page])])
    agent = durable.DurableAgent(Agent(ScriptedProvider([answer])), name="f-cited")
    result, events, _ = run(loop, agent, "Tea?")
    assert result.messages[-1].content[0].citations == [page]
    ends = [e for e in events if e.type == "message_end" and e.message.role == "assistant"]
    assert ends[-1].message.content[0].citations == [page]
    updates = [e for e in events if e.type == "message_update"]
    assert updates and updates[0].message.content[0].text  # updates read back whole


def test_an_eager_tool_starts_once_its_answer_is_stored(loop: asyncio.AbstractEventLoop) -> None:
    """An eager tool (``eager=True``) starts as soon as its call streamed in a plain run; in
    a durable run its call waits for the answer's checkpoint, as every call does, so its side
    effect never follows an answer a crash could still lose (it started mid-stream, before)."""
    from dbos import DBOS

    from treadle import tool

    path = str(durable._connection.require("events").engine.url.database)
    stored_then: list[int] = []

    @tool(eager=True)
    def look(q: str) -> str:
        """Looks, and notes whether the answer that asked is stored."""
        with sqlite3.connect(path) as db:
            found = db.execute(
                "select count(*) from treadle_durable_answers where workflow_id = ?",
                (DBOS.workflow_id,),
            ).fetchone()
        stored_then.append(found[0])
        return "seen"

    call = ToolCall(id="e1", name="look", arguments={"q": "tea"})
    answer = AssistantMessage(content=[call, TextContent(text="and more text streams after it")])
    agent = durable.DurableAgent(
        Agent(ScriptedProvider([answer, "Done."], chunks=8), tools=[look]), name="f-eager"
    )
    result, events, _ = run(loop, agent, "Look.")
    assert result.text == "Done."
    assert stored_then == [1]  # the first answer was stored when the call ran
    main = [e.type for e in events if e.depth == 0]
    answer_end = main.index("message_end", main.index("message_update"))
    assert main.index("tool_execution_start") > answer_end
