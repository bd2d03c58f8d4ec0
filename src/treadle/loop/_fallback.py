"""A FallbackModel's move to its next model, as the loop takes it (docs/providers.md#fallback):
the answer streamed so far is void — its eager calls ended, the partial message dropped — and
a ``provider_fallback`` event says so; unless a tool call of this turn already ran and the
model does not allow a fallback after one, and then its failure stands."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from ..providers.base import ModelRequest, ProviderError, StreamFallback
from ..types import AssistantMessage, ProviderFallback
from .sink import EventSink


class _Answer(Protocol):
    """What the loop keeps of the answer being streamed (``_streaming.StreamState``)."""

    started: bool
    partial: AssistantMessage

    def reset(self, request: ModelRequest, provider: str) -> None: ...


async def fall_back(
    event: StreamFallback,
    *,
    state: _Answer,
    sink: EventSink,
    on_retry: Callable[[], Awaitable[None]] | None,
    ran: Callable[[], bool] | None,
) -> None:
    """Take ``event``: report the move and start the answer afresh for the next model, or
    raise the failure it carries when a tool call of this turn ran (``ran``) and the model
    allows no fallback after one."""
    if ran is not None and ran() and not event.after_tool_call:
        raise ProviderError(
            event.error_kind,
            f"{event.message} (no fallback to {event.to_provider}:{event.to_model}: a tool "
            "call of this turn already ran; FallbackModel(after_tool_call=True) allows it)",
            status_code=event.status_code,
            provider=event.from_provider,
        )
    if on_retry is not None:
        await on_retry()  # the failed answer's eager calls end before the event that closes it
    await sink.emit(
        ProviderFallback,
        from_provider=event.from_provider,
        from_model=event.from_model,
        to_provider=event.to_provider,
        to_model=event.to_model,
        error_kind=event.error_kind,
        status_code=event.status_code,
        message=event.message,
        discard_partial=state.started,
    )
    state.reset(ModelRequest(model=event.to_model), event.to_provider)
