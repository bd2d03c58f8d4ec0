"""One assistant message: call the provider, turn its stream into events, retry failures."""

from __future__ import annotations

import functools
import inspect
import logging
import random
from collections.abc import Awaitable, Callable
from contextlib import aclosing, nullcontext
from typing import Any

import anyio
import anyio.lowlevel

from .._redact import scrub_text, traceback_text
from .._signals import RunLimitHit
from ..cancellation import CancellationToken
from ..providers.base import ModelRequest, Provider, ProviderError, StreamDone, StreamFallback
from ..types import (
    AssistantMessage,
    ErrorInfo,
    MessageEnd,
    MessageStart,
    ProviderRetry,
    TextContent,
    TextDelta,
    ThinkingContent,
    ToolCall,
    Usage,
    now_ms,
)
from ..types._base import replaced, trusted
from ._bounds import StreamBounds, _Watch
from ._fallback import fall_back
from .config import RetryPolicy
from .sink import EventSink

logger = logging.getLogger("treadle.loop")

_DELTAS = frozenset({"text", "thinking", "tool_call_start", "tool_call_delta", "tool_call_end"})


def _empty_reply(model: Any, provider: Any) -> AssistantMessage:
    """``AssistantMessage(model=model, provider=provider)``, without validation when the two
    are plain strings (once per model call)."""
    if type(model) is not str or type(provider) is not str:
        return AssistantMessage(model=model, provider=provider)
    values = {
        "role": "assistant",
        "content": [],
        "stop_reason": "stop",
        "model": model,
        "provider": provider,
        "usage": Usage(),
        "timestamp": now_ms(),
        "response_id": None,
        "error": None,
        "cache_point": False,
    }
    return trusted(AssistantMessage, values, {"model", "provider"})


class _Snapshot:
    """The partial message as it stood after one delta, built only when read.

    ``blocks`` is the content as it stood: no block in it changes again, except the one at
    ``hot``, whose text (field ``key``) has only grown since: its first ``length``
    characters are what it held. So a snapshot holds no text of its own."""

    __slots__ = ("base", "blocks", "hot", "key", "length")

    def __init__(
        self,
        base: tuple[dict[str, Any], frozenset[str]],
        blocks: tuple[Any, ...],
        hot: int,
        key: str,
        length: int,
    ) -> None:
        self.base = base  # the partial's other fields, and its fields set
        self.blocks = blocks
        self.hot = hot
        self.key = key
        self.length = length

    def build(self) -> AssistantMessage:
        content = list(self.blocks)
        hot = self.hot
        if hot >= 0:
            block = content[hot]
            content[hot] = replaced(block, self.key, block.__dict__[self.key][: self.length])
        fields, fields_set = self.base
        values = dict(fields)
        values["content"] = content
        return trusted(AssistantMessage, values, set(fields_set))


