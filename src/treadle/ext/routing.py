"""Request-shape optimisations: a cheap model for short tool-free turns, and the 1-hour
Anthropic prompt-cache tier for requests large enough to be worth caching.

::

    provider = ShapeRouter(get_provider("anthropic:claude-sonnet-4-5"),
                           cheap=get_provider("anthropic:claude-haiku-4-5"))
    agent = Agent(provider, hooks=[LongCache()])
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from ..cancellation import CancellationToken
from ..loop import Hooks
from ..providers import ModelRequest, Provider, StreamEvent
from ..types import AssistantMessage

__all__ = ["LongCache", "ShapeRouter", "estimate_request_tokens"]


def estimate_request_tokens(request: ModelRequest) -> int:
    """A quick estimate of a request's input tokens: about four characters per token."""
    chars = len(request.system_prompt or "")
    chars += sum(len(m.model_dump_json(exclude={"usage", "timestamp"})) for m in request.messages)
    chars += sum(
        len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in request.tools
    )
    return chars // 4


class LongCache(Hooks):
    """A hook that asks for the long (1-hour) prompt-cache tier once a request's estimate
    reaches ``min_tokens`` (1,024: Anthropic's smallest cacheable prefix). Providers other
    than Anthropic ignore the tier; a request with caching ``"off"`` is left alone."""

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens

    async def before_model_request(self, request: ModelRequest) -> ModelRequest:
        if request.prompt_cache == "off" or estimate_request_tokens(request) < self.min_tokens:
            return request
        return request.model_copy(update={"prompt_cache": "long"})


class ShapeRouter:
    """A :class:`~treadle.Provider` that sends a request to ``cheap`` when it is small and
    tool-free — no tools offered, no tool calls in its history, at most ``max_tokens``
    estimated — and to ``strong`` otherwise. A request sent to ``cheap`` has its ``model``
    cleared, so that provider uses its own. ``last_route`` says where the last request went."""

    def __init__(self, strong: Provider, *, cheap: Provider, max_tokens: int = 2000) -> None:
        self.strong = strong
        self.cheap = cheap
        self.max_tokens = max_tokens
        self.name: str = strong.name
        self.model: str = str(getattr(strong, "model", "") or "")
        self.base_url: Any = getattr(strong, "base_url", None)
        self.last_route: Literal["cheap", "strong"] | None = None

    def route(self, request: ModelRequest) -> Literal["cheap", "strong"]:
        if request.tools or request.response_format is not None:
            return "strong"
        if any(m.role == "tool_result" for m in request.messages) or any(
            isinstance(m, AssistantMessage) and m.tool_calls for m in request.messages
        ):
            return "strong"
        return "cheap" if estimate_request_tokens(request) <= self.max_tokens else "strong"

    async def aclose(self) -> None:
        for provider in (self.strong, self.cheap):
            closer = getattr(provider, "aclose", None)
            if closer is not None:
                await closer()

    async def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        self.last_route = self.route(request)
        target = self.strong
        if self.last_route == "cheap":
            target, request = self.cheap, request.model_copy(update={"model": ""})
        async for event in target.stream(request, cancel=cancel):
            yield event
