"""Compaction that changes nothing says so (issue 21, item 11): no compaction_end claiming
tokens saved over an unchanged history, and a request that still overflows ends with an
error that says compaction could not shrink it."""

from __future__ import annotations

from typing import Any

import pytest

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AssistantMessage,
    ProviderError,
    TextContent,
    Usage,
    UserMessage,
    agent_loop,
)
from treadle.testing import ScriptedProvider
from treadle.types import CompactionEnd

pytestmark = pytest.mark.anyio


async def _run(context: AgentContext, provider: ScriptedProvider, window: int) -> list[Any]:
    import anyio

    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    async with send, receive:
        await agent_loop(
            ["and now?"],
            context,
            AgentLoopConfig(provider=provider, compaction={"context_window": window}),
            send,
        )
        return [receive.receive_nowait() for _ in range(receive.statistics().current_buffer_used)]


def _history() -> list[Any]:
    # One exchange whose reported usage (what the estimate anchors on) is far above what the
    # messages count: a session restored after an earlier compaction, as in the report.
    return [
        UserMessage.of("tell me about the weather " * 40),
        AssistantMessage(
            content=[TextContent(text="it is sunny " * 30)],
            usage=Usage(input=1900, output=88, total_tokens=1988),
        ),
    ]


async def test_a_compaction_that_changes_nothing_claims_no_savings() -> None:
    context = AgentContext(messages=_history())
    before = list(context.messages)
    events = await _run(context, ScriptedProvider(["fine"]), 2048)
    for end in [e for e in events if isinstance(e, CompactionEnd)]:
        if end.messages_after == end.messages_before and not end.strategy:
            assert end.tokens_after == end.tokens_before, (
                f"nothing changed, yet compaction reported {end.tokens_before} -> "
                f"{end.tokens_after} tokens"
            )
    assert context.messages[:2] == before


async def test_an_overflow_compaction_cannot_shrink_ends_with_an_honest_error() -> None:
    # The local count says the request fits; the server's tokenizer says it does not (as
    # llama.cpp's did): one prompt, nothing compaction could drop or summarise.
    context = AgentContext()
    overflow = ProviderError("context_overflow", "the request has 2446 tokens, the limit is 2048")
    provider = ScriptedProvider([overflow, "never"])
    events = await _run(context, provider, 2048)
    end = events[-1]
    assert end.type == "agent_end" and end.reason == "error"
    assert end.error.kind == "context_overflow"
    assert "2446 tokens" in end.error.message  # the provider's own words are kept
    assert "compaction could not shrink" in end.error.message
    assert len(provider.requests) == 1  # not sent again unchanged
    assert context.messages[0].text == "and now?"
