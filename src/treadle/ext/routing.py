"""Request-shape optimisations: a cheap model for short tool-free turns, and the 1-hour
Anthropic prompt-cache tier for requests large enough to be worth caching.

Each routed request sends a :class:`~treadle.types.CustomEvent` named :data:`ROUTE_EVENT` on the
run's stream (before that answer's ``message_start``) with the shape the router saw and
where it went: ``{"route", "model", "tools", "tokens", "tool_history",
"response_format"}``.

::

    provider = ShapeRouter(get_provider("anthropic:claude-sonnet-4-5"),
                           cheap=get_provider("anthropic:claude-haiku-4-5"))
    agent = Agent(provider, hooks=[LongCache()])
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..cancellation import CancellationToken
from ..loop import Hooks, RunHandle, emit_custom_event
from ..providers import ModelRequest, Provider, StreamEvent
from ..types import AssistantMessage

__all__ = ["ROUTE_EVENT", "LongCache", "RequestShape", "ShapeRouter", "estimate_request_tokens"]

ROUTE_EVENT = "treadle.ext.route"
"""The name of the :class:`~treadle.types.CustomEvent` a :class:`ShapeRouter` sends per request."""


def estimate_request_tokens(request: ModelRequest) -> int:
    """A quick estimate of a request's input tokens: about four characters per token."""
    return _SizeCache().estimate(request)


class _SizeCache:
    """:func:`estimate_request_tokens` for a stream of requests: the size of each message and
    tool (the same objects request after request, as the history grows) is measured once
    and kept while the next request still holds it — identity-checked, so a new object is
    always measured."""

    def __init__(self) -> None:
        self._sizes: dict[int, tuple[Any, int]] = {}

    def _size(self, item: Any, fresh: dict[int, tuple[Any, int]], measure: Any) -> int:
        known = self._sizes.get(id(item))
        size = known[1] if known is not None and known[0] is item else measure(item)
        fresh[id(item)] = (item, size)
        return size

    def estimate(self, request: ModelRequest) -> int:
        fresh: dict[int, tuple[Any, int]] = {}
        chars = len(request.system_prompt or "")
        for message in request.messages:
            chars += self._size(message, fresh, _message_chars)
        for spec in request.tools:
            chars += self._size(spec, fresh, _tool_chars)
        self._sizes = fresh
        return chars // 4


def _message_chars(message: Any) -> int:
    return len(message.model_dump_json(exclude={"usage", "timestamp"}))


def _tool_chars(spec: Any) -> int:
    return len(spec.name) + len(spec.description) + len(json.dumps(spec.parameters))


@dataclass(frozen=True)
class RequestShape:
    """What :class:`ShapeRouter` looks at: the number of tools offered, the estimated input
    tokens (:func:`estimate_request_tokens`), whether the history has tool calls or
    results, and whether a response format is asked for."""

    tools: int
    tokens: int
    tool_history: bool
    response_format: bool


class LongCache(Hooks):
    """A hook that asks for the long (1-hour) prompt-cache tier once a request's estimate
    reaches ``min_tokens`` (1,024: Anthropic's smallest cacheable prefix). Providers other
    than Anthropic ignore the tier; a request with caching ``"off"`` is left alone."""

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        if request.prompt_cache == "off" or estimate_request_tokens(request) < self.min_tokens:
            return request
        return request.model_copy(update={"prompt_cache": "long"})


class ShapeRouter:
    """A :class:`~treadle.Provider` that sends a request to ``cheap`` when it is small and
    tool-free — no tools offered, no tool calls in its history, at most ``max_tokens``
    estimated — and to ``strong`` otherwise. A request sent to ``cheap`` has its ``model``
    cleared, so that provider uses its own. ``last_route`` says where the last request went
    and ``last_shape`` what it looked like; during a run each request also sends a
    :data:`ROUTE_EVENT` custom event with both and the chosen model."""

    def __init__(self, strong: Provider, *, cheap: Provider, max_tokens: int = 2000) -> None:
        self.strong = strong
        self.cheap = cheap
        self.max_tokens = max_tokens
        self.name: str = strong.name
        self.model: str = str(getattr(strong, "model", "") or "")
        self.base_url: Any = getattr(strong, "base_url", None)
        self.last_route: Literal["cheap", "strong"] | None = None
        self.last_shape: RequestShape | None = None
        self._sizes = _SizeCache()  # a growing history is measured once per message

    def shape(self, request: ModelRequest) -> RequestShape:
        """What the router looks at in a request."""
        return RequestShape(
            tools=len(request.tools),
            tokens=self._sizes.estimate(request),
            tool_history=any(m.role == "tool_result" for m in request.messages)
            or any(isinstance(m, AssistantMessage) and m.tool_calls for m in request.messages),
            response_format=request.response_format is not None,
        )

    def route(self, request: ModelRequest) -> Literal["cheap", "strong"]:
        """Where a request goes (see the class)."""
        return self._route(self.shape(request))

    def _route(self, shape: RequestShape) -> Literal["cheap", "strong"]:
        if shape.tools or shape.response_format or shape.tool_history:
            return "strong"
        return "cheap" if shape.tokens <= self.max_tokens else "strong"

    async def aclose(self) -> None:
        for provider in (self.strong, self.cheap):
            closer = getattr(provider, "aclose", None)
            if closer is not None:
                await closer()

    async def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        shape = self.shape(request)
        self.last_route = self._route(shape)
        target = self.strong
        model = request.model or self.model
        if self.last_route == "cheap":
            target, request = self.cheap, request.model_copy(update={"model": ""})
            model = str(getattr(self.cheap, "model", "") or "")
        self.last_shape = shape
        await emit_custom_event(
            ROUTE_EVENT, {"route": self.last_route, "model": model, **asdict(shape)}
        )
        async for event in target.stream(request, cancel=cancel):
            yield event
