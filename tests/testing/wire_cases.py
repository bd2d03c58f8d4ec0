"""Shared pieces of the wire-fake tests: formats, canonical messages, a stream collector."""

from __future__ import annotations

from typing import Any

from treadle.providers import ModelRequest, Provider, StreamDone, StreamEvent
from treadle.types import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    UserMessage,
)

FORMATS = ["openai", "anthropic", "responses", "gemini", "ollama", "bedrock"]
REQUEST = ModelRequest(messages=[UserMessage.of("What is 2 + 3, and the weather in Paris?")])
RESPONSES_SIGNATURE = '{"type":"reasoning","id":"rs_abc","encrypted_content":"gAAAA-opaque=="}'

TEXT = "Let me check both: 2 + 3 first, then Paris. Ünïcödé ✓ and “quotes”."
THINKING = "The user wants two things.\nI should call both tools in parallel."
CALLS = [
    ToolCall(id="call_add_1", name="add", arguments={"a": 2, "b": 3}),
    ToolCall(id="call_weather_2", name="weather", arguments={"city": "Paris", "units": ["c"]}),
]


def full_usage(fmt: str) -> Usage:
    """The richest usage each format can carry (and its adapter read back)."""
    if fmt == "ollama":
        return Usage(input=120, output=45, total_tokens=165)
    if fmt == "anthropic":
        return Usage(
            input=100, output=45, reasoning=12, cache_read=20, cache_write=7, total_tokens=172
        )
    if fmt == "bedrock":  # no reasoning count on Bedrock
        return Usage(input=100, output=45, cache_read=20, cache_write=7, total_tokens=172)
    if fmt == "openai":
        return Usage(
            input=100, output=45, reasoning=12, cache_read=20, cache_write=7, total_tokens=172
        )
    return Usage(input=100, output=45, reasoning=12, cache_read=20, total_tokens=165)


def thinking_blocks(fmt: str) -> list[Any]:
    """Thinking in the form each adapter produces (so the round trip is exact)."""
    if fmt in ("anthropic", "bedrock"):
        return [ThinkingContent(thinking=THINKING, signature="EqQBCkYIBxgCKkD-sig==")]
    if fmt == "responses":
        return [ThinkingContent(thinking=THINKING, signature=RESPONSES_SIGNATURE)]
    if fmt == "gemini":
        # A signature travels on the next part: an empty carrier block before it.
        return [
            ThinkingContent(thinking="", signature="CiQB-gemini-sig"),
            ThinkingContent(thinking=THINKING),
        ]
    return [ThinkingContent(thinking=THINKING)]


def rich_message(fmt: str) -> AssistantMessage:
    """Thinking, text and two parallel tool calls, with usage."""
    return AssistantMessage(
        content=[*thinking_blocks(fmt), TextContent(text=TEXT), *CALLS],
        stop_reason="tool_use",
        usage=full_usage(fmt),
    )


async def collect(
    provider: Provider, request: ModelRequest = REQUEST
) -> tuple[list[StreamEvent], AssistantMessage]:
    events: list[StreamEvent] = []
    async for event in provider.stream(request):
        events.append(event)
    done = events[-1]
    assert isinstance(done, StreamDone), events[-3:]
    return events, done.message


def same_message(got: AssistantMessage, want: AssistantMessage) -> None:
    """Content, stop reason and usage as scripted (model, ids and timestamps aside)."""
    assert got.content == want.content
    assert got.stop_reason == want.stop_reason
    assert got.usage == want.usage
