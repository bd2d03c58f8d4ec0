"""Recovery reconciles a run's events by identity, not position (``durable._events.Replay``,
no database): the first execution's events are cut at every point — once, then a second
time in the middle of what the recovered execution wrote — and the next execution, whose
parallel tool calls end in the other order and whose loop has another id, adds only what is
new. The stored stream always reads as one valid run: the contract's invariants, each call
started and ended once, ``seq`` 0, 1, 2 ..."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from treadle import Agent, AgentEvent, AssistantMessage, TextContent, ToolCall, tool
from treadle.durable._events import Replay
from treadle.durable._store import Rebuild, parse
from treadle.testing import ScriptedProvider

from .checks import check_one_loop, check_run_events

pytestmark = pytest.mark.anyio

SLOW: dict[str, float] = {}


@tool
async def work(name: str) -> str:
    """Do some work."""
    await anyio.sleep(SLOW.get(name, 0.0))
    return f"{name} done"


def script(final: str) -> list[Any]:
    calls = [ToolCall(id=f"c-{n}", name="work", arguments={"name": n}) for n in "ab"]
    return [AssistantMessage(content=[TextContent(text="Both at once."), *calls]), final]


async def execution(
    slow: str, final: str = "Both are done, in the end.", chunks: int = 5
) -> list[AgentEvent]:
    """One execution's events: the call named ``slow`` ends last; each answer streamed in
    ``chunks`` deltas."""
    SLOW.clear()
    SLOW[slow] = 0.05
    agent = Agent(ScriptedProvider(script(final), chunks=chunks), tools=[work])
    agent.coalesce_deltas = False  # many updates: many cut points to recover from
    async with agent.stream("Do a and b.") as events:
        return [e async for e in events]


def replayed(
    stored: list[AgentEvent], events: list[AgentEvent], *, every: int = 1
) -> list[AgentEvent]:
    """What an execution producing ``events`` adds to the ``stored`` ones, with a write
    after each ``every`` events (updates queued together are stored as one)."""
    replay = Replay(None, "run", stored)  # type: ignore[arg-type]  # add() never writes
    rows = []
    for n, event in enumerate(events, 1):
        replay.add(event)
        if n % every == 0:
            rows += replay.take()
    rows += replay.take()
    rebuild = Rebuild("run")
    rebuild.events(stored)  # a reader that read the stored events, then the new rows
    return rebuild.events(parse(rows))


def again(first: list[AgentEvent], stored: list[AgentEvent]) -> list[AgentEvent]:
    """What a recovered execution of the run of ``first`` (its events as sent) sends,
    ``stored`` being stored: a new id for every loop; no sub-agent for a call whose end was
    stored; an answer stored whole comes from its checkpoint, with none of its failed
    attempts (a request the crash cut is sent again: it may fail as it did)."""
    ended = {e.tool_call_id for e in stored if e.type == "tool_execution_end"}  # type: ignore[attr-defined]
    answered = sum(
        1
        for e in stored
        if e.depth == 0 and e.type == "message_end" and e.message.role == "assistant"  # type: ignore[attr-defined]
    )
    skipped: set[str] = set()  # the loops of sub-agents whose call ended: not run again
    fresh: dict[str, str] = {}

    def new(loop: str | None) -> str | None:
        return None if loop is None else fresh.setdefault(loop, str(uuid.uuid4()))

    out: list[AgentEvent | None] = []
    answer = 0  # the main loop's answers so far
    attempt: list[int] = []  # where the current answer's attempt is in ``out``
    for e in first:
        if e.type == "agent_start" and e.depth > 0:
            if e.parent_tool_call_id in ended or e.parent_loop_id in skipped:  # type: ignore[attr-defined]
                skipped.add(e.loop_id)
        if e.loop_id in skipped:
            continue
        main = e.depth == 0
        if main and e.type in ("provider_retry", "provider_fallback") and answer < answered:
            for i in attempt if e.discard_partial else ():  # type: ignore[attr-defined]
                out[i] = None  # a failed attempt of a stored answer: not made again
            attempt = []
            continue
        update: dict[str, Any] = {"loop_id": new(e.loop_id)}
        if e.type == "agent_start":
            update["parent_loop_id"] = new(e.parent_loop_id)  # type: ignore[attr-defined]
        if e.type == "tool_execution_end" and e.child_loop_id is not None:  # type: ignore[attr-defined]
            update["child_loop_id"] = new(e.child_loop_id)  # type: ignore[attr-defined]
        if main and e.type == "message_start" and e.message.role == "assistant":  # type: ignore[attr-defined]
            attempt = []
        if main and e.type in ("message_start", "message_update"):
            attempt.append(len(out))
        if main and e.type == "message_end" and e.message.role == "assistant":  # type: ignore[attr-defined]
            answer += 1
            attempt = []
        out.append(e.model_copy(update=update))
    return [e for e in out if e is not None]


async def test_every_cut_of_a_run_with_parallel_calls_recovers_to_one_valid_run() -> None:
    first = replayed([], await execution(slow="a"))  # b ends first
    again = await execution(slow="b")  # after a restart a ends first, in another loop
    assert first[0].loop_id != again[0].loop_id
    ends = [e.tool_call_id for e in first if e.type == "tool_execution_end"]  # type: ignore[attr-defined]
    assert ends == ["c-b", "c-a"]
    assert [e.tool_call_id for e in again if e.type == "tool_execution_end"] == ["c-a", "c-b"]  # type: ignore[attr-defined]
    for cut in range(len(first) + 1):
        stored = first[:cut]
        whole = stored + replayed(stored, again)
        check_run_events(whole)
        assert len(whole) == len(first)  # each event once
        # a second crash while the recovered execution writes: a third one finishes
        added = replayed(stored, again)
        for second_cut in range(0, len(added) + 1, 3):
            twice = stored + added[:second_cut]
            check_run_events(twice + replayed(twice, again))


async def test_an_answer_cut_mid_stream_is_continued_or_discarded_once() -> None:
    first = replayed([], await execution(slow="a"))
    final_starts = [i for i, e in enumerate(first) if e.type == "message_start"]
    cut = final_starts[-1] + 3  # inside the final answer's stream
    stored = first[:cut]
    # the request sent again streams the same answer: it goes on where the stored part ends
    same = stored + replayed(stored, await execution(slow="b"))
    check_run_events(same)
    assert [e.type for e in same].count("provider_retry") == 0
    # it streams another answer: the stored part is discarded once, then the new one
    other = await execution(slow="b", final="Done, both of them.")
    added = replayed(stored, other)
    changed = stored + added
    check_run_events(changed)
    retries = [e for e in changed if e.type == "provider_retry"]
    assert len(retries) == 1 and retries[0].discard_partial  # type: ignore[attr-defined]
    assert retries[0].error_kind == "worker_restarted"  # type: ignore[attr-defined]
    assert changed[-1].messages[-1].text == "Done, both of them."  # type: ignore[attr-defined]
    # and killed again after that retry: the retry is not repeated, nor the answer doubled
    for second_cut in range(len(added) + 1):
        twice = changed[: len(stored) + second_cut]
        whole = twice + replayed(twice, other)
        check_run_events(whole)
        assert [e.type for e in whole].count("provider_retry") == 1


def final_text(events: list[AgentEvent]) -> str:
    """The main loop's last answer as its stored updates stream it (deltas joined)."""
    start = max(i for i, e in enumerate(events) if e.type == "message_start" and e.depth == 0)
    return "".join(
        e.delta.text  # type: ignore[attr-defined]
        for e in events[start:]
        if e.type == "message_update" and e.depth == 0
    )


