"""Deltas of one block that arrive in the same network read become one ``message_update``
in the loop (their concatenation is the text); ``coalesce_deltas=False`` gives one update
per provider wire event. Adapters used on their own never merge."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from treadle import Agent, AgentContext, AgentEvent, AgentLoopConfig, Hooks, RunHandle, agent_loop
from treadle.agent import AgentOptions
from treadle.providers import ModelRequest, TextDelta
from treadle.testing import Raw, WireFake
from treadle.types import MessageUpdate, UserMessage

pytestmark = pytest.mark.anyio


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return f"data: {json.dumps({'id': 'c1', 'model': 'm', 'choices': [choice]})}\n\n".encode()


def call(index: int, args: str, name: str | None = None) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": args}
    if name:
        function["name"] = name
    fragment: dict[str, Any] = {"index": index, "function": function}
    if name:
        fragment["id"] = f"call_{index}"
    return {"tool_calls": [fragment]}


# Two network reads: the first holds thinking, text and a tool call's start, each in
# several events; the second the rest of the call's arguments and the end.
FIRST = b"".join(
    [
        chunk({"reasoning_content": "Let "}),
        chunk({"reasoning_content": "me "}),
        chunk({"reasoning_content": "think."}),
        chunk({"content": "Hello"}),
        chunk({"content": " there,"}),
        chunk({"content": " friend."}),
        chunk(call(0, '{"a"', name="add")),
        chunk(call(0, ": 1")),
    ]
)
SECOND = b"".join(
    [chunk(call(0, ', "b": 2}')), chunk({}, finish="tool_calls"), b"data: [DONE]\n\n"]
)


class Looks(Hooks):
    """Looks at each update as it is sent, which fixes it (contract §2): no later delta can
    join it in the stream, so what is merged here was merged by the adapter, read by read."""

    def __init__(self) -> None:
        self.found: list[tuple[str, int, str]] = []
        self.first_answer = True

    def on_event(self, run: RunHandle, event: AgentEvent) -> None:
        if not self.first_answer or not isinstance(event, MessageUpdate):
            return
        delta = event.delta
        if delta.type in ("text", "thinking"):
            self.found.append((delta.type, delta.index, delta.text))
        elif delta.type == "tool_call_delta":
            self.found.append(("args", delta.index, delta.arguments))
        elif delta.type == "tool_call_end":
            self.first_answer = False


async def updates(coalesce: bool | None) -> list[tuple[str, int, str]]:
    """The first answer's text, thinking and argument updates, as sent on the stream."""
    fake = WireFake.openai([Raw([FIRST, SECOND]), "done"])
    options = {} if coalesce is None else {"coalesce_deltas": coalesce}
    looks = Looks()
    config = AgentLoopConfig(provider=fake.provider(), hooks=[looks], **options)
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    async with send, receive:
        await agent_loop("hi", AgentContext(), config, send)
    return looks.found


async def test_deltas_of_one_read_become_one_update_each_block() -> None:
    assert await updates(None) == [
        ("thinking", 0, "Let me think."),
        ("text", 1, "Hello there, friend."),
        ("args", 2, '{"a": 1'),  # the call's start carries what it had; one read, one update
        ("args", 2, ', "b": 2}'),  # the next read
    ]


async def test_the_opt_out_gives_one_update_per_provider_event() -> None:
    assert await updates(False) == [
        ("thinking", 0, "Let "),
        ("thinking", 0, "me "),
        ("thinking", 0, "think."),
        ("text", 1, "Hello"),
        ("text", 1, " there,"),
        ("text", 1, " friend."),
        ("args", 2, '{"a"'),
        ("args", 2, ": 1"),
        ("args", 2, ', "b": 2}'),
    ]


async def test_the_agent_takes_the_opt_out() -> None:
    seen = {}
    for coalesce in (True, False):
        fake = WireFake.openai(
            [
                Raw(
                    [
                        b"".join(chunk({"content": w}) for w in "abc")
                        + chunk({}, finish="stop")
                        + b"data: [DONE]\n\n"
                    ]
                )
            ]
        )
        agent = Agent(fake.provider(), options=AgentOptions(coalesce_deltas=coalesce))
        async with agent.stream("hi") as events:
            seen[coalesce] = [
                e.delta.text
                async for e in events
                if isinstance(e, MessageUpdate) and e.delta.type == "text"
            ]
        assert events.result is not None and events.result.text == "abc"
    assert seen == {True: ["abc"], False: ["a", "b", "c"]}


async def test_an_adapter_on_its_own_does_not_merge() -> None:
    fake = WireFake.openai([Raw([FIRST, SECOND])])
    provider = fake.provider()
    texts = [
        e.text
        async for e in provider.stream(ModelRequest(messages=[UserMessage.of("hi")]))
        if isinstance(e, TextDelta)
    ]
    assert texts == ["Hello", " there,", " friend."]


async def test_the_request_says_whether_an_adapter_merges() -> None:
    """What an adapter yields depends on its arguments only (``ModelRequest.coalesce_deltas``),
    never on a context variable the caller happens to run in."""
    fake = WireFake.openai([Raw([FIRST, SECOND])])
    provider = fake.provider()
    request = ModelRequest(messages=[UserMessage.of("hi")], coalesce_deltas=True)
    texts = [e.text async for e in provider.stream(request) if isinstance(e, TextDelta)]
    assert texts == ["Hello there, friend."]
    import treadle.providers.base as base

    assert not hasattr(base, "COALESCE_DELTAS")
