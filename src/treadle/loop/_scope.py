"""What every part of one run shares, and the few things they all do with it.

:class:`RunScope` is made once per run by the turns (``_turns.Run``) and handed to the
parts that work for them: the tool batch, the eager calls, the context guard. It holds
references that never change during the run (the context, config, hooks, event sink,
cancel bridge, the run's handle, its tool table) and the history writes every part makes
the same way. The state of the turns (usage, the open turn, what waits for the next one)
is not here: it belongs to the run, and parts return what they produce.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from .._signals import HookFailed
from ..cancellation import CancelBridge
from ..context.transcript import repair_transcript
from ..errors import UsageError
from ..providers.base import ModelRequest
from ..types import (
    AgentMessage,
    AssistantMessage,
    ExtensionMessage,
    MessageEnd,
    MessageStart,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ..types._base import replaced, trusted
from ._dispatch import HookDispatch, hook_name
from ._tool_table import ToolTable
from .config import AgentLoopConfig, Pass, Reject, RunHandle, Warn
from .context import AgentContext
from .settings import settings_of
from .sink import EventSink

_REQUEST_FIELDS = frozenset(ModelRequest.model_fields)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def dict_prompt_error(value: Mapping[Any, Any]) -> UsageError:
    """The error for a dict given where a prompt or a message goes (the OpenAI message
    shape, ``{"role": "user", "content": "hi"}``): iterating it would send its keys."""
    content = value.get("content")
    if isinstance(content, str):
        shown = content if len(content) <= 40 else content[:37] + "..."
        example = f"UserMessage.of({shown!r})"
        if value.get("role") == "assistant":
            example = f"AssistantMessage(content={shown!r})"
    else:
        example = "UserMessage.of('hi')"
    return UsageError(
        "a dict is not a prompt or a message: treadle takes a str (one user message), a "
        f"message or a list of them. Pass the text itself, or build the message: {example} "
        "(see treadle.types for the message classes)."
    )


def as_message(item: Any) -> AgentMessage:
    if isinstance(item, str):
        return UserMessage.of(item)
    if isinstance(item, (UserMessage, AssistantMessage, ToolResultMessage, ExtensionMessage)):
        return item
    if isinstance(item, Mapping):
        raise dict_prompt_error(item)
    raise UsageError(
        f"expected a message (UserMessage, ...) or a str, got {type(item).__name__}; "
        "build user input with UserMessage.of('text')"
    )


def unique_call_ids(message: AssistantMessage) -> None:
    """One reply's tool calls get distinct ids, so no call runs twice and every result
    matches one call: an exact repeat (same id, name and arguments, as a glitching stream
    can send) is dropped; a different call reusing an id gets a suffixed id."""
    calls = [b for b in message.content if isinstance(b, ToolCall)]
    if len({c.id for c in calls}) == len(calls):
        return
    seen: dict[str, ToolCall] = {}
    content: list[Any] = []
    for block in message.content:
        if isinstance(block, ToolCall):
            first = seen.get(block.id)
            if first is not None:
                if (first.name, first.arguments, first.raw_arguments) == (
                    block.name,
                    block.arguments,
                    block.raw_arguments,
                ):
                    continue
                n = 2
                while f"{block.id}_{n}" in seen:
                    n += 1
                block = block.model_copy(update={"id": f"{block.id}_{n}"})
            seen[block.id] = block
        content.append(block)
    message.content = content


class RunScope:
    """What the parts of one run share: ``context``, ``config``, ``hooks`` (the config's
    dispatch), ``sink``, ``bridge`` (cancellation), ``handle`` (the run as hooks see it),
    ``tools`` (the run's :class:`ToolTable`) and ``new_messages`` (the messages this run
    added, in order)."""

    __slots__ = ("bridge", "config", "context", "handle", "hooks", "new_messages", "sink", "tools")

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        hooks: HookDispatch,
        sink: EventSink,
        bridge: CancelBridge,
        handle: RunHandle,
        new_messages: list[AgentMessage],
    ) -> None:
        self.context = context
        self.config = config
        self.hooks = hooks
        self.sink = sink
        self.bridge = bridge
        self.handle = handle
        self.new_messages = new_messages
        self.tools = ToolTable()

    # ---- small helpers ----

    async def call_hook(self, fn: Any, *args: Any) -> Any:
        try:
            return await _maybe_await(fn(*args))
        except Exception as exc:
            raise HookFailed(hook_name(fn), exc) from exc

    async def record(self, message: AgentMessage) -> None:
        """Add to the history; ``on_message`` hooks run before its message_end is sent."""
        self.context.messages.append(message)
        self.new_messages.append(message)
        failure: HookFailed | None = None
        for fn in self.hooks.on_message:  # every hook sees it, whatever one does
            try:
                await self.call_hook(fn, self.handle, message)
            except HookFailed as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    async def append(self, message: AgentMessage) -> None:
        """Add to the history and report it as a message_start/end pair (the pair closes
        even when an ``on_message`` hook fails: the message is in the history by then)."""
        await self.sink.emit(MessageStart, message=message)
        try:
            await self.record(message)
        finally:
            await self.sink.emit(MessageEnd, message=message)

    async def filter_input(
        self, messages: list[AgentMessage], skip: frozenset[int] = frozenset()
    ) -> Reject | None:
        """Run input filters over the user text of ``messages`` (those whose id is not in
        ``skip``); the first Reject wins. Warnings go on a copy of the last user message,
        which takes its place in ``messages``: nothing the caller passed is edited."""
        users = [
            (i, m)
            for i, m in enumerate(messages)
            if isinstance(m, UserMessage) and id(m) not in skip
        ]
        if not self.config.input_filters or not users:
            return None
        text = "\n".join(m.text for _, m in users)
        warnings: list[str] = []
        for input_filter in self.config.input_filters:
            verdict = await self.call_hook(input_filter.filter, text)
            if isinstance(verdict, Reject):
                return verdict
            if isinstance(verdict, Warn):
                warnings.append(verdict.message)
            elif not isinstance(verdict, Pass):
                raise HookFailed(
                    f"{type(input_filter).__name__}.filter",
                    TypeError(f"returned {verdict!r}; return Pass(), Warn(...) or Reject(...)"),
                )
        if warnings:
            index, last = users[-1]
            note = TextContent(text="\n".join(f"[Warning: {w}]" for w in warnings))
            messages[index] = last.model_copy(update={"content": [*last.content, note]})
        return None

    async def poll(self, source: Any) -> list[AgentMessage]:
        """The messages a callback (steering, follow-ups) gives now, checked."""
        if source is None:
            return []
        items = await self.call_hook(source)
        try:
            return [as_message(m) for m in items or ()]
        except TypeError as exc:
            raise HookFailed(getattr(source, "__qualname__", repr(source)), exc) from None

    async def append_all(self, queue: list[AgentMessage]) -> None:
        """Append the messages of ``queue`` in order, each taken off it once it is in the
        history: every one joins even when an ``on_message`` hook fails (the first failure
        is raised after the last), and an interruption leaves the rest in ``queue``."""
        failure: HookFailed | None = None
        while queue:
            message = queue[0]
            try:
                await self.append(message)
            except HookFailed as exc:
                failure = failure or exc
            finally:
                if self.new_messages and self.new_messages[-1] is message:
                    queue.pop(0)
        if failure is not None:
            raise failure

    # ---- requests ----

    async def request_messages(self) -> list[AgentMessage]:
        """The history as a request carries it: transformed, converted, repaired."""
        messages: list[AgentMessage] = self.context.messages
        config = self.config
        if config.transform_context is None and config.convert_to_llm is None:
            return self.context.request_history()
        for name in ("transform_context", "convert_to_llm"):
            fn = getattr(config, name)
            if fn is not None:
                returned = await self.call_hook(fn, list(messages))
                if not isinstance(returned, (list, tuple)):
                    raise HookFailed(
                        name, TypeError(f"returned {type(returned).__name__}; return a list")
                    )
                messages = list(returned)
        messages = [m for m in messages if not isinstance(m, ExtensionMessage)]
        return repair_transcript(messages)

    async def build_request(
        self, *, with_tools: bool = True, instruction: str | None = None
    ) -> ModelRequest:
        config = self.config
        messages = await self.request_messages()
        system = await self.call_hook(self.context.resolve_system_prompt)
        if instruction:
            system = f"{system}\n\n{instruction}" if system else instruction
        values = settings_of(config)  # and the fields below: every field, all valid
        values["model"] = config.model_name
        values["system_prompt"] = system
        values["messages"] = messages
        values["tools"] = list(self.tools.specs) if with_tools else []
        values["tool_choice"] = config.tool_choice if with_tools else None
        values["response_format"] = config.response_format
        values["purpose"] = "turn"
        values["coalesce_deltas"] = config.coalesce_deltas
        request = trusted(ModelRequest, values, set(_REQUEST_FIELDS))  # every field (a test)
        for fn in self.hooks.before_model_request:
            edited = await self.call_hook(fn, self.handle, request)
            if isinstance(edited, ModelRequest):
                request = edited
        if isinstance(request.stop, str):  # a hook's model_copy is not validated
            request = replaced(request, "stop", [request.stop])
        return request