async def test_an_answer_cut_mid_stream_goes_on_whatever_its_updates_were_cut_into() -> None:
    """The stored part's updates joined two deltas each (a write every 2 events); the
    answer requested again streams the same text in other pieces (3 deltas, not 5), some
    crossing the stored part's end. It is matched by its text, not update by update: the
    answer goes on from the stored end, no retry, each character once."""
    final = "Both are done, in the end, and checked twice."
    first = replayed([], await execution(slow="a", final=final), every=2)
    start = max(i for i, e in enumerate(first) if e.type == "message_start")
    for cut in range(start + 1, len(first)):
        stored = first[:cut]
        again = await execution(slow="b", final=final, chunks=3)
        whole = stored + replayed(stored, again, every=3)
        check_run_events(whole)
        assert [e.type for e in whole].count("provider_retry") == 0
        assert final_text(whole) == final


class FailsMidAnswerOnce:
    """``inner``'s answers, but the first request is cut after ``after`` events of
    ``cut``'s answer by a retryable error (the loop retries it: ``provider_retry`` with
    ``discard_partial``, then ``inner`` answers)."""

    def __init__(self, inner: Any, cut: Any, after: int) -> None:
        self.inner, self.cut, self.after = inner, cut, after
        self.name, self.model = "flaky", "flaky"
        self.failed = False

    async def stream(self, request: Any, *, cancel: Any = None) -> Any:
        from treadle import ProviderError

        if self.failed:
            async for event in self.inner.stream(request, cancel=cancel):
                yield event
            return
        self.failed = True
        n = 0
        async for event in self.cut.stream(request, cancel=cancel):
            if n == self.after:
                raise ProviderError("network", "the connection dropped", provider="flaky")
            n += 1
            yield event


