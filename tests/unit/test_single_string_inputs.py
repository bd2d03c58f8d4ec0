"""A ``str`` where a sequence is expected is one item, never one item per character."""

from __future__ import annotations

import pytest

from treadle import AgentContext, AgentLoopConfig, UserMessage, agent_loop
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


async def test_scripted_provider_takes_a_single_string_as_one_answer() -> None:
    provider = ScriptedProvider("hello")
    assert provider.remaining == 1
    config = AgentLoopConfig(provider=provider)
    new = await agent_loop([UserMessage.of("hi")], AgentContext(), config)
    assert new[-1].text == "hello"  # type: ignore[union-attr]
    assert provider.remaining == 0
