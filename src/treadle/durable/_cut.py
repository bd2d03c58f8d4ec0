"""Sub-agent loops a crash cut, closed in the stored events as a cancelled run closes.

A sub-agent inside a durable run (``Agent.as_tool()``, at depth 1 and below) is one tool
call: its own model requests are not checkpointed, so after a crash it runs again from its
start, as a new loop with a new ``loop_id`` (or, for a tool not marked idempotent, not at
all: its call is answered ``UNKNOWN_OUTCOME``). The loop the crash cut would stay open in
the stored events for ever (an ``agent_start`` with no ``agent_end``), and a reader would
show that sub-agent as still running. So the recovered execution first stores what the
loop would have sent had it been cancelled (``immediate``) where its stored events end:
the open message ends (an answer ``stop_reason="aborted"``), each call of the open turn
that has no result gets one (``Cancelled``, started and ended if it was not), the turn
ends, and the loop ends ``reason="cancelled"`` with its messages and usage. Its readers
see it end; the sub-agent's new run follows as a loop of its own.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..types import (
    AgentEnd,
    AgentEvent,
    AgentMessage,
    AssistantMessage,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TextContent,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolResult,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
    Usage,
)

CANCELLED = "Cancelled"
"""The text of a cancelled call's result, as the loop words it (``cancelled`` tells one)."""


def closing(stored: Sequence[AgentEvent]) -> list[AgentEvent]:
    """The events that close every sub-agent loop of ``stored`` (a run's stored events,
    whole, in order) that began and did not end; a loop's own sub-agents first."""
    loops: dict[str, list[AgentEvent]] = {}
    for event in stored:
        if event.depth > 0:
            loops.setdefault(event.loop_id, []).append(event)
    cut = [
        events
        for events in loops.values()
        if events[0].type == "agent_start" and events[-1].type != "agent_end"
    ]
    out: list[AgentEvent] = []
    for events in reversed(cut):  # loops in the order they began: a child after its parent
        out += _closed(events)
    return out


def _closed(events: list[AgentEvent]) -> list[AgentEvent]:
    """What cancelling the loop of ``events`` where they end would have sent."""
    loop, depth = events[0].loop_id, events[0].depth
    messages: list[AgentMessage] = []  # what the loop added to its history, in order
    usage = Usage()
    open_message: AgentMessage | None = None  # started, not ended: as it stood last
    turn: int | None = None  # the open turn
    answer: AssistantMessage | None = None  # the open turn's assistant message
    results: list[ToolResultMessage] = []  # the open turn's tool results
    started: set[str] = set()
    ended: dict[str, ToolResult] = {}
    for event in events:
        if isinstance(event, TurnStart):
            turn, answer, results = event.turn_index, None, []
        elif isinstance(event, TurnEnd):
            turn = None
            usage = usage + event.usage
        elif isinstance(event, (MessageStart, MessageUpdate)):
            open_message = event.message
        elif isinstance(event, MessageEnd):
            open_message = None
            _added(event.message, messages, results)
            if isinstance(event.message, AssistantMessage):
                answer = event.message
        elif isinstance(event, ToolExecutionStart):
            started.add(event.tool_call_id)
        elif isinstance(event, ToolExecutionEnd):
            ended[event.tool_call_id] = event.result

    now = int(time.time() * 1000)
    out: list[AgentEvent] = []

    def send(kind: Any, **fields: Any) -> None:  # an event of this loop, made now
        out.append(kind(loop_id=loop, depth=depth, timestamp=now, **fields))

    if open_message is not None:
        if isinstance(open_message, AssistantMessage):
            open_message = answer = open_message.model_copy(update={"stop_reason": "aborted"})
        send(MessageEnd, message=open_message)
        _added(open_message, messages, results)
    if turn is not None:
        if answer is None:  # cut before the model answered: the answer is an empty one
            answer = AssistantMessage(content=[], stop_reason="aborted")
            send(MessageStart, message=answer)
            send(MessageEnd, message=answer)
            messages.append(answer)
        answered = {r.tool_call_id for r in results}
        for call in answer.tool_calls:
            if call.id in answered:
                continue
            if call.id not in started:
                send(
                    ToolExecutionStart,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    args=call.arguments,
                )
            result = ended.get(call.id)
            if result is None:
                result = ToolResult(
                    content=[TextContent(text=CANCELLED)], is_error=True, cancelled=True
                )
                send(
                    ToolExecutionEnd,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    result=result,
                    is_error=True,
                )
            message = ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=result.content,
                details=result.details,
                is_error=result.is_error,
                cancelled=result.cancelled,
            )
            send(MessageStart, message=message)
            send(MessageEnd, message=message)
            _added(message, messages, results)
        send(TurnEnd, turn_index=turn, message=answer, tool_results=results)
    send(AgentEnd, messages=messages, usage=usage, reason="cancelled")
    return out


def _added(
    message: AgentMessage, messages: list[AgentMessage], results: list[ToolResultMessage]
) -> None:
    messages.append(message)
    if isinstance(message, ToolResultMessage):
        results.append(message)
