"""Memory stays flat when the same file is sent on 100 turns: the bytes are held once, not
once per message, per cached wire encoding or per stored record (docs/files.md#memory).

Measured with tracemalloc (memory still held after the turns, not time), against the same
100 turns with a 10-byte file: what the real file adds must be the copy the history holds
(its base64, shared by every block) and, in a memory store, the stored bytes: two or three
copies, where a copy per turn would add a hundred or more.
"""

from __future__ import annotations

import gc
import random
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

from treadle import Agent, AssistantMessage, ToolCall, UserMessage, tool
from treadle.providers import ModelRequest
from treadle.sessions import MemoryStore, SessionStore
from treadle.testing import ScriptedProvider, WireFake
from treadle.types import AgentMessage, FileContent, TextContent, ToolResultMessage

pytestmark = pytest.mark.slow  # each test: three times 100 turns, under tracemalloc

TURNS = 100
PDF = b"%PDF-1.7\n" + random.Random(37).randbytes(8_000)
TINY = b"%PDF-1.7\n."


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    yield
    tracemalloc.stop()


def held() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def extra_copies(run: Callable[[bytes], int]) -> float:
    """How many copies of the file more the run holds with it than with a 10-byte one."""
    run(TINY)  # warm up: lazily built serializers and caches are not the file's
    return (run(PDF) - run(TINY)) / len(PDF)


def agent_run(store: Callable[[], SessionStore]) -> Callable[[bytes], int]:
    def run(data: bytes) -> int:
        """One run of 100 turns: the prompt carries the file (sent on every request) and
        a tool returns it, read again, on 99 turns. Returns what it holds at the end."""
        calls = [ToolCall(id=f"call_{i}", name="fetch_report", arguments={}) for i in range(99)]
        script: list[Any] = [AssistantMessage(content=[c], stop_reason="tool_use") for c in calls]

        @tool
        def fetch_report() -> list[object]:
            """The report, as a PDF."""
            return ["The report:", FileContent.from_bytes(data, name="report.pdf")]

        before = held()
        opened = store()
        agent: Agent[Any] = Agent(
            ScriptedProvider([*script, "Read them all."]), tools=[fetch_report], store=opened
        )
        prompt = UserMessage.of("Read", files=[FileContent.from_bytes(data, name="report.pdf")])
        result = anyio.run(agent.run, prompt)
        assert result.error is None and len(agent.messages) == 2 * TURNS, result.error
        grown = held() - before
        agent.close()
        opened.close()
        return grown

    return run


def test_a_file_on_100_turns_is_held_once_by_history_and_store(traced: None) -> None:
    """A memory store keeps its records, and so each file's bytes, in this process: the
    history's base64 (4/3 of the file) and the store's blob (1) are all it may hold."""
    copies = extra_copies(agent_run(MemoryStore))
    assert copies < 3, f"{copies:.1f} copies of the file held after 100 turns"


def history(data: bytes) -> Iterator[list[AgentMessage]]:
    """A history growing by a turn at a time: a call and its result with the file, every
    tenth turn a prompt with it too (each block made anew, as from reading the file again)."""
    messages: list[AgentMessage] = []
    for turn in range(TURNS):
        call = ToolCall(id=f"call_{turn}", name="fetch_report", arguments={})
        if turn % 10 == 0:
            block = FileContent.from_bytes(data, name="r.pdf")
            messages.append(UserMessage.of(f"Turn {turn}", files=[block]))
        messages += [
            AssistantMessage(content=[call], stop_reason="tool_use"),
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name="fetch_report",
                content=[TextContent(text="The report:"), FileContent.from_bytes(data)],
            ),
        ]
        yield messages


def test_the_wire_cache_keeps_no_copy_of_a_file_per_message(traced: None) -> None:
    """Each request's body holds every message's file while it is sent (the APIs want that);
    what OpenAI Chat keeps between requests (each message's encoding) holds none (the other
    adapters keep nothing between requests)."""
    adapter: Any = WireFake.openai().provider()
    encode = adapter.encode_body

    def run(data: bytes) -> int:
        before = held()
        kept = []
        for messages in history(data):
            body = encode(ModelRequest(messages=messages))
            assert body and (len(str(body)) > len(data) or data is TINY)
            del body
            kept = messages
        grown = held() - before
        del kept
        return grown

    copies = extra_copies(run)
    # the history's blocks, 110 of them, share one base64 string: 4/3 of the file
    assert copies < 2, f"{copies:.1f} copies of the file held after 100 turns"
