"""docs/contract.md §2: ``treadle.loop.emit_custom_event`` — hooks, tools (eager ones while
the answer streams) and providers send a ``custom`` event on the run they run in, at that
moment, between ``agent_start`` and ``agent_end``; before ``agent_start`` (``before_loop``),
after ``agent_end`` (``after_loop``) and outside a run nothing is sent. Every run here
passes the invariant checker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from harness import call, calls_message, check, run_recorded

from treadle import AgentContext, AgentLoopConfig, Hooks, ModelRequest, RunEnding, RunHandle, tool
from treadle.loop import emit_custom_event
from treadle.testing import ScriptedProvider
from treadle.types import CustomEvent

pytestmark = pytest.mark.anyio


@tool(eager=True)
async def fetch(url: str) -> str:
    """Fetch a page (read-only: it may start while the answer streams)."""
    await emit_custom_event("app.tool", url)
    return "page"


class EveryHook(Hooks):
    async def before_loop(self, run: RunHandle) -> bool:
        await emit_custom_event("app.before_loop")  # before agent_start: not sent
        return True

    async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
        await emit_custom_event("app.turn", turn_index)
        return True

    async def before_end(self, run: RunHandle, ending: RunEnding) -> None:
        await emit_custom_event("app.end", ending.reason)

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        self.after = await emit_custom_event("app.after_loop")  # after agent_end: not sent


class Announcing:
    """A provider wrapper that reports each request before and while it streams."""

    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner = inner
        self.name, self.model, self.requests = inner.name, inner.model, inner.requests

    async def stream(self, request: ModelRequest, *, cancel: Any = None) -> AsyncIterator[Any]:
        await emit_custom_event("app.request", len(request.messages))
        n = 0
        async for event in self.inner.stream(request, cancel=cancel):
            n += 1
            if n == 2:
                await emit_custom_event("app.streaming")
            yield event


async def test_custom_events_come_where_they_are_sent() -> None:
    hooks = EveryHook()
    provider = Announcing(
        ScriptedProvider([calls_message(call("c1", "fetch", url="u")), "Done."], chunks=4)
    )
    config = AgentLoopConfig(provider=provider, hooks=[hooks])  # type: ignore[arg-type]
    rec = await run_recorded(["go"], AgentContext(tools=[fetch]), config)
    check(rec, provider_calls=2)
    names = [e.name for e in rec.of_type(CustomEvent)]
    assert names[:2] == ["app.turn", "app.request"]
    assert "app.tool" in names and names.count("app.streaming") == 2
    assert names[-1] == "app.end" and "app.before_loop" not in names
    assert hooks.after is None and "app.after_loop" not in names
    kinds = rec.types()
    assert kinds[:3] == ["agent_start", "custom", "turn_start"]  # before_turn's
    assert kinds[-2:] == ["custom", "agent_end"]  # before_end's


async def test_outside_a_run_nothing_is_sent() -> None:
    assert await emit_custom_event("app.none", 1) is None
