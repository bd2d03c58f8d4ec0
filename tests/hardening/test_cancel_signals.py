"""CancellationToken.cancel() only signals: it returns at once even while the event loop is
blocked, and the run still ends cancelled once the loop is free."""

from __future__ import annotations

import threading

import pytest

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    CancellationToken,
    ToolCall,
    agent_loop,
    tool,
)
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


async def test_cancel_from_another_thread_never_waits_for_a_blocked_loop() -> None:
    token = CancellationToken()
    released = threading.Event()
    returned: list[bool] = []

    def canceller() -> None:
        token.cancel("immediate")  # the loop is blocked right now
        returned.append(True)
        released.set()  # only reached if cancel() did not wait for the loop

    @tool
    async def hog() -> str:
        """Blocks the event loop (a mistake the loop must survive)."""
        threading.Thread(target=canceller).start()
        came = released.wait(10)  # deliberately blocking: the loop cannot run meanwhile
        return "released" if came else "cancel() blocked the calling thread"

    calls = [ToolCall(id="c1", name="hog", arguments={})]
    provider = ScriptedProvider([AssistantMessage(content=calls), "more", "more"])
    new = await agent_loop(
        "go", AgentContext(tools=[hog]), AgentLoopConfig(provider=provider), None, token
    )
    assert returned == [True]
    (result,) = [m for m in new if m.role == "tool_result"]
    assert result.text == "released"  # type: ignore[union-attr]
    assert len(provider.requests) == 1  # and the run stopped: no model call after the cancel
