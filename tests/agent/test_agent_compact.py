"""Agent.compact(): on-demand compaction of a stateful conversation."""

from __future__ import annotations

from typing import Any

import pytest

from treadle import Agent, Hooks, RunHandle
from treadle.context import validate_transcript
from treadle.testing import ScriptedProvider
from treadle.types import CompactionEnd, CompactionStart

pytestmark = pytest.mark.anyio

LONG = "word " * 300


def chatty(rounds: int, summary: str = "SUMMARY of the early talk") -> ScriptedProvider:
    return ScriptedProvider([f"answer {i} {LONG}" for i in range(rounds)] + [summary, "after"])


async def test_compact_summarises_and_the_conversation_goes_on() -> None:
    provider = chatty(6)
    agent: Agent[Any] = Agent(provider)
    for i in range(6):
        await agent.run(f"question {i} {LONG}")
    before = len(agent.messages)
    usage_before = agent.usage.total_tokens

    result = await agent.compact()

    assert result is not None
    assert result.tokens_after < result.tokens_before
    assert len(agent.messages) < before
    assert any("SUMMARY of the early talk" in getattr(m, "text", "") for m in agent.messages)
    assert agent.messages[0].text.startswith("question 0"), "the first prompt is kept"
    assert validate_transcript(agent.messages) == []
    assert agent.usage.total_tokens > usage_before, "the summary call's usage is counted"
    summary_request = provider.requests[-1]
    assert summary_request.tools == [], "the summary call offers no tools"

    reply = await agent.run("and now?")
    assert reply.text == "after"
    sent = provider.requests[-1].messages
    assert len(sent) == len(agent.messages) - 1, (
        "the next request starts from the compacted history"
    )


async def test_a_before_compaction_hook_can_veto() -> None:
    class Veto(Hooks):
        async def before_compaction(self, run: RunHandle, estimate: int) -> bool:
            return False

    agent: Agent[Any] = Agent(chatty(3), hooks=[Veto()])
    for i in range(3):
        await agent.run(f"q{i} {LONG}")
    before = list(agent.messages)
    assert await agent.compact() is None
    assert agent.messages == before


async def test_compaction_during_a_run_is_reported_as_events() -> None:
    provider = chatty(6)
    agent: Agent[Any] = Agent(provider, compaction={"context_window": 2500})
    kinds: list[str] = []
    for i in range(6):
        async with agent.stream(f"question {i} {LONG}") as events:
            async for event in events:
                if isinstance(event, (CompactionStart, CompactionEnd)):
                    kinds.append(event.type)
    assert kinds and kinds.count("compaction_start") == kinds.count("compaction_end")
    assert validate_transcript(agent.messages) == []


async def test_compact_with_nothing_to_compact_makes_no_paid_call() -> None:
    from treadle import Agent
    from treadle.testing import ScriptedProvider

    provider = ScriptedProvider(["Hi there."])
    agent = Agent(provider)
    await agent.run("hello")
    asked = len(provider.requests)
    result = await agent.compact()
    assert result is not None and not result.changed
    assert len(provider.requests) == asked  # no summary call was made
    assert result.usage.total_tokens == 0 and len(agent.messages) == 2
