"""``agent_loop_continue`` after a failed or aborted answer (docs/loop.md): the failed
message is dropped and the turn is tried again, as ``Agent.continue_()`` does."""

from __future__ import annotations

import anyio
import pytest

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    Hooks,
    RunHandle,
    UserMessage,
    agent_loop,
    agent_loop_continue,
)
from treadle.errors import ConfigurationError, UsageError
from treadle.providers import ProviderError
from treadle.testing import ScriptedProvider
from treadle.types import AgentEvent, AgentStart, AssistantMessage, ContinuationKind

pytestmark = pytest.mark.anyio


async def test_continue_retries_the_turn_that_failed() -> None:
    provider = ScriptedProvider([ProviderError("bad_request", "boom"), "second time lucky"])
    config = AgentLoopConfig(provider=provider)
    context = AgentContext()
    first = await agent_loop([UserMessage.of("hi")], context, config)
    failed = first[-1]
    assert isinstance(failed, AssistantMessage) and failed.stop_reason == "error"
    send, receive = anyio.create_memory_object_stream[AgentEvent](64)
    async with send, receive:
        again = await agent_loop_continue(context, config, send)
        start = receive.receive_nowait()
    assert isinstance(start, AgentStart) and start.continuation_kind == ContinuationKind.RERUN
    assert [m.role for m in context.messages] == ["user", "assistant"]
    answer = context.messages[-1]
    assert isinstance(answer, AssistantMessage) and answer.text == "second time lucky"
    assert again == [answer]


async def test_a_refused_continue_keeps_the_failed_answer() -> None:
    provider = ScriptedProvider([ProviderError("bad_request", "boom")])
    context = AgentContext()
    await agent_loop([UserMessage.of("hi")], context, AgentLoopConfig(provider=provider))
    context.session_id = None  # a stored history without its ids: refused
    before = list(context.messages)
    with pytest.raises(ConfigurationError):
        await agent_loop_continue(context, AgentLoopConfig(provider=provider))
    assert context.messages == before


async def test_a_completed_answer_is_still_refused() -> None:
    provider = ScriptedProvider(["done"])
    context = AgentContext()
    await agent_loop([UserMessage.of("hi")], context, AgentLoopConfig(provider=provider))
    with pytest.raises(ConfigurationError, match="nothing to continue from"):
        await agent_loop_continue(context, AgentLoopConfig(provider=provider))


async def test_two_loops_at_once_on_one_context_are_refused() -> None:
    # Before: both ran, and the history read user, user, assistant, assistant.
    inside = anyio.Event()

    class Inside(Hooks):
        async def on_message(self, run: RunHandle, message: AgentMessage) -> None:
            inside.set()

    provider = ScriptedProvider(["one", "two"], delay=0.01)
    config = AgentLoopConfig(provider=provider, hooks=[Inside()])
    context = AgentContext()
    refused: list[BaseException] = []

    async def second() -> None:
        await inside.wait()  # the first run has recorded its prompt: it is inside
        try:
            await agent_loop([UserMessage.of("second")], context, config)
        except UsageError as exc:
            refused.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(second)
        await agent_loop([UserMessage.of("first")], context, config)
    assert len(refused) == 1 and "already in a running loop" in str(refused[0])
    assert [m.role for m in context.messages] == ["user", "assistant"]
    # once the first is over, the context takes the next run
    await agent_loop([UserMessage.of("third")], context, config)
    assert [m.role for m in context.messages] == ["user", "assistant"] * 2
