"""One assistant message: call the provider, turn its stream into events, retry failures."""

from __future__ import annotations

import random
from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel

from .._cancel import CancellationToken
from ..providers.base import ModelRequest, Provider, ProviderError, StreamDone
from ..types import (
    AssistantMessage,
    ErrorInfo,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProviderRetry,
    TextContent,
    ThinkingContent,
    ToolCall,
)
from .config import RetryPolicy
from .sink import EventSink

_DELTAS = frozenset({"text", "thinking", "tool_call_start", "tool_call_delta", "tool_call_end"})


class StreamState:
    """The message being streamed, kept outside the call so a cancelled stream leaves it."""

    __slots__ = ("complete_calls", "ended", "partial", "started")

    def __init__(self, request: ModelRequest, provider: str) -> None:
        self.partial = AssistantMessage(model=request.model, provider=provider)
        self.started = False
        self.ended = False
        self.complete_calls: set[int] = set()

    def reset(self, request: ModelRequest, provider: str) -> None:
        self.__init__(request, provider)  # type: ignore[misc]

    def apply(self, event: Any) -> None:
        """Fold one stream event into the partial message."""
        kind = event.type
        content = self.partial.content
        if kind == "text":
            block = content[event.index] if event.index < len(content) else None
            if isinstance(block, TextContent):
                # No validation to run on a str append; skip pydantic's __setattr__.
                block.__dict__["text"] += event.text
            else:
                content.append(TextContent(text=event.text))
        elif kind == "thinking":
            block = content[event.index] if event.index < len(content) else None
            if isinstance(block, ThinkingContent):
                block.thinking += event.text
            else:
                content.append(ThinkingContent(thinking=event.text))
        elif kind == "tool_call_start":
            content.append(ToolCall(id=event.id, name=event.name))
        elif kind == "tool_call_end":
            if event.index < len(content):
                content[event.index] = event.tool_call
            else:
                content.append(event.tool_call)
            self.complete_calls.add(event.index)
        elif kind == "text_start":
            if event.index >= len(content):
                content.append(TextContent(text=""))
        elif kind == "thinking_start":
            if event.index >= len(content):
                content.append(ThinkingContent(thinking="", redacted=event.redacted))
        elif kind == "thinking_end":
            block = content[event.index] if event.index < len(content) else None
            if isinstance(block, ThinkingContent) and event.signature is not None:
                block.signature = event.signature
        elif kind == "start":
            if event.model:
                self.partial.model = event.model
            self.partial.response_id = event.response_id

    def closed(self, stop_reason: Any, error: ErrorInfo | None = None) -> AssistantMessage:
        """The partial message as a final one; tool calls whose arguments never completed
        are dropped (they cannot be run or answered meaningfully)."""
        content = [
            block
            for i, block in enumerate(self.partial.content)
            if not isinstance(block, ToolCall) or i in self.complete_calls
        ]
        if stop_reason == "error":
            content = [b for b in content if not isinstance(b, ToolCall)]
        return self.partial.model_copy(
            update={"content": content, "stop_reason": stop_reason, "error": error}
        )


async def stream_message(
    provider: Provider,
    request: ModelRequest,
    sink: EventSink,
    retry: RetryPolicy,
    state: StreamState,
    cancel: CancellationToken | None,
    *,
    fallback_text: str | None = None,
) -> AssistantMessage:
    """Stream one assistant message, emitting message_start / update* / end; retry per
    ``retry``. A final failure becomes a message with ``stop_reason="error"``."""
    name = getattr(provider, "name", type(provider).__name__)
    attempt = 0
    while True:
        try:
            final = await _attempt(provider, request, sink, state, cancel)
        except ProviderError as exc:
            error = exc
            retryable = error.kind in retry.retry_on
        except Exception as exc:  # a provider bug must not crash the loop, nor be retried
            error = ProviderError(
                "server", f"the provider raised {type(exc).__name__}: {exc}", provider=name
            )
            retryable = False
        else:
            if not state.started:
                state.started = True
                await sink.emit(MessageStart, message=final)
            state.ended = True
            await sink.emit(MessageEnd, message=final)
            return final

        if error.kind == "cancelled":
            await anyio.lowlevel.checkpoint()  # raises here when our scope was cancelled
            return await _close(sink, state, state.closed("aborted"))
        delay = retry.delay(attempt, random.random())
        too_long = error.retry_after is not None and error.retry_after > retry.max_retry_after_s
        if error.retry_after is not None and not too_long:
            delay = error.retry_after
        if retryable and attempt < retry.max_retries and not too_long:
            attempt += 1
            await sink.emit(
                ProviderRetry,
                attempt=attempt,
                max_retries=retry.max_retries,
                delay_s=delay,
                error_kind=error.kind,
                status_code=error.status_code,
                message=error.message,
                discard_partial=state.started,
            )
            state.reset(request, name)
            await anyio.sleep(delay)
            continue

        info = ErrorInfo(kind=error.kind, message=error.message, status_code=error.status_code)
        if too_long:
            info.message = (
                f"{error.message} (the provider asked to wait {error.retry_after:g}s, more "
                f"than RetryPolicy.max_retry_after_s={retry.max_retry_after_s:g}s)"
            )
        if fallback_text is not None:
            final = state.partial.model_copy(
                update={
                    "content": [TextContent(text=fallback_text)],
                    "stop_reason": "stop",
                    "error": info,
                }
            )
        else:
            final = state.closed("error", info)
        return await _close(sink, state, final)


async def _close(sink: EventSink, state: StreamState, final: AssistantMessage) -> AssistantMessage:
    if not state.started:
        state.started = True
        await sink.emit(MessageStart, message=final)
    state.ended = True
    await sink.emit(MessageEnd, message=final)
    return final


async def _attempt(
    provider: Provider,
    request: ModelRequest,
    sink: EventSink,
    state: StreamState,
    cancel: CancellationToken | None,
) -> AssistantMessage:
    partial = state.partial
    emitting = sink.active
    async with aclosing(provider.stream(request, cancel=cancel)) as events:  # type: ignore[type-var]
        final: AssistantMessage | None = None
        async for event in events:
            if final is not None:
                continue  # read to the end so the HTTP connection goes back to the pool
            kind = event.type
            if isinstance(event, StreamDone):
                final = event.message
                if not final.provider:
                    final.provider = partial.provider
                continue
            state.apply(event)
            if not state.started:
                state.started = True
                await sink.emit(MessageStart, message=partial)
            if emitting and kind in _DELTAS:
                await sink.emit(MessageUpdate, message=partial, delta=event)
    if final is not None:
        return final
    raise ProviderError(
        "truncated_stream",
        "the provider's stream ended without a final message",
        provider=partial.provider,
    )
