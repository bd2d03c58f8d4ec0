"""The checker itself: a real trace passes; every broken variant of it is caught.

This keeps ``check_invariants`` honest: if it accepted a broken trace, every scenario test
that relies on it would prove nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from harness import Recorded, call, calls_message, check_invariants, run_recorded

from treadle import (
    AgentContext,
    AgentLoopConfig,
    ModelRequest,
    TextContent,
    ToolContext,
    ToolResultMessage,
    Usage,
    UserMessage,
    tool,
)
from treadle.testing import ScriptedProvider
from treadle.types import (
    AgentEnd,
    AgentStart,
    ExtensionMessage,
    InputRejected,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TextDelta,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)

pytestmark = pytest.mark.anyio

Trace = tuple[list[Any], list[Any], list[Any], list[Any]]


async def recorded() -> Recorded:
    @tool
    async def look(q: str, ctx: ToolContext[Any]) -> str:
        await ctx.update("working")
        return f"found {q}"

    provider = ScriptedProvider(
        [calls_message(call("A", "look", q="a"), call("B", "look", q="b"), text="Hm."), "Done."]
    )
    context = AgentContext(tools=[look], messages=[UserMessage.of("earlier")])
    return await run_recorded(["go"], context, AgentLoopConfig(provider=provider))


def replace(model: Any, **update: Any) -> Any:
    """A changed copy built by validation (not ``model_copy``: the mutations must not depend
    on how the loop constructed its events)."""
    return type(model).model_validate({**model.model_dump(), **update})


def idx(events: list[Any], pred: Callable[[Any], bool], nth: int = 0) -> int:
    return [i for i, e in enumerate(events) if pred(e)][nth]


def is_type(cls: type[Any], **fields: Any) -> Callable[[Any], bool]:
    return lambda e: isinstance(e, cls) and all(getattr(e, k) == v for k, v in fields.items())


def result_msg(cid: str) -> Callable[[Any], bool]:
    return lambda e: (
        isinstance(e, (MessageStart, MessageEnd))
        and isinstance(e.message, ToolResultMessage)
        and e.message.tool_call_id == cid
    )


def drop(pred: Callable[[Any], bool], nth: int = 0) -> Callable[[Trace], Trace]:
    def mutate(t: Trace) -> Trace:
        ev = list(t[0])
        del ev[idx(ev, pred, nth)]
        return ev, t[1], t[2], t[3]

    return mutate


def move(pred: Callable[[Any], bool], to: Callable[[list[Any]], int]) -> Callable[[Trace], Trace]:
    def mutate(t: Trace) -> Trace:
        ev = list(t[0])
        item = ev.pop(idx(ev, pred))
        ev.insert(to(ev), item)
        return _reseq(ev), t[1], t[2], t[3]

    return mutate


def _reseq(ev: list[Any]) -> list[Any]:
    return [replace(e, seq=i) for i, e in enumerate(ev)]


def edit(pred: Callable[[Any], bool], **update: Any) -> Callable[[Trace], Trace]:
    def mutate(t: Trace) -> Trace:
        ev = list(t[0])
        i = idx(ev, pred)
        ev[i] = replace(ev[i], **update)
        return ev, t[1], t[2], t[3]

    return mutate


def insert(
    at: Callable[[list[Any]], int], make: Callable[[list[Any]], Any]
) -> Callable[[Trace], Trace]:
    def mutate(t: Trace) -> Trace:
        ev = list(t[0])
        ev.insert(at(ev), make(ev))
        return _reseq(ev), t[1], t[2], t[3]

    return mutate


def drop_result_from_history(t: Trace) -> Trace:
    ev, returned, before, after = t
    after = [m for m in after if not (isinstance(m, ToolResultMessage) and m.tool_call_id == "B")]
    returned = [m for m in returned if m in after]
    ev = [e for e in ev if not result_msg("B")(e)]
    ev[-1] = replace(ev[-1], messages=returned)
    return ev, returned, before, after


def stamp(ev: list[Any], cls: type[Any], **fields: Any) -> Any:
    ref = ev[0]
    return cls(seq=0, loop_id=ref.loop_id, depth=0, timestamp=ref.timestamp, **fields)


MUTATIONS: dict[str, Callable[[Trace], Trace]] = {
    "no agent_end": drop(is_type(AgentEnd)),
    "two agent_end": insert(lambda ev: len(ev) - 1, lambda ev: ev[-1]),
    "agent_end not last": move(is_type(AgentEnd), lambda ev: len(ev) - 2),
    "no agent_start": drop(is_type(AgentStart)),
    "agent_start not first": move(is_type(AgentStart), lambda ev: 2),
    "turn_end missing": drop(is_type(TurnEnd)),
    "turn index gap": edit(is_type(TurnStart, turn_index=1), turn_index=2),
    "turn_end index mismatch": edit(is_type(TurnEnd, turn_index=0), turn_index=1),
    "update outside a pair": insert(
        lambda ev: idx(ev, is_type(TurnEnd)),
        lambda ev: stamp(
            ev,
            MessageUpdate,
            message=ev[idx(ev, is_type(TurnEnd))].message,
            delta=TextDelta(index=0, text="x"),
        ),
    ),
    "interleaved message pairs": insert(
        lambda ev: idx(ev, is_type(MessageUpdate)),
        lambda ev: stamp(ev, MessageStart, message=UserMessage.of("sneaky")),
    ),
    "result message before tool end": move(
        is_type(ToolExecutionEnd, tool_call_id="A"), lambda ev: idx(ev, result_msg("A"), 1) + 1
    ),
    "second tool start": insert(
        lambda ev: idx(ev, is_type(ToolExecutionEnd, tool_call_id="A")),
        lambda ev: ev[idx(ev, is_type(ToolExecutionStart, tool_call_id="A"))],
    ),
    "tool end missing": drop(is_type(ToolExecutionEnd, tool_call_id="B")),
    "call without a result": drop_result_from_history,
    "input_rejected not before agent_end": insert(
        lambda ev: 1, lambda ev: stamp(ev, InputRejected, reason="no")
    ),
    "usage sum wrong": edit(is_type(AgentEnd), usage=Usage(input=1, total_tokens=1)),
    "agent_end messages wrong": lambda t: (
        [*t[0][:-1], replace(t[0][-1], messages=t[0][-1].messages[:-1])],
        t[1],
        t[2],
        t[3],
    ),
    "return value wrong": lambda t: (t[0], t[1][:-1], t[2], t[3]),
    "history prefix changed": lambda t: (t[0], t[1], [UserMessage.of("other")], t[3]),
    "seq not increasing": lambda t: (
        [replace(t[0][1], seq=t[0][0].seq), replace(t[0][0], seq=t[0][1].seq), *t[0][2:]],
        t[1],
        t[2],
        t[3],
    ),
    "depth changes within a loop": edit(is_type(TurnStart), depth=1),
    "tool result text differs from end": edit(
        is_type(ToolExecutionEnd, tool_call_id="A"),
        result=ToolResultMessage(
            tool_call_id="A", tool_name="look", content=[TextContent(text="?")]
        ),
    ),
}


async def test_real_trace_passes() -> None:
    rec = await recorded()
    check_invariants(rec.events, rec.returned, rec.before, rec.after)


@pytest.mark.parametrize("name", list(MUTATIONS))
async def test_broken_trace_is_caught(name: str) -> None:
    rec = await recorded()
    assert rec.returned is not None
    trace: Trace = (list(rec.events), list(rec.returned), list(rec.before), list(rec.after))
    if name == "tool result text differs from end":
        ev = list(trace[0])
        i = idx(ev, is_type(ToolExecutionEnd, tool_call_id="A"))
        result = replace(ev[i].result, content=[TextContent(text="?")])
        ev[i] = replace(ev[i], result=result)
        trace = (ev, trace[1], trace[2], trace[3])
    else:
        trace = MUTATIONS[name](trace)
    with pytest.raises(AssertionError):
        check_invariants(*trace)


async def test_extension_message_in_a_request_is_caught() -> None:
    rec = await recorded()
    request = ModelRequest(messages=[ExtensionMessage(kind="k")])
    with pytest.raises(AssertionError):
        check_invariants(rec.events, rec.returned, rec.before, rec.after, requests=[request])


async def test_provider_call_without_a_turn_is_caught() -> None:
    rec = await recorded()
    ev = [e for e in rec.events if isinstance(e, (AgentStart, AgentEnd))]
    ev[-1] = replace(ev[-1], messages=[], usage=Usage())
    with pytest.raises(AssertionError):
        check_invariants(ev, [], rec.after, rec.after, provider_calls=1)
    check_invariants(ev, [], rec.after, rec.after, provider_calls=0)