class StreamState:
    """The message being streamed, kept outside the call so a cancelled stream leaves it.

    Every snapshot handed to an event (``view()``, ``snapshot()``) stays as it was when it
    was sent: a consumer that reads a queued ``message_update`` later sees the message as of
    that delta. The block receiving text (the *hot* block) is appended to in place; every
    other block is replaced, never mutated. So a snapshot is the content's block tuple
    (rebuilt only when a block is added or replaced) plus the hot block's text at the time:
    no copy per delta, and the message is built only if someone reads it.
    """

    __slots__ = (
        "_base",
        "_blocks",
        "_hot",
        "complete_calls",
        "ended",
        "final",
        "limit_reason",
        "partial",
        "snapshots",
        "started",
        "text_only",
    )

    def __init__(
        self,
        request: ModelRequest,
        provider: str,
        snapshots: bool = True,
        text_only: bool = False,
    ) -> None:
        self.snapshots = snapshots  # False when nobody sees partial messages
        self.text_only = text_only  # no tools were offered: a call in the answer cannot run
        self.partial = _empty_reply(request.model, provider)
        self.started = False
        self.ended = False
        self.complete_calls: set[int] = set()
        self._hot = -1  # the block appended to in place (-1: none)
        self._blocks: tuple[Any, ...] | None = None  # the content as a tuple, while unchanged
        self._base: tuple[dict[str, Any], frozenset[str]] | None = None  # other fields
        self.final: AssistantMessage | None = None  # recorded in the history, end not yet sent
        self.limit_reason: str | None = None  # the run's limit stopped this stream

    def reset(self, request: ModelRequest, provider: str) -> None:
        self.__init__(request, provider, self.snapshots, self.text_only)  # type: ignore[misc]

    def snapshot(self, reuse: _Snapshot | None = None) -> _Snapshot:
        """The partial message as it stands now, to be built if read (see ``_Snapshot``).

        ``reuse``: the snapshot of an update that takes in this delta too and that nobody
        has read (``EventSink`` joins them): moved on in place when only the hot block's
        text grew since, instead of a new one per delta."""
        blocks = self._blocks
        if blocks is None:
            blocks = self._blocks = tuple(self.partial.content)
        base = self._base
        if base is None:
            fields = dict(self.partial.__dict__)  # "content" is replaced when built (in place)
            base = self._base = (fields, frozenset(self.partial.__pydantic_fields_set__))
        hot = self._hot
        if hot < 0:
            return _Snapshot(base, blocks, -1, "", 0)
        block = blocks[hot]
        key = "text" if type(block) is TextContent else "thinking"
        length = len(block.__dict__[key])
        if reuse is not None and reuse.blocks is blocks and reuse.hot == hot:
            reuse.length = length
            return reuse
        return _Snapshot(base, blocks, hot, key, length)

    def view(self) -> AssistantMessage:
        """An unchanging snapshot of the partial message, built now."""
        return self.snapshot().build()

    def _put(self, index: int, block: Any) -> int:
        """Put ``block`` at ``index`` (or after the last block); returns where it went."""
        content = self.partial.content
        if index < len(content):
            content[index] = block
        else:
            index = len(content)
            content.append(block)
        if index == self._hot:
            self._hot = -1  # a new object: earlier snapshots keep the one they had
        self._blocks = None
        return index

    def _heat(self, index: int, block: Any) -> Any:
        """Make ``block`` (at ``index``) the one appended to in place. It may be in a
        snapshot's blocks already, as a block that does not change: so it is copied first.
        The block that was hot is left as it is, never to be changed again."""
        self._hot = index
        if self.snapshots:
            block = block.model_copy()
            self.partial.content[index] = block
            self._blocks = None
        return block

    def apply(self, event: Any) -> None:
        """Fold one stream event into the partial message."""
        kind = event.type
        content = self.partial.content
        index = event.__dict__.get("index", 0)  # (getattr on a model without it raises)
        block = content[index] if index < len(content) else None
        if kind == "text":
            if type(block) is TextContent:
                if index != self._hot:
                    block = self._heat(index, block)
                block.__dict__["text"] += event.text  # only ever appended to (see _Snapshot)
            else:
                self._hot = self._put(index, TextContent(text=event.text))
        elif kind == "thinking":
            if type(block) is ThinkingContent:
                if index != self._hot:
                    block = self._heat(index, block)
                block.__dict__["thinking"] += event.text
            else:
                self._hot = self._put(index, ThinkingContent(thinking=event.text))
        elif kind == "tool_call_start":
            self._put(index, ToolCall(id=event.id, name=event.name))
        elif kind == "tool_call_end":
            self._put(index, event.tool_call)
            self.complete_calls.add(index)
        elif kind == "text_start":
            if block is None:
                self._put(index, TextContent(text=""))
        elif kind == "thinking_start":
            if block is None:
                self._put(index, ThinkingContent(thinking="", redacted=event.redacted))
        elif kind == "text_end":
            cited = event.citations
            if cited and type(block) is TextContent:  # sources come with the block's end
                self._put(index, block.model_copy(update={"citations": list(cited)}))
        elif kind == "thinking_end":
            if isinstance(block, ThinkingContent) and event.signature is not None:
                self._put(index, block.model_copy(update={"signature": event.signature}))
        elif kind == "start":
            if event.model:
                self.partial.model = event.model
            self.partial.response_id = event.response_id
            self._base = None

    def closed(self, stop_reason: Any, error: ErrorInfo | None = None) -> AssistantMessage:
        """The partial message as a final one; tool calls whose arguments never completed
        are dropped (they cannot be run or answered meaningfully), and every call when no
        tools were offered (the final answer at a limit: nothing would run it)."""
        content = [
            block
            for i, block in enumerate(self.partial.content)
            if not isinstance(block, ToolCall) or i in self.complete_calls
        ]
        if stop_reason == "error" or self.text_only:
            content = [b for b in content if not isinstance(b, ToolCall)]
        return self.partial.model_copy(
            update={"content": content, "stop_reason": stop_reason, "error": error}
        )


OVERFLOW_RETRIES = 3
"""How many times one model call is compacted and sent again after ``context_overflow``
errors (each time harder) before the error stands."""


