"""One run of an agent for a request that may go away: the OpenAI endpoint and the MCP server
run an agent for exactly as long as someone waits for the answer.

When the waiting side is cancelled (a client closed its stream or its connection, an MCP
``notifications/cancelled``), the cancellation reaches the run: leaving ``agent.stream``
early aborts it (``agent.abort()``), and the loop answers every call it started and sends
``agent_end`` (``cancelled``) before the cancellation goes on (contract §4.3).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..agent import Agent, RunResult
from ..loop import Hooks
from ..types import AgentEvent, AgentMessage

OnEvent = Callable[[AgentEvent], Awaitable[None]]


async def drive(
    agent: Agent[Any],
    prompt: Sequence[AgentMessage],
    on_event: OnEvent | None = None,
    *,
    model_settings: Any = None,
    hooks: Sequence[Hooks] = (),
) -> RunResult[Any]:
    """Run ``agent`` on ``prompt`` (empty: continue its history), awaiting ``on_event`` for
    each event (sub-agents' too)."""
    async with agent.stream(list(prompt), model_settings=model_settings, hooks=hooks) as events:
        async for event in events:
            if on_event is not None:
                await on_event(event)
    return events.result


async def until_disconnected(receive: Callable[[], Awaitable[Any]]) -> None:
    """Return when the ASGI client has gone away (its request body already read)."""
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return
