"""One run of an agent for a request that may go away: the OpenAI endpoint and the MCP server
run an agent for exactly as long as someone waits for the answer.

When the waiting side is cancelled (a client closed its stream or its connection, an MCP
``notifications/cancelled``), the run is not cut from outside: it is aborted the way
``agent.abort()`` does it, so the model call stops, running tools are cancelled through their
own scopes, every call gets its result and ``agent_end`` is sent (hooks see it). Only a run
that has not ended ``grace`` seconds later is cancelled outright (the loop still leaves a valid
history then, contract §4.3).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from ..agent import Agent, RunResult
from ..loop import Hooks
from ..types import AgentEvent, AgentMessage

OnEvent = Callable[[AgentEvent], Awaitable[None]]

DEFAULT_GRACE = 10.0


async def drive(
    agent: Agent[Any],
    prompt: Sequence[AgentMessage],
    on_event: OnEvent | None = None,
    *,
    model_settings: Any = None,
    hooks: Sequence[Hooks] = (),
    grace: float = DEFAULT_GRACE,
) -> RunResult[Any]:
    """Run ``agent`` on ``prompt`` (empty: continue its history), awaiting ``on_event`` for
    each event (sub-agents' too). Cancelling the caller aborts the run and waits, shielded, up
    to ``grace`` seconds for it to end cleanly before the cancellation goes on."""
    send, receive = anyio.create_memory_object_stream[AgentEvent](math.inf)
    outcome: list[RunResult[Any]] = []
    failure: list[BaseException] = []
    ended = anyio.Event()
    run_scope = anyio.CancelScope(shield=True)  # cut only by us, after the grace

    async def run() -> None:
        try:
            with run_scope:
                async with (
                    send,
                    agent.stream(
                        list(prompt), model_settings=model_settings, hooks=hooks
                    ) as events,
                ):
                    async for event in events:
                        send.send_nowait(event)
                outcome.append(events.result)
        except Exception as exc:  # a bug outside the loop: the caller raises it
            failure.append(exc)
        finally:
            ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            async with receive:
                async for event in receive:
                    if on_event is not None:
                        await on_event(event)
            await ended.wait()
        except BaseException:
            agent.abort()
            with anyio.CancelScope(shield=True), anyio.move_on_after(grace):
                await ended.wait()
            run_scope.cancel()
            raise
    if failure:
        raise failure[0]
    return outcome[0]


async def until_disconnected(receive: Callable[[], Awaitable[Any]]) -> None:
    """Return when the ASGI client has gone away (its request body already read)."""
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return
