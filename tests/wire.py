"""Load recorded provider exchanges from tests/fixtures/wire and replay them with respx."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx

from treadle.providers.base import (
    StreamDone,
    StreamStart,
    TextEnd,
    TextStart,
    ThinkingEnd,
    ThinkingStart,
)
from treadle.types import (
    AssistantMessage,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

WIRE = Path(__file__).resolve().parent / "fixtures" / "wire"


def load(name: str) -> dict[str, Any]:
    """A fixture by its name, e.g. ``"openai/chat-stream-tool-call"``."""
    data: dict[str, Any] = json.loads((WIRE / f"{name}.json").read_text(encoding="utf-8"))
    return data


def index() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads((WIRE / "index.json").read_text())
    return entries


def names(provider: str, api: str | None = None) -> list[str]:
    """Fixture names for one provider (and API, e.g. ``"chat.completions"``)."""
    return sorted(
        e["name"]
        for e in index()
        if e["provider"] == provider and (api is None or e.get("api") == api)
    )


def split(body: bytes, how: str | int) -> list[bytes]:
    """Cut ``body`` into chunks: ``"whole"``, ``"bytes"`` (one byte each), ``"lines"``, or a
    seed for random cut points (which lands inside lines and UTF-8 characters)."""
    if how == "whole":
        return [body]
    if how == "bytes":
        return [body[i : i + 1] for i in range(len(body))]
    if how == "lines":
        return body.splitlines(keepends=True)
    rng = random.Random(how)
    cuts = sorted(rng.sample(range(1, len(body)), min(len(body) - 1, max(1, len(body) // 7))))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


CHUNKINGS: list[str | int] = ["whole", "lines", 1, 2, 3]


class ChunkedStream(httpx.AsyncByteStream):
    """A response body delivered in the given chunks, as a real socket would."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


def response(fixture: dict[str, Any], how: str | int = "whole") -> httpx.Response:
    """The fixture's recorded response, body cut into chunks by ``how``."""
    resp = fixture["response"]
    body = resp["body"].encode("utf-8")
    return httpx.Response(
        resp["status"], headers=resp.get("headers", {}), stream=ChunkedStream(split(body, how))
    )


def iter_fixtures(provider: str) -> Iterator[dict[str, Any]]:
    for name in names(provider):
        yield load(name)


def check_consistency(events: list[Any], provider: str) -> AssistantMessage:
    """The contract every adapter's stream keeps: start first, one done last, every delta
    on a block of its kind, and the deltas add up to the final message."""
    assert isinstance(events[0], StreamStart)
    assert isinstance(events[-1], StreamDone)
    assert sum(isinstance(e, StreamDone) for e in events) == 1
    message = events[-1].message
    text: dict[int, str] = {}
    args: dict[int, str] = {}
    for event in events[1:-1]:
        index = getattr(event, "index", None)
        assert index is not None and 0 <= index < len(message.content), event
        block = message.content[index]
        if isinstance(event, TextDelta):
            assert isinstance(block, TextContent)
            text[index] = text.get(index, "") + event.text
        elif isinstance(event, ThinkingDelta):
            assert isinstance(block, ThinkingContent)
            text[index] = text.get(index, "") + event.text
        elif isinstance(event, ToolCallStart):
            assert isinstance(block, ToolCall)
            assert (event.id, event.name) == (block.id, block.name)
        elif isinstance(event, ToolCallDelta):
            args[index] = args.get(index, "") + event.arguments
        elif isinstance(event, ToolCallEnd):
            assert event.tool_call == block
        elif isinstance(event, (TextStart, TextEnd)):
            assert isinstance(block, TextContent)
        elif isinstance(event, (ThinkingStart, ThinkingEnd)):
            assert isinstance(block, ThinkingContent)
            if isinstance(event, ThinkingEnd):
                assert event.signature == block.signature
    for index, block in enumerate(message.content):
        if isinstance(block, TextContent):
            assert text.get(index, "") == block.text
        elif isinstance(block, ThinkingContent):
            assert text.get(index, "") == block.thinking
        elif isinstance(block, ToolCall):
            raw = args.get(index, "")
            if block.raw_arguments is not None:
                assert raw == block.raw_arguments and block.arguments == {}
            else:
                assert (json.loads(raw) if raw else {}) == block.arguments
    assert message.provider == provider
    return message
