"""Hostile or broken tools never break the loop's contract: odd return values, BaseExceptions,
invalid Unicode, enormous results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, field_serializer
from tests.conformance.harness import check, run_recorded

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    RunHandle,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    agent_loop,
    tool,
)
from treadle.sessions import JsonlStore, SessionRecorder
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


def calling(name: str) -> list[Any]:
    return [AssistantMessage(content=[ToolCall(id="c1", name=name, arguments={})]), "ok"]


class BadStr:
    def __str__(self) -> str:
        raise ValueError("no text for you")


class BadModel(BaseModel):
    value: int = 1

    @field_serializer("value")
    def _fail(self, value: int) -> int:
        raise RuntimeError("serializer broke")


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("returned", "problem"),
    [(BadStr(), "BadStr"), (nested(100_000), "list"), (BadModel(), "BadModel")],
    ids=["str-raises", "deep-list", "bad-serializer"],
)
async def test_a_result_that_cannot_be_converted_is_an_error_result(
    returned: Any, problem: str
) -> None:
    @tool
    def odd() -> Any:
        """Returns something odd."""
        return returned

    config = AgentLoopConfig(provider=ScriptedProvider(calling("odd")))
    rec = await run_recorded(["go"], AgentContext(tools=[odd]), config)
    check(rec)
    (result,) = [m for m in rec.returned if isinstance(m, ToolResultMessage)]
    assert result.is_error and f"returned a {problem}" in result.text
    assert rec.events[-1].reason == "completed"


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, GeneratorExit])
async def test_a_base_exception_leaves_a_valid_history_then_propagates(
    raised: type[BaseException],
) -> None:
    @tool
    async def explode() -> str:
        """Raises a BaseException."""
        raise raised("stop everything")

    events: list[Any] = []

    from treadle import Hooks

    class Recorder(Hooks):
        def on_event(self, run: RunHandle, event: Any) -> None:
            events.append(event)

    context = AgentContext(tools=[explode])
    config = AgentLoopConfig(provider=ScriptedProvider(calling("explode")), hooks=[Recorder()])
    with pytest.raises(raised):
        await agent_loop("go", context, config)
    from treadle.context import validate_transcript

    assert validate_transcript(context.messages) == []
    ends = [e for e in events if e.type == "agent_end"]
    assert len(ends) == 1 and ends[0].reason == "error"
    assert raised.__name__ in ends[0].error.message


async def test_lone_surrogates_from_a_tool_and_a_user_are_replaced(tmp_path: Path) -> None:
    @tool
    def garbled() -> str:
        """Returns undecodable text."""
        return b"caf\xe9 ok".decode("utf-8", "surrogateescape")

    store = JsonlStore(tmp_path)
    context = AgentContext(tools=[garbled])
    recorder = SessionRecorder.open(store, context, session_id=None)
    config = AgentLoopConfig(provider=ScriptedProvider(calling("garbled")), hooks=[recorder])
    prompt = UserMessage.of("hi \udcff there")
    new = await agent_loop([prompt], context, config)
    recorder.close()
    assert new[0].text == "hi \ufffd there"  # type: ignore[union-attr]
    (result,) = [m for m in new if isinstance(m, ToolResultMessage)]
    assert result.text == "caf\ufffd ok"
    for message in new:
        message.model_dump_json()  # serialisable: nothing poisoned
    stored = store.load(context.session_id or "")
    assert [m.model_dump() for m in stored.messages] == [m.model_dump() for m in new]


async def test_a_huge_result_is_cut_to_the_limit_with_a_marker() -> None:
    @tool
    def flood() -> str:
        """A very long result."""
        return "HEAD" + "x" * 5_000_000 + "TAIL"

    provider = ScriptedProvider(calling("flood"))
    config = AgentLoopConfig(provider=provider, max_tool_result_chars=10_000)
    new = await agent_loop("go", AgentContext(tools=[flood]), config)
    (result,) = [m for m in new if isinstance(m, ToolResultMessage)]
    assert len(result.text) < 10_300
    assert result.text.startswith("HEAD") and result.text.endswith("TAIL")
    assert "characters of this result were cut" in result.text
    sent = provider.requests[1].messages[-1]
    assert len(json.dumps(sent.model_dump())) < 11_000  # what the model is sent is bounded too


async def test_no_limit_keeps_results_whole() -> None:
    @tool
    def long() -> str:
        """A long result."""
        return "y" * 300_000

    config = AgentLoopConfig(provider=ScriptedProvider(calling("long")), max_tool_result_chars=None)
    new = await agent_loop("go", AgentContext(tools=[long]), config)
    (result,) = [m for m in new if isinstance(m, ToolResultMessage)]
    assert len(result.text) == 300_000
