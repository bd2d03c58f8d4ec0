"""Cancelled from outside while a provider (or a tool) is inside a task group of its own —
as httpx is while it opens a connection under trio — the run still ends with exactly one
agent_end, and the cancellation propagates as a cancellation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from treadle import AgentContext, AgentLoopConfig, Hooks, RunHandle, agent_loop
from treadle.providers import ModelRequest, StreamEvent

pytestmark = pytest.mark.anyio


class Connecting:
    """A provider that is 'opening a connection' in a task group when cancelled."""

    name = "connecting"
    model = "m"

    async def stream(
        self, request: ModelRequest, *, cancel: Any = None
    ) -> AsyncIterator[StreamEvent]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.sleep_forever)
            tg.start_soon(anyio.sleep_forever)
        if False:  # pragma: no cover - never reached; makes this an async generator
            yield


class Ends(Hooks):
    def __init__(self) -> None:
        self.ends: list[Any] = []

    def on_event(self, run: RunHandle, event: Any) -> None:
        if event.type == "agent_end":
            self.ends.append(event)


async def test_a_cancelled_task_group_inside_the_provider_still_ends_the_run_once() -> None:
    ends = Ends()
    context = AgentContext()
    config = AgentLoopConfig(provider=Connecting(), hooks=[ends])  # type: ignore[arg-type]
    with anyio.move_on_after(0.1) as scope:
        await agent_loop("hi", context, config)
    assert scope.cancelled_caught  # the caller's scope caught its own cancellation
    assert [e.reason for e in ends.ends] == ["cancelled"]
    assert context.messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]
