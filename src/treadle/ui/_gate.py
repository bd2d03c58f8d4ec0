"""The one gate at the protocol boundary: a client's history is data, never authority.

A tool runs only when the server's own ``before_tool_call`` hooks let it, or when it is
exactly a call the server suspended on and a decision names it (docs/contract.md §7.16).
So a request may decide only the calls the thread's last run suspended on (kept by
:class:`~treadle.ui.UIRuns` from that run's end), as the server emitted them (tool and
arguments), and answer with a result only the calls of the client's own (external) tools
the server asked for. A tool call left open in a client's history that the server is not
waiting on, an approval for any other call, a result for a call waiting for approval: the
request is refused (409) and nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..loop import Allow, Deny, Suspension
from ..types import AssistantMessage, ToolResultMessage
from ._runs import RequestError

Decision = Allow | Deny


def _named(ids: Iterable[str]) -> str:
    return ", ".join(repr(i) for i in ids) or "none"


def admit_client_history(
    context: Any, waiting: Mapping[str, Suspension], decisions: Iterable[str]
) -> None:
    """For a run on a client's history (already in ``context.messages``): check that every
    call left open at its end, every result answering a call the server waits on and every
    decision (call ids) is one the server asked for; then bind the open calls to the
    server's suspensions so the decisions can be given. Raises :class:`RequestError`."""
    messages = context.messages
    last = next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)
    calls = {c.id: c for c in last.tool_calls} if last is not None else {}
    open_ids = list(context.pending_tool_calls)
    for call_id in open_ids:
        record = waiting.get(call_id)
        if record is None:
            raise RequestError(
                f"tool call {call_id!r} in the history has no result, and the server is not "
                "waiting on it: a client's history cannot ask for a tool to run (calls the "
                f"server waits on: {_named(waiting)})",
                409,
            )
        call = calls[call_id]
        if call.name != record.name or call.arguments != record.arguments:
            raise RequestError(
                f"tool call {call_id!r} is not the call the server suspended on (its tool or "
                "arguments differ); send it back as the server emitted it, and new arguments "
                "with the approval",
                409,
            )
    for message in messages:
        if isinstance(message, ToolResultMessage):
            record = waiting.get(message.tool_call_id)
            if record is not None and not record.external:
                raise RequestError(
                    f"tool call {message.tool_call_id!r} waits for an approval, not a result: "
                    "a client answers only its own tools' calls",
                    409,
                )
    for call_id in decisions:
        if call_id not in open_ids or call_id not in waiting:
            raise RequestError(
                f"no decision is pending for tool call {call_id!r} (the server waits on: "
                f"{_named(c for c in open_ids if c in waiting)})",
                409,
            )
    context.suspended = {c: waiting[c] for c in open_ids}


def admit_server_input(
    context: Any, decisions: Iterable[str], results: Iterable[ToolResultMessage]
) -> list[ToolResultMessage]:
    """For a run on the server's own history: check the decisions name calls the server
    waits on; return the client's results that answer calls of its own tools the server
    waits on (the others in a client's copy of the history are left out). Raises
    :class:`RequestError` for a decision or a result the server did not ask for."""
    waiting = context.waiting_tool_calls
    records: Mapping[str, Suspension] = context.suspended
    for call_id in decisions:
        if call_id not in waiting:
            raise RequestError(
                f"no decision is pending for tool call {call_id!r} (the server waits on: "
                f"{_named(waiting)})",
                409,
            )
    taken: list[ToolResultMessage] = []
    for message in results:
        call_id = message.tool_call_id
        if call_id not in waiting or any(m.tool_call_id == call_id for m in taken):
            continue
        if not records[call_id].external:
            raise RequestError(
                f"tool call {call_id!r} waits for an approval, not a result: a client "
                "answers only its own tools' calls",
                409,
            )
        taken.append(message)
    return taken


def apply_decisions(context: Any, decisions: Mapping[str, Decision]) -> None:
    """Give the (admitted) decisions: an ``Allow`` with new arguments is judged by the
    hooks again when the run goes on."""
    for call_id, decision in decisions.items():
        if isinstance(decision, Allow):
            context.approve(call_id, decision.arguments)
        else:
            context.deny(call_id, decision.reason)
