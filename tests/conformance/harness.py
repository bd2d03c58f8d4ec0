"""Shared helpers of the conformance suite: a recording runner and the invariant checker.

Everything here uses the public API only. ``check_invariants`` asserts docs/contract.md §7
invariants 1-9 and 11-14 on one recorded run (10 is a scenario, not a property of a trace).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AgentMessage,
    AssistantMessage,
    CancellationToken,
    Hooks,
    ModelRequest,
    RunEnding,
    RunHandle,
    TextContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    agent_loop,
    agent_loop_continue,
)
from treadle.context import validate_transcript
from treadle.simulation._invariants import pending_allowed
from treadle.types import (
    AgentEnd,
    AgentStart,
    CustomEvent,
    ExtensionMessage,
    InputRejected,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProviderFallback,
    ProviderRetry,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
    event_from_json,
    message_from_json,
)

# ---------------------------------------------------------------- recording runner


@dataclass
class Recorded:
    """One recorded loop call."""

    events: list[AgentEvent] = field(default_factory=list)
    returned: list[AgentMessage] | None = None
    before: list[AgentMessage] = field(default_factory=list)
    context: AgentContext | None = None
    scope: anyio.CancelScope | None = None
    outer_cancelled: bool = False
    requests_before: int = 0
    requests_after: int = 0
    marks: dict[str, int] = field(default_factory=dict)

    @property
    def after(self) -> list[AgentMessage]:
        assert self.context is not None
        return self.context.messages

    @property
    def end(self) -> AgentEnd:
        ends = [e for e in self.events if isinstance(e, AgentEnd)]
        assert ends, "no agent_end"
        return ends[-1]

    def of_type(self, kind: type[Any], loop_id: str | None = None) -> list[Any]:
        return [
            e
            for e in self.events
            if isinstance(e, kind) and (loop_id is None or e.loop_id == loop_id)
        ]

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def new_requests(self, provider: Any) -> list[ModelRequest]:
        return list(provider.requests[self.requests_before : self.requests_after])


OnEvent = Callable[[Recorded, AgentEvent], Any]


async def run_recorded(
    prompts: Sequence[AgentMessage | str] | None,
    context: AgentContext,
    config: AgentLoopConfig,
    *,
    cancel: CancellationToken | None = None,
    on_event: OnEvent | None = None,
    buffer: float = math.inf,
    record: Recorded | None = None,
) -> Recorded:
    """Run ``agent_loop`` (``prompts`` given) or ``agent_loop_continue`` (``prompts=None``)
    with a consumer task that collects every event. The caller (this helper) owns the stream
    and closes it around the loop. ``on_event(record, event)`` runs in the consumer for each
    event (sync or async); it may cancel ``record.scope``, an outer scope around the loop."""
    rec = record or Recorded()
    rec.before = [m.model_copy(deep=True) for m in context.messages]
    rec.context = context
    provider = config.provider
    rec.requests_before = len(getattr(provider, "requests", []))
    send, receive = anyio.create_memory_object_stream[AgentEvent](buffer)

    async def consume() -> None:
        async with receive:
            async for event in receive:
                rec.events.append(event)
                if on_event is not None:
                    out = on_event(rec, event)
                    if out is not None and hasattr(out, "__await__"):
                        await out

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        async with send:
            with anyio.CancelScope() as scope:
                rec.scope = scope
                if prompts is None:
                    rec.returned = await agent_loop_continue(context, config, send, cancel)
                else:
                    rec.returned = await agent_loop(prompts, context, config, send, cancel)
            rec.outer_cancelled = scope.cancelled_caught
    rec.requests_after = len(getattr(provider, "requests", []))
    return rec


def check(rec: Recorded, **kwargs: Any) -> None:
    """``check_invariants`` on a :class:`Recorded` run."""
    kwargs.setdefault("provider_calls", rec.requests_after - rec.requests_before)
    check_invariants(rec.events, rec.returned, rec.before, rec.after, **kwargs)


# ---------------------------------------------------------------- invariant checker


def _is_pair_type(event: Any) -> bool:
    return isinstance(event, (MessageStart, MessageEnd, MessageUpdate))


def check_invariants(
    events: Sequence[AgentEvent],
    returned_messages: Sequence[AgentMessage] | None,
    context_messages_before: Sequence[AgentMessage],
    context_after: Sequence[AgentMessage],
    *,
    loop_id: str | None = None,
    provider_calls: int | None = None,
    requests: Sequence[ModelRequest] = (),
) -> None:
    """Assert docs/contract.md §7 invariants 1-9 and 11-14 on the events of one loop call.

    ``events`` is everything received on the stream during the call (sub-loops sharing the
    stream included). The main loop is ``loop_id`` or the loop of the first event.
    ``returned_messages`` is what the call returned (``None`` when it raised, e.g. an outer
    cancellation). ``provider_calls`` is the number of model requests made during the call,
    ``requests`` the requests themselves (for invariant 11)."""
    assert events, "no events at all"

    # 14: seq strictly increasing on the stream; every event stamped.
    seqs = [e.seq for e in events]
    for a, b in itertools.pairwise(seqs):
        assert b > a, f"seq not strictly increasing: {seqs}"
    for e in events:
        assert isinstance(e.timestamp, int) and e.timestamp > 0, e
        assert e.loop_id, f"event without loop_id: {e!r}"

    # 12: every event (and every message in it) round-trips through JSON.
    for e in events:
        _check_roundtrip_event(e)

    main = loop_id or events[0].loop_id
    loops: dict[str, list[Any]] = {}
    for e in events:
        loops.setdefault(e.loop_id, []).append(e)
    assert main in loops

    # 14: each loop has one depth; sub-loops say who their parent is and are deeper.
    depths = {lid: {e.depth for e in evs} for lid, evs in loops.items()}
    for lid, ds in depths.items():
        assert len(ds) == 1, f"loop {lid} has events at several depths: {ds}"
    for lid, evs in loops.items():
        starts = [e for e in evs if isinstance(e, AgentStart)]
        if lid != main:
            (depth,) = depths[lid]
            assert depth >= 1, f"sub-loop {lid} has depth {depth}"
            if starts and starts[0].parent_loop_id is not None:
                parent = starts[0].parent_loop_id
                assert parent != lid
                if parent in depths:
                    assert depth > next(iter(depths[parent]))

    for evs in loops.values():
        _check_one_loop(evs)

    main_events = loops[main]
    end = main_events[-1]
    assert isinstance(end, AgentEnd)

    # 8: agent_end.messages == returned == what was appended to the history, in order.
    before = list(context_messages_before)
    after = list(context_after)
    assert len(after) >= len(before), "the history shrank"
    assert after[: len(before)] == before, "messages that were already in the history changed"
    appended = after[len(before) :]
    assert end.messages == appended, (
        f"agent_end.messages {_roles(end.messages)} != appended {_roles(appended)}"
    )
    if returned_messages is not None:
        assert list(returned_messages) == appended, "return value != appended messages"
    # Every appended message was reported as a message_start/end pair, in order.
    ended = [e.message for e in main_events if isinstance(e, MessageEnd)]
    assert ended == appended, (
        f"message_end messages {_roles(ended)} != appended messages {_roles(appended)}"
    )

    # 9: agent_end.usage == sum of the turn_end usages.
    total = Usage()
    for e in main_events:
        if isinstance(e, TurnEnd):
            total = total + e.usage
    assert end.usage == total, f"agent_end.usage {end.usage} != sum of turn_end usages {total}"

    # 7: the history is valid: each call answered once, in the right place; the exceptions
    # are the pending calls of a suspended run and, on any other end (§2.2), calls a continued
    # run never took up or calls left waiting for a decision (never started) when a hook
    # failure or a cancellation ended the run.
    pending = set(end.pending_tool_calls)
    allowed = pending_allowed(end, main_events, before, after)
    assert pending <= allowed, (
        f"pending_tool_calls {sorted(pending - allowed)} on a run that ended {end.reason}"
    )
    _check_history(after, pending)
    assert validate_transcript(after, allow_pending=pending) == []
    if pending:
        last_assistant = next(m for m in reversed(after) if isinstance(m, AssistantMessage))
        assert pending <= {c.id for c in last_assistant.tool_calls}

    # 11: extension messages never reach a provider.
    for request in requests:
        for m in request.messages:
            assert not isinstance(m, ExtensionMessage), "an extension message reached a provider"
            assert m.role != "extension"

    # 13: no provider call outside a turn (cancelled before the first turn: none at all).
    turn_starts = [e for e in main_events if isinstance(e, TurnStart)]
    if provider_calls is not None and not turn_starts:
        assert provider_calls == 0, "a provider was called although no turn started"


def _roles(messages: Sequence[Any]) -> list[str]:
    return [m.role for m in messages]


def _check_roundtrip_event(event: Any) -> None:
    text = event.model_dump_json()
    assert type(event).model_validate_json(text) == event, f"{event.type} does not round-trip"
    assert event_from_json(text) == event, f"{event.type} does not round-trip via event_from_json"
    message = getattr(event, "message", None)
    if message is not None and not isinstance(message, str):
        assert message_from_json(message.model_dump_json()) == message
    for message in getattr(event, "messages", None) or []:
        assert message_from_json(message.model_dump_json()) == message


def _check_one_loop(evs: list[Any]) -> None:
    # 1: exactly one agent_end, last among this loop's events.
    ends = [i for i, e in enumerate(evs) if isinstance(e, AgentEnd)]
    assert len(ends) == 1, f"{len(ends)} agent_end events in loop {evs[0].loop_id}"
    assert ends[0] == len(evs) - 1, "agent_end is not the last event of its loop"
    end = evs[-1]

    # 2: agent_start first; absent only after a before_loop veto.
    starts = [i for i, e in enumerate(evs) if isinstance(e, AgentStart)]
    if starts:
        assert starts == [0], f"agent_start at {starts}, must be exactly once and first"
    else:
        assert len(evs) == 1 and end.reason == "vetoed" and end.messages == [], (
            "agent_start is missing, but this is not a before_loop veto"
        )

    # 3: input_rejected immediately followed by agent_end(rejected); messages=[] when the
    # prompts were rejected (nothing was added yet).
    # Only custom events (sent by before_end hooks) may come between the two.
    ending = [e for e in evs if not isinstance(e, CustomEvent)]
    for i, e in enumerate(ending):
        if isinstance(e, InputRejected):
            assert i + 1 < len(ending) and isinstance(ending[i + 1], AgentEnd), (
                "input_rejected not immediately followed by agent_end"
            )
            assert ending[i + 1].reason == "rejected"
            if not any(isinstance(x, TurnStart) for x in ending[:i]):
                assert ending[i + 1].messages == []
    if end.reason == "rejected":
        assert len(ending) >= 2 and isinstance(ending[-2], InputRejected)
    # 15: custom events after the last turn (before_end hooks') come just before agent_end;
    # those sent during the run (emit_custom_event) come after agent_start.
    custom = [i for i, e in enumerate(evs) if isinstance(e, CustomEvent)]
    if custom:
        assert not starts or custom[0] > 0, "a custom event before agent_start"
        turns = [i for i, e in enumerate(evs) if isinstance(e, (TurnStart, TurnEnd))]
        late = [i for i in custom if not turns or i > turns[-1]]
        assert late == list(range(len(evs) - 1 - len(late), len(evs) - 1)), (
            "custom events after the last turn not just before agent_end"
        )

    # 4: turn_start / turn_end alternate, indices 0, 1, 2 ...; none left open.
    expected_index = 0
    open_turn: Any = None
    for e in evs:
        if isinstance(e, TurnStart):
            assert open_turn is None, "turn_start while a turn is open"
            assert e.turn_index == expected_index, (
                f"turn_index {e.turn_index}, expected {expected_index}"
            )
            open_turn = e
        elif isinstance(e, TurnEnd):
            assert open_turn is not None, "turn_end without turn_start"
            assert e.turn_index == open_turn.turn_index
            assert isinstance(e.message, AssistantMessage)
            open_turn = None
            expected_index += 1
        elif isinstance(e, (MessageUpdate, ToolExecutionStart, ToolExecutionUpdate)):
            assert open_turn is not None, f"{e.type} outside a turn"
        elif isinstance(e, MessageStart) and e.message.role == "assistant":
            assert open_turn is not None, "assistant message outside a turn"
    assert open_turn is None, "a turn_start was left open"

    # 5: message pairs never interleave; updates only inside an assistant pair; a retry with
    # discard_partial closes an abandoned one. Tool execution events of eager calls, and
    # custom events, may come inside an assistant pair (tool events checked with 6).
    open_msg: Any = None
    for e in evs:
        if isinstance(e, MessageStart):
            assert open_msg is None, "message_start while another message is open"
            open_msg = e.message
        elif isinstance(e, MessageUpdate):
            assert open_msg is not None and open_msg.role == "assistant", (
                "message_update outside an assistant message pair"
            )
        elif isinstance(e, MessageEnd):
            assert open_msg is not None, "message_end without message_start"
            assert e.message.role == open_msg.role
            if open_msg.role != "assistant":
                assert e.message == open_msg
            open_msg = None
        elif isinstance(e, (ProviderRetry, ProviderFallback)):
            if e.discard_partial:
                assert open_msg is not None and open_msg.role == "assistant"
            else:
                assert open_msg is None, f"{e.type} without discard_partial inside a message"
            open_msg = None
        elif isinstance(
            e, (ToolExecutionStart, ToolExecutionUpdate, ToolExecutionEnd, CustomEvent)
        ):  # a custom event: from a provider while it streams, or an eager call
            assert open_msg is None or open_msg.role == "assistant", (
                f"{e.type} inside a {open_msg.role} message pair"
            )
        else:
            assert open_msg is None, f"{e.type} inside a message pair"
    assert open_msg is None, "a message_start was left open"

    # 6: per call: one start, then updates, then one end, then its result message. An eager
    # call starts inside its assistant pair only after its block's tool_call_end; one whose
    # message was not kept (retried, or closed without it) ends before that message closes,
    # has no result message, and its id may run again.
    pending = set(end.pending_tool_calls)
    states: dict[str, str] = {}
    ends_at: dict[str, int] = {}
    results: dict[str, int] = {}
    in_assistant = False
    complete: set[str] = set()  # calls whose block is complete in the open assistant pair
    eager: set[str] = set()  # calls started inside the open assistant pair
    for i, e in enumerate(evs):
        if isinstance(e, MessageStart) and e.message.role == "assistant":
            in_assistant, complete, eager = True, set(), set()
        elif isinstance(e, MessageUpdate) and e.delta.type == "tool_call_end":
            complete.add(e.delta.tool_call.id)
        elif in_assistant and isinstance(e, (MessageEnd, ProviderRetry, ProviderFallback)):
            in_assistant = False
            kept = {c.id for c in e.message.tool_calls} if isinstance(e, MessageEnd) else set()
            for cid in eager - kept:
                assert states.get(cid) == "ended", (
                    f"eager call {cid} of a discarded answer not ended before {e.type}"
                )
                del states[cid]
                del ends_at[cid]
        if isinstance(e, ToolExecutionStart):
            assert e.tool_call_id not in states, f"second tool_execution_start {e.tool_call_id}"
            if in_assistant:
                assert e.tool_call_id in complete, (
                    f"eager tool_execution_start {e.tool_call_id} before its tool_call_end"
                )
                eager.add(e.tool_call_id)
            states[e.tool_call_id] = "started"
        elif isinstance(e, ToolExecutionUpdate):
            assert states.get(e.tool_call_id) == "started", (
                f"tool_execution_update for {e.tool_call_id} outside its start/end"
            )
        elif isinstance(e, ToolExecutionEnd):
            assert states.get(e.tool_call_id) == "started", (
                f"tool_execution_end for {e.tool_call_id} without a start, or a second end"
            )
            assert e.is_error == e.result.is_error
            states[e.tool_call_id] = "ended"
            ends_at[e.tool_call_id] = i
        elif isinstance(e, MessageEnd) and isinstance(e.message, ToolResultMessage):
            cid = e.message.tool_call_id
            assert states.get(cid) == "ended", f"result message for {cid} before its end"
            assert cid not in results, f"second result message for {cid}"
            results[cid] = i
            end_event = evs[ends_at[cid]]
            assert end_event.result.content == e.message.content
            assert end_event.result.is_error == e.message.is_error
    # A call whose tool asked a person mid-call and waits (pending) ended saying so, and has
    # no result message yet.
    asking = {c for c in pending & set(states) if _waits(evs[ends_at[c]])}
    assert set(results) == set(states) - asking, "a tool execution without its result message"
    assert not pending & set(states) - asking, "a pending call was executed"
    # Every call of this loop's assistant messages was executed, unless it is pending.
    for e in evs:
        if isinstance(e, MessageEnd) and isinstance(e.message, AssistantMessage):
            for call in e.message.tool_calls:
                assert call.id in states or call.id in pending, (
                    f"tool call {call.id} was never executed nor left pending"
                )


def _waits(end: Any) -> bool:
    """A tool_execution_end saying the call waits for a person (it asked mid-call)."""
    details = end.result.details
    return not end.is_error and isinstance(details, dict) and details.get("waiting") is True


def _check_history(messages: Sequence[AgentMessage], pending: set[str]) -> None:
    """Invariant 7 checked independently of validate_transcript."""
    open_calls: set[str] = set()
    seen_calls: set[str] = set()
    answered: set[str] = set()
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            assert not open_calls, f"message {i}: calls {open_calls} unanswered before it"
            for call in m.tool_calls:
                assert call.id not in seen_calls, f"tool call id {call.id} used twice"
                seen_calls.add(call.id)
                open_calls.add(call.id)
        elif isinstance(m, ToolResultMessage):
            assert m.tool_call_id in open_calls, (
                f"message {i}: result {m.tool_call_id} without an open call"
            )
            open_calls.discard(m.tool_call_id)
            answered.add(m.tool_call_id)
        elif isinstance(m, ExtensionMessage):
            continue
        else:
            assert not open_calls, f"message {i}: a user message before results {open_calls}"
    assert open_calls == pending, f"unanswered calls {open_calls}, pending allowed {pending}"


# ---------------------------------------------------------------- building blocks


def call(cid: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=arguments)


def calls_message(*calls: ToolCall, text: str | None = None, usage: Usage | None = None) -> Any:
    content: list[Any] = [TextContent(text=text)] if text else []
    content.extend(calls)
    if usage is None:
        return AssistantMessage(content=content)
    return AssistantMessage(content=content, usage=usage)


def results_of(messages: Sequence[AgentMessage]) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}


def result_text(messages: Sequence[AgentMessage], cid: str) -> str:
    return results_of(messages)[cid].text


class Checkpoints(Hooks):
    """Hooks that only yield to the scheduler: extra await points at every hook site."""

    async def before_loop(self, run: RunHandle) -> bool:
        await anyio.lowlevel.checkpoint()
        return True

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        await anyio.lowlevel.checkpoint()

    async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
        await anyio.lowlevel.checkpoint()
        return True

    async def after_turn(self, run: RunHandle, event: Any) -> None:
        await anyio.lowlevel.checkpoint()

    async def before_model_request(self, run: RunHandle, request: Any) -> Any:
        await anyio.lowlevel.checkpoint()
        return request

    async def before_tool_call(self, run: RunHandle, call: Any) -> Any:
        await anyio.lowlevel.checkpoint()
        return None

    async def after_tool_call(self, run: RunHandle, call: Any, result: ToolResult) -> Any:
        await anyio.lowlevel.checkpoint()
        return None


class PartialThenFail:
    """A provider whose first ``failures`` calls stream some text and then raise ``error``;
    later calls answer ``answer``. For retries that must discard a started message."""

    def __init__(self, error: Any, answer: str, failures: int = 1) -> None:
        self.name = "partial"
        self.model = "partial-model"
        self.error = error
        self.answer = answer
        self.failures = failures
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest, *, cancel: Any = None) -> Any:
        from treadle.providers import StreamDone, StreamStart
        from treadle.types import TextDelta

        self.requests.append(request)
        yield StreamStart(model=self.model)
        if len(self.requests) <= self.failures:
            yield TextDelta(index=0, text="half an ans")
            await anyio.lowlevel.checkpoint()
            raise self.error
        yield TextDelta(index=0, text=self.answer)
        yield StreamDone(
            message=AssistantMessage(
                content=[TextContent(text=self.answer)],
                model=self.model,
                provider=self.name,
                usage=Usage(input=3, output=2, total_tokens=5),
            )
        )
