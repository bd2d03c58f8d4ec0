"""Hooks are called for the methods they implement — in a subclass or set on the instance;
the methods a hook does not implement are skipped."""

from __future__ import annotations

from typing import Any

import pytest

from treadle import AgentContext, AgentLoopConfig, Hooks, agent_loop
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


async def test_subclass_and_instance_methods_are_called() -> None:
    seen: list[str] = []

    class OnMessage(Hooks):
        async def on_message(self, message: Any) -> None:
            seen.append(f"subclass:{message.role}")

    patched = Hooks()

    async def on_turn(context: Any, event: Any) -> None:
        seen.append("instance:after_turn")

    patched.after_turn = on_turn  # type: ignore[method-assign]
    config = AgentLoopConfig(
        provider=ScriptedProvider(["hi"]), hooks=[OnMessage(), patched, Hooks()]
    )
    await agent_loop("hello", AgentContext(), config)
    assert seen == ["subclass:user", "subclass:assistant", "instance:after_turn"]
