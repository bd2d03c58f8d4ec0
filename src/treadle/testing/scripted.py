"""ScriptedProvider: a Provider that plays back a script, streaming like a real one."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Union

import anyio
import anyio.lowlevel

from ..cancellation import CancellationToken
from ..providers.base import (
    ModelRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    StreamStart,
    TextEnd,
    TextStart,
    ThinkingEnd,
    ThinkingStart,
)
from ..types import (
    AssistantMessage,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

ScriptItem = Union[
    AssistantMessage,
    ProviderError,
    str,
    Callable[[ModelRequest], Union[AssistantMessage, Awaitable[AssistantMessage]]],
]


def _chunks(text: str, parts: int) -> list[str]:
    """``text`` cut into about ``parts`` pieces (at least one, never empty pieces)."""
    if len(text) <= 1 or parts <= 1:
        return [text]
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _estimate(request: ModelRequest) -> int:
    chars = len(request.system_prompt or "")
    for message in request.messages:
        chars += len(message.model_dump_json()) // 2
    for spec in request.tools:
        chars += len(spec.name) + len(spec.description) + len(json.dumps(spec.parameters))
    return max(1, chars // 4)


class ScriptedProvider:
    """Plays a script: each model call takes the next item.

    An item is an :class:`AssistantMessage` (streamed as realistic deltas: text and tool-call
    arguments in several chunks), a :class:`ProviderError` (raised, as a failing API would), a
    plain string (a text answer), or a callable ``(ModelRequest) -> AssistantMessage`` (sync or
    async) for answers that depend on the request. Every request is kept in ``requests``.

    ``chunks`` sets how many pieces each text/argument is streamed in; ``delay`` (seconds)
    sleeps before each delta, which makes cancellation tests realistic. Messages without
    usage get a deterministic estimate. When the script runs out, the call fails with a
    ``bad_request`` ProviderError that says so. A single string is a one-answer script
    (``ScriptedProvider("hi")`` is ``ScriptedProvider(["hi"])``), never one answer per
    character.
    """

    def __init__(
        self,
        script: Sequence[ScriptItem] | str = (),
        *,
        name: str = "scripted",
        model: str = "scripted-model",
        chunks: int = 3,
        delay: float = 0.0,
    ) -> None:
        self.script: list[ScriptItem] = [script] if isinstance(script, str) else list(script)
        self.name = name
        self.model = model
        self.chunks = chunks
        self.delay = delay
        self.requests: list[ModelRequest] = []
        self._next = 0

    def add(self, *items: ScriptItem) -> None:
        """Append more items to the script."""
        self.script.extend(items)

    @property
    def remaining(self) -> int:
        return len(self.script) - self._next

    def __repr__(self) -> str:
        return f"ScriptedProvider(name={self.name!r}, remaining={self.remaining})"

    def _next_item(self) -> ScriptItem:
        if self._next >= len(self.script):
            raise ProviderError(
                "bad_request",
                f"ScriptedProvider's script is exhausted: it held {len(self.script)} responses "
                f"and request number {len(self.requests)} came. Add more items to the script.",
                provider=self.name,
            )
        item = self.script[self._next]
        self._next += 1
        return item

    async def _pause(self, cancel: CancellationToken | None) -> None:
        if self.delay:
            await anyio.sleep(self.delay)
        else:
            await anyio.lowlevel.checkpoint()
        if cancel is not None and cancel.immediate:
            raise ProviderError("cancelled", "cancelled by the caller", provider=self.name)

    async def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        item = self._next_item()
        if isinstance(item, ProviderError):
            await self._pause(cancel)
            raise item
        if isinstance(item, str):
            message = AssistantMessage(content=[TextContent(text=item)])
        elif isinstance(item, AssistantMessage):
            message = item
        else:
            produced = item(request)
            message = await produced if inspect.isawaitable(produced) else produced
        message = self._finalise(message, request)

        yield StreamStart(model=message.model, response_id=message.response_id)
        for index, block in enumerate(message.content):
            if isinstance(block, TextContent):
                yield TextStart(index=index)
                for piece in _chunks(block.text, self.chunks):
                    await self._pause(cancel)
                    yield TextDelta(index=index, text=piece)
                yield TextEnd(index=index, citations=block.citations)  # as adapters do
            elif isinstance(block, ThinkingContent):
                yield ThinkingStart(index=index, redacted=block.redacted)
                for piece in _chunks(block.thinking, self.chunks):
                    await self._pause(cancel)
                    yield ThinkingDelta(index=index, text=piece)
                yield ThinkingEnd(index=index, signature=block.signature)
            elif isinstance(block, ToolCall):
                await self._pause(cancel)
                yield ToolCallStart(index=index, id=block.id, name=block.name)
                raw = block.raw_arguments
                if raw is None:
                    raw = json.dumps(block.arguments)
                for piece in _chunks(raw, self.chunks):
                    await self._pause(cancel)
                    yield ToolCallDelta(index=index, arguments=piece)
                yield ToolCallEnd(index=index, tool_call=block)
        await self._pause(cancel)
        yield StreamDone(message=message)

    def _finalise(self, message: AssistantMessage, request: ModelRequest) -> AssistantMessage:
        update: dict[str, object] = {"provider": self.name, "model": message.model or self.model}
        if message.tool_calls and message.stop_reason == "stop":
            update["stop_reason"] = "tool_use"
        if message.usage == Usage():
            prompt = _estimate(request)
            output = max(1, sum(len(b.model_dump_json()) for b in message.content) // 4)
            update["usage"] = Usage(input=prompt, output=output, total_tokens=prompt + output)
        return message.model_copy(update=update, deep=True)