async def stream_message(
    provider: Provider,
    request: ModelRequest,
    sink: EventSink,
    retry: RetryPolicy,
    state: StreamState,
    cancel: CancellationToken | None,
    on_final: Callable[[AssistantMessage], Awaitable[None]],
    *,
    fallback_text: str | None = None,
    text_only: bool = False,
    on_overflow: Callable[
        [ProviderError, ModelRequest], Awaitable[ModelRequest | ProviderError | None]
    ]
    | None = None,
    bounds: StreamBounds | None = None,
    on_call: Callable[[ToolCall], Awaitable[None]] | None = None,
    on_retry: Callable[[], Awaitable[None]] | None = None,
    coalesce: bool = True,
    tool_ran: Callable[[], bool] | None = None,
) -> AssistantMessage:
    """Stream one assistant message, emitting message_start / update* / end; retry per
    ``retry``. A final failure becomes a message with ``stop_reason="error"``.

    ``on_call`` (eager tool calls) is awaited with each tool call whose block is complete,
    after the message_update carrying its ``tool_call_end``; ``on_retry`` before a retry
    (the attempt's calls are void) or a FallbackModel's move on (unless ``tool_ran()``).

    ``on_overflow`` (the loop's compaction) sees a ``context_overflow`` that came before
    anything was streamed, before it is recorded; when it returns a request (built from the
    compacted history) the call is retried with it, after a ``provider_retry`` (numbered
    up to :data:`OVERFLOW_RETRIES`, which the handler enforces)."""
    name = getattr(provider, "name", type(provider).__name__)
    attempt = 0
    overflows = 0
    bug: Exception | None = None
    on_fallback = functools.partial(
        fall_back, state=state, sink=sink, on_retry=on_retry, ran=tool_ran
    )
    while True:
        try:
            final = await _attempt(
                provider, request, sink, state, cancel, bounds, on_call, coalesce, on_fallback
            )
        except RunLimitHit as hit:
            state.limit_reason = str(hit)
            stopped = state.closed("length", ErrorInfo(kind="limit", message=str(hit)))
            stopped.content = [b for b in stopped.content if not isinstance(b, ToolCall)]
            return await close_message(sink, state, stopped, on_final)
        except ProviderError as exc:
            error = exc
            retryable = error.kind in retry.retry_on
        except Exception as exc:  # a provider bug must not crash the loop, nor be retried
            logger.error("the provider %s raised (a bug in it)", name, exc_info=exc)
            error = ProviderError(
                "provider_bug",
                scrub_text(f"the provider raised {type(exc).__name__}: {exc}"),
                provider=name,
            )
            retryable, bug = False, exc
        else:
            if text_only and final.tool_calls:  # no tools were offered; a call cannot run
                content = [b for b in final.content if not isinstance(b, ToolCall)]
                final = final.model_copy(update={"content": content, "stop_reason": "stop"})
            return await close_message(sink, state, final, on_final)

        if error.kind == "cancelled":
            await anyio.lowlevel.checkpoint()  # raises here when our scope was cancelled
            return await close_message(sink, state, state.closed("aborted"), on_final)
        if error.kind == "context_overflow" and on_overflow is not None and not state.started:
            retried = await on_overflow(error, request)
            if isinstance(retried, ProviderError):
                error, retryable = retried, False  # compaction could not help: say so
                retried = None
            if retried is not None:
                overflows += 1
                await sink.emit(
                    ProviderRetry,
                    attempt=overflows,
                    max_retries=OVERFLOW_RETRIES,
                    delay_s=0.0,
                    error_kind=error.kind,
                    status_code=error.status_code,
                    message=error.message,
                )
                request = retried
                state.reset(request, name)
                continue
        delay = retry.delay(attempt, random.random())
        too_long = (
            retryable
            and error.retry_after is not None
            and error.retry_after > retry.max_retry_after_s
        )
        if error.retry_after is not None and not too_long:
            delay = error.retry_after
        if retryable and attempt < retry.max_retries and not too_long:
            attempt += 1
            if on_retry is not None:
                await on_retry()
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

        info = ErrorInfo(
            kind=error.kind,
            message=error.message,
            status_code=error.status_code,
            traceback=traceback_text(bug) if bug is not None else None,
        )
        if too_long:
            info.message = (
                f"{error.message} (the provider asked to wait {error.retry_after:g}s, more "
                f"than RetryPolicy.max_retry_after_s={retry.max_retry_after_s:g}s)"
            )
        if fallback_text is not None and state.started:
            # What streamed stays (its deltas were reported) and the fallback follows it in a
            # block of its own, streamed too: the deltas add up to the message (contract §2).
            note = TextDelta(index=len(state.partial.content), text=fallback_text)
            state.apply(note)
            if sink.active:
                await sink.emit_update(state.snapshot(), note)
            final = state.closed("stop", info)
        elif fallback_text is not None:
            final = state.partial.model_copy(
                update={
                    "content": [TextContent(text=fallback_text)],
                    "stop_reason": "stop",
                    "error": info,
                }
            )
        else:
            final = state.closed("error", info)
        return await close_message(sink, state, final, on_final)