async def test_a_retried_answer_is_one_answer_after_a_crash() -> None:
    """The first execution's first answer is cut by a provider error and requested again
    (its partial part discarded); the recovered execution replays that answer from its
    checkpoint, at once. By identity the two are one answer: nothing is stored twice and
    the answers after it are not taken for it, wherever the first execution was cut."""
    from treadle.loop import RetryPolicy

    def agent(provider: Any) -> Agent[Any]:
        made = Agent(provider, tools=[work], retry=RetryPolicy(initial_delay_s=0, jitter=0))
        made.coalesce_deltas = False
        return made

    SLOW.clear()
    answers = script("Both are done.")
    cut = ScriptedProvider(answers[:1], chunks=5)
    flaky = FailsMidAnswerOnce(ScriptedProvider(answers, chunks=5), cut, after=3)
    async with agent(flaky).stream("Do a and b.") as events:
        first = replayed([], [e async for e in events])
    assert [e.type for e in first].count("provider_retry") == 1
    async with agent(ScriptedProvider(script("Both are done."), chunks=5)).stream(
        "Do a and b."
    ) as events:
        again = [e async for e in events]  # the recovered execution: no retry
    retried = next(i for i, e in enumerate(first) if e.type == "provider_retry")
    for cut in range(retried + 1, len(first) + 1):
        stored = first[:cut]
        whole = stored + replayed(stored, again)
        check_run_events(whole)
        assert len(whole) == len(first), cut  # each event once
        assert whole[-1].messages[-1].text == "Both are done."  # type: ignore[attr-defined]


async def delegating(nested: bool = False) -> list[AgentEvent]:
    """One execution's events: the run calls a sub-agent (``Agent.as_tool``), which, when
    ``nested``, calls a sub-agent of its own first."""
    inner = Agent(ScriptedProvider(["The inner answer, in pieces."], chunks=4), name="inner")
    inner.coalesce_deltas = False
    script: list[Any] = ["The helper's long answer, streamed in pieces."]
    tools = []
    if nested:
        ask = ToolCall(id="c-in", name="inner", arguments={"task": "look"})
        script.insert(0, AssistantMessage(content=[TextContent(text="Asking inner."), ask]))
        tools = [inner.as_tool(description="looks")]
    helper = Agent(ScriptedProvider(script, chunks=6), name="helper", tools=tools)
    helper.coalesce_deltas = False
    call = ToolCall(id="c-h", name="helper", arguments={"task": "help"})
    agent = Agent(
        ScriptedProvider([AssistantMessage(content=[TextContent(text="Asking."), call]), "Done."]),
        tools=[helper.as_tool(description="helps")],
    )
    agent.coalesce_deltas = False
    async with agent.stream("Go.") as events:
        return [e async for e in events]


def _sub_ends(events: list[AgentEvent]) -> dict[str, str]:
    return {e.loop_id: e.reason for e in events if e.depth > 0 and e.type == "agent_end"}  # type: ignore[attr-defined]


