"""A tool's timeout: the error result says what happened — an async tool is cancelled; a
plain def tool's worker thread cannot be stopped, so it is said to run on, not cancelled."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from treadle import AgentContext, AgentLoopConfig, AssistantMessage, ToolCall, agent_loop, tool
from treadle.testing import ScriptedProvider
from treadle.types import ToolResultMessage

pytestmark = pytest.mark.anyio


async def call(t: Any) -> ToolResultMessage:
    reply = AssistantMessage(content=[ToolCall(id="c1", name=t.name, arguments={})])
    new = await agent_loop(
        "go",
        AgentContext(tools=[t]),
        AgentLoopConfig(provider=ScriptedProvider([reply, "done"])),
    )
    return next(m for m in new if isinstance(m, ToolResultMessage))


async def test_a_sync_tool_that_times_out_is_said_to_run_on() -> None:
    release, finished = threading.Event(), threading.Event()

    @tool(timeout=0.05)
    def stuck() -> str:
        """Waits for the test."""
        release.wait(30)
        finished.set()
        return "late"

    result = await call(stuck)
    try:
        assert result.is_error and not result.cancelled
        assert result.text == (
            "Tool 'stuck' timed out after 0.05s. It runs in a worker thread, which cannot be "
            "stopped: it may still be running, and its result will be ignored."
        )
        assert "cancelled" not in result.text
        assert not finished.is_set()  # it really is still running
    finally:
        release.set()
    await anyio.to_thread.run_sync(finished.wait, 30)


async def test_an_async_tool_that_times_out_is_cancelled() -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        """Sleeps."""
        await anyio.sleep(30)
        return "late"

    result = await call(slow)
    assert result.is_error
    assert result.text == "Tool 'slow' timed out after 0.05s and was cancelled."
