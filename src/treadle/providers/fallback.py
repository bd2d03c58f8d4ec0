"""``FallbackModel``: a Provider that answers with its first model and moves on to the next
when one fails with an error the caller names (docs/providers.md#fallback)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Union, get_args

from ..cancellation import CancellationToken
from ..errors import UsageError
from .base import ErrorKind, ModelRequest, Provider, ProviderError, StreamEvent, StreamFallback

FALLBACK_ON: frozenset[ErrorKind] = frozenset(
    {
        "rate_limit",
        "overloaded",
        "server",
        "timeout",
        "network",
        "unreachable",
        "truncated_stream",
        "auth",
    }
)
"""What moves a :class:`FallbackModel` on by default: the failures of a provider or an
account (limits, outages, credentials), never those of the request itself (``bad_request``,
``context_overflow``) nor a cancellation."""

FallbackOn = Union[Iterable[ErrorKind], Callable[[ProviderError], bool]]


def _kinds(on: Iterable[str]) -> frozenset[str]:
    kinds = frozenset(on)
    if isinstance(on, str):
        raise UsageError(f"on= takes error kinds, not a str: on=({on!r},)")
    known = set(get_args(ErrorKind))
    unknown = sorted(kinds - known)
    if unknown:
        raise UsageError(
            f"FallbackModel(on=...) got unknown error kinds {unknown}: use "
            f"{', '.join(sorted(known - {'cancelled'}))}"
        )
    if "cancelled" in kinds:
        raise UsageError("a cancellation is the caller's own stop: FallbackModel never moves on")
    return kinds


def _label(provider: Any, model: str = "") -> tuple[str, str]:
    name = str(getattr(provider, "name", "") or type(provider).__name__)
    return name, model or str(getattr(provider, "model", "") or "")


class FallbackModel:
    """A :class:`~treadle.providers.Provider` over several: each request goes to ``primary``
    first and to the next of ``fallbacks`` when one fails with an error ``on`` names (error
    kinds, or a predicate of the :class:`ProviderError`; default :data:`FALLBACK_ON`).

    Models are providers or model strings (``"anthropic:claude-sonnet-4-5"``). The next
    model gets the request with ``model`` cleared, so it uses its own. Between the two the
    stream carries a :class:`StreamFallback`, which the loop reports as a
    ``provider_fallback`` event; what the failed model streamed is void. A failure after
    a tool call of the turn already ran (an eager tool) does not move on unless
    ``after_tool_call=True``: the error stands, and the loop's retry policy decides.
    When the last model fails too, its error is raised. ``last_provider`` is the model
    that answered the last request."""

    def __init__(
        self,
        primary: Provider | str,
        *fallbacks: Provider | str,
        on: FallbackOn = FALLBACK_ON,
        after_tool_call: bool = False,
    ) -> None:
        if not fallbacks:
            raise UsageError(
                "FallbackModel needs a model to fall back to: FallbackModel(primary, fallback, ...)"
            )
        self.models: tuple[Provider, ...] = tuple(map(_provider, (primary, *fallbacks)))
        if callable(on):
            self._falls_back: Callable[[ProviderError], bool] = on
            self.on: frozenset[str] | None = None
        else:
            kinds = self.on = _kinds(on)
            self._falls_back = lambda error: error.kind in kinds
        self.after_tool_call = after_tool_call
        first = self.models[0]
        # The primary's, so prices, context windows and the config snapshot read as it.
        self.name: str = _label(first)[0]
        self.model: str = _label(first)[1]
        self.base_url: Any = getattr(first, "base_url", None)
        self.last_provider: Provider | None = None

    def __repr__(self) -> str:
        chain = ", ".join(f"{n}:{m}" for n, m in map(_label, self.models))
        return f"FallbackModel({chain})"

    async def aclose(self) -> None:
        """Close every model that can be closed."""
        for provider in self.models:
            closer = getattr(provider, "aclose", None)
            if closer is not None:
                await closer()

    async def __aenter__(self) -> FallbackModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def moves_on(self, error: BaseException) -> bool:
        """Whether ``error`` moves a request on to the next model (``provider_bug`` stands
        for an exception that is not a ProviderError)."""
        if isinstance(error, ProviderError):
            return error.kind != "cancelled" and self._falls_back(error)
        bug = ProviderError("provider_bug", f"{type(error).__name__}: {error}")
        return isinstance(error, Exception) and self._falls_back(bug)

    async def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        last = len(self.models) - 1
        for position, provider in enumerate(self.models):
            ask = request if position == 0 else request.model_copy(update={"model": ""})
            failure: BaseException | None = None
            stream = provider.stream(ask, cancel=cancel)
            try:
                async for event in stream:
                    yield event
                self.last_provider = provider
                return
            except Exception as exc:
                stopped = cancel is not None and cancel.immediate
                if position == last or stopped or not self.moves_on(exc):
                    raise
                failure = exc
            finally:
                closer = getattr(stream, "aclose", None)
                if closer is not None:
                    await closer()
            yield self._fallback(provider, ask, self.models[position + 1], failure)

    def _fallback(
        self, failed: Provider, request: ModelRequest, upcoming: Provider, error: BaseException
    ) -> StreamFallback:
        from_provider, from_model = _label(failed, request.model)
        to_provider, to_model = _label(upcoming)
        if isinstance(error, ProviderError):
            kind: ErrorKind = error.kind
            status, message = error.status_code, error.message
        else:
            kind, status, message = "provider_bug", None, f"{type(error).__name__}: {error}"
        return StreamFallback(
            from_provider=from_provider,
            from_model=from_model,
            to_provider=to_provider,
            to_model=to_model,
            error_kind=kind,
            status_code=status,
            message=message,
            after_tool_call=self.after_tool_call,
        )


def _provider(value: Provider | str) -> Provider:
    if isinstance(value, str):
        from .registry import get_provider

        return get_provider(value)
    if not callable(getattr(value, "stream", None)):
        raise UsageError(
            f"FallbackModel takes providers or model strings, not {type(value).__name__}"
        )
    return value