@pytest.mark.parametrize("nested", [False, True])
async def test_a_sub_agent_cut_by_a_crash_ends_cancelled_where_its_events_end(
    nested: bool,
) -> None:
    """A sub-agent (``Agent.as_tool``) is one tool call: cut by a crash, it runs again as a
    new loop, or not at all (a tool not marked idempotent). Either way the loop the crash
    cut ends in the stored events, first thing after them, as a cancelled loop would (each
    of its sub-agents' before it); without that it stayed open for ever."""
    first = replayed([], await delegating(nested))
    sub = [i for i, e in enumerate(first) if e.depth > 0]
    assert sub and max(e.depth for e in first) == (2 if nested else 1)
    for cut in range(sub[0] + 1, sub[-1] + 1):
        stored = first[:cut]
        cut_loops = {e.loop_id for e in stored if e.depth > 0} - set(_sub_ends(stored))
        assert cut_loops
        for again in (await delegating(nested), []):  # run again, or answered unknown
            added = replayed(stored, again)
            whole = stored + added
            if again:
                check_run_events(whole)
            closed = [e for e in added if e.depth > 0 and e.loop_id in cut_loops]
            assert added[: len(closed)] == closed  # the closing comes first
            assert {e.loop_id for e in closed} == cut_loops
            ends = _sub_ends(whole)
            assert all(ends[loop] == "cancelled" for loop in cut_loops)
            by_loop: dict[str, list[AgentEvent]] = {}
            for e in whole:
                if e.depth > 0:
                    by_loop.setdefault(e.loop_id, []).append(e)
            for events in by_loop.values():
                check_one_loop(events)
            order = [e.loop_id for e in closed if e.type == "agent_end"]
            depth = {e.loop_id: e.depth for e in closed}
            assert [depth[loop] for loop in order] == sorted(depth.values(), reverse=True)
            if again:  # the sub-agent's new run: loops of its own, to their end
                new = {e.loop_id for e in added if e.depth > 0} - cut_loops
                assert len(new) == (2 if nested else 1)
                assert all(ends[loop] == "completed" for loop in new)
            # a second crash right after the closing: nothing is closed twice
            assert replayed(whole if again else stored + added, []) == []


class _FailsFirst:
    """Its first request fails (retryable): after ``after`` events when ``after`` > 0, else
    before it streams anything; the retry and the rest answer as scripted."""

    def __init__(self, inner: ScriptedProvider, after: int) -> None:
        self.inner = inner
        self.after = after
        self.name, self.model = inner.name, inner.model
        self.calls = 0

    async def stream(self, request: Any, *, cancel: Any = None) -> Any:
        from treadle.providers import ProviderError

        self.calls += 1
        failing = self.calls == 1
        if failing and self.after == 0:
            raise ProviderError("overloaded", "overloaded", status_code=529)
        n = 0
        async for event in self.inner.stream(request, cancel=cancel):
            yield event
            n += 1
            if failing and n == self.after:
                raise ProviderError("overloaded", "overloaded mid-answer", status_code=529)


async def retried(after: int, fails: bool = True) -> list[AgentEvent]:
    """A run whose first request fails once (see ``_FailsFirst``; ``fails=False``: it does
    not) and is retried, then calls a tool and ends."""
    answers = script("Both are done.")
    if fails and after > 0:
        answers = [answers[0], *answers]  # the cut attempt takes an answer of its own
    inner = ScriptedProvider(answers, chunks=6)
    provider: Any = _FailsFirst(inner, after) if fails else inner
    agent = Agent(provider, tools=[work])
    agent.coalesce_deltas = False
    async with agent.stream("Do a and b.") as events:
        return [e async for e in events]


@pytest.mark.parametrize("after", [0, 3], ids=["before-streaming", "mid-answer"])
async def test_a_request_retried_around_a_crash_reads_as_one_valid_run(after: int) -> None:
    """A request that failed and was retried before or after the crash: a replay makes no
    failed attempt for an answer stored whole, and the request the crash cut, sent again,
    may fail again (every retry it makes is new, and one that comes before it streams first
    closes the stored part) or not. The stored stream stays one valid run at every cut."""
    sent = await retried(after)
    assert [e.type for e in sent].count("provider_retry") == 1
    first = replayed([], sent)
    for cut in range(len(first) + 1):
        stored = first[:cut]
        for execution in (again(sent, stored), again(await retried(after, fails=False), stored)):
            whole = stored + replayed(stored, execution)
            check_run_events(whole)
            assert whole[-1].messages[-1].text == "Both are done."  # type: ignore[attr-defined]
