"""A workflow gate: a provider wrapper that shows each new user input to an interceptor
first. The interceptor may answer it itself (a canned reply, a workflow it ran) — the run
then has its usual events and ``agent_end``, and the model is never called — or decline by
returning None.

::

    async def gate(text: str) -> str | None:
        if text.startswith("/deploy"):
            return await run_deploy_workflow(text)
        return None

    agent = Agent(WorkflowGate(get_provider("openai:gpt-4o-mini"), gate))

The gate decides at the first model request of the turn the input arrives in (it is a
provider), not before the loop: ``agent_start``, ``turn_start``, the input's message pair,
input filters and the request hooks (recall, skills, style) come first; docs/ext.md says
exactly what a run answered by the gate looks like.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Union

from ..cancellation import CancellationToken
from ..errors import UsageError
from ..providers import (
    ModelRequest,
    Provider,
    StreamDone,
    StreamEvent,
    StreamStart,
    TextEnd,
    TextStart,
)
from ..types import (
    AssistantMessage,
    TextContent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserMessage,
)

__all__ = ["Interceptor", "WorkflowGate"]

Answer = Union[str, AssistantMessage, None]
Interceptor = Callable[[str], Union[Answer, Awaitable[Answer]]]


class WorkflowGate:
    """A :class:`~treadle.Provider` wrapping ``provider``. When a request ends with a user
    message (new input: a prompt, steering or a follow-up), ``interceptor(text)`` (sync or
    async) runs first; a string or an :class:`~treadle.AssistantMessage` it returns is
    streamed as the model's answer (zero usage, model ``"workflow"``), and None passes the
    request on to ``provider``. Requests after tool results always go to ``provider``.
    ``intercepted`` counts the answers the gate gave."""

    def __init__(self, provider: Provider, interceptor: Interceptor) -> None:
        self.provider = provider
        self.interceptor = interceptor
        self.name: str = provider.name
        self.model: str = str(getattr(provider, "model", "") or "")
        self.base_url: Any = getattr(provider, "base_url", None)
        self.intercepted = 0

    async def aclose(self) -> None:
        closer = getattr(self.provider, "aclose", None)
        if closer is not None:
            await closer()

    async def _answer(self, request: ModelRequest) -> AssistantMessage | None:
        last = request.messages[-1] if request.messages else None
        if not isinstance(last, UserMessage):
            return None
        answer = self.interceptor(last.text)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is None:
            return None
        if isinstance(answer, str):
            answer = AssistantMessage(content=[TextContent(text=answer)])
        if not isinstance(answer, AssistantMessage):
            raise UsageError(f"the interceptor returned {type(answer).__name__}")
        stop = "tool_use" if answer.tool_calls else answer.stop_reason
        return answer.model_copy(
            update={
                "provider": self.name,
                "model": "workflow",
                "usage": Usage(),
                "stop_reason": stop,
            }
        )

    async def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        message = await self._answer(request)
        if message is None:
            async for event in self.provider.stream(request, cancel=cancel):
                yield event
            return
        self.intercepted += 1
        yield StreamStart(model=message.model)
        for index, block in enumerate(message.content):
            if isinstance(block, TextContent):
                yield TextStart(index=index)
                yield TextDelta(index=index, text=block.text)
                yield TextEnd(index=index)
            elif isinstance(block, ToolCall):
                yield ToolCallStart(index=index, id=block.id, name=block.name)
                yield ToolCallDelta(index=index, arguments=json.dumps(block.arguments))
                yield ToolCallEnd(index=index, tool_call=block)
        yield StreamDone(message=message)