async def close_message(
    sink: EventSink,
    state: StreamState,
    final: AssistantMessage,
    on_final: Callable[[AssistantMessage], Awaitable[None]],
) -> AssistantMessage:
    """Record ``final`` (``on_final``: into the history, durable) and only then report its
    message_end; a message_start is sent first if the stream never produced one."""
    if not state.started:
        state.started = True
        await sink.emit(MessageStart, message=final)
    if state.final is None:
        state.final = final  # before on_final: if a hook fails, cleanup must not record it again
        try:
            await on_final(final)
        except Exception:  # a hook failed: the message is in the history, its pair closes
            state.ended = True
            await sink.emit(MessageEnd, message=final)
            raise
    state.ended = True
    await sink.emit(MessageEnd, message=state.final)
    return state.final


async def _attempt(
    provider: Provider,
    request: ModelRequest,
    sink: EventSink,
    state: StreamState,
    cancel: CancellationToken | None,
    bounds: StreamBounds | None = None,
    on_call: Callable[[ToolCall], Awaitable[None]] | None = None,
    coalesce: bool = True,
    on_fallback: Callable[[StreamFallback], Awaitable[None]] | None = None,
) -> AssistantMessage:
    partial = state.partial
    emitting = sink.active
    if request.coalesce_deltas is not coalesce:  # the loop's setting, whoever built it
        request = replaced(request, "coalesce_deltas", coalesce)
    stream = provider.stream(request, cancel=cancel)
    if not hasattr(stream, "__aiter__"):
        if inspect.iscoroutine(stream):
            stream.close()  # never awaited, on purpose: no "never awaited" warning
        raise ProviderError(
            "bad_request",
            f"{type(provider).__name__}.stream() returned {type(stream).__name__}, not an async "
            "iterator of stream events: write it as an async generator "
            "(`async def stream(self, request, *, cancel=None): ... yield event`).",
            provider=partial.provider,
        )
    watch = _Watch(bounds) if bounds is not None else None
    final: AssistantMessage | None = None
    with watch.scope if watch is not None else nullcontext():
        final = await _consume(stream, state, sink, emitting, watch, on_call, on_fallback)
    partial = state.partial  # (a fallback starts the answer afresh)
    if watch is not None and watch.scope.cancelled_caught:
        raise watch.expired(partial.provider)
    if final is not None:
        return final
    if cancel is not None and cancel.immediate:  # a provider may simply stop when cancelled
        raise ProviderError("cancelled", "cancelled by the caller", provider=partial.provider)
    raise ProviderError(
        "truncated_stream",
        "the provider's stream ended without a final message",
        provider=partial.provider,
    )


async def _consume(
    stream: Any,
    state: StreamState,
    sink: EventSink,
    emitting: bool,
    watch: _Watch | None,
    on_call: Callable[[ToolCall], Awaitable[None]] | None = None,
    on_fallback: Callable[[StreamFallback], Awaitable[None]] | None = None,
) -> AssistantMessage | None:
    partial = state.partial
    async with aclosing(stream) as events:
        final: AssistantMessage | None = None
        async for event in events:
            if watch is not None and watch.tick(event):
                raise RunLimitHit("reached max_total_tokens while the model was streaming")
            if final is not None:
                continue  # read to the end so the HTTP connection goes back to the pool
            kind = event.type
            if isinstance(event, StreamDone):
                final = event.message
                if not final.provider:
                    final.provider = partial.provider
                continue
            if kind == "fallback":
                if on_fallback is not None:
                    await on_fallback(event)
                partial = state.partial
                continue
            state.apply(event)
            if not emitting:
                state.started = True
            else:
                if not state.started:
                    state.started = True
                    await sink.emit(MessageStart, message=state.view())
                if kind in _DELTAS and not sink.offer_update(state.snapshot, event):
                    await sink.emit_update(state.snapshot(), event)
            if on_call is not None and kind == "tool_call_end":
                await on_call(event.tool_call)
    return final
