"""The state of one loop call, and the helpers every part of the loop uses on it.

:class:`RunState` is internal: ``run.py`` drives the turns, ``compaction.py`` (context
size, prices) and ``tool_exec.py`` (tool calls) work on the same state, and all of them
import it from here, so imports run one way: run -> compaction, tool_exec -> state.
Everything reported is tracked here, so any way out of a run can close what is open.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import anyio
from anyio.abc import ObjectSendStream

from .._signals import HookFailed
from ..cancellation import CancelBridge, CancellationToken
from ..context.transcript import repair_transcript
from ..errors import ConfigurationError, UsageError
from ..providers.base import ModelRequest
from ..tools import Tool, Toolset, ToolTraits, as_tool, tool_spec, traits_of
from ..types import (
    AgentEvent,
    AgentMessage,
    AssistantMessage,
    CustomEvent,
    ExtensionMessage,
    MessageEnd,
    MessageStart,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from ..types._base import replaced, trusted
from ._dispatch import HookFn, hook_dispatch, hook_name
from ._streaming import StreamState
from .config import AgentLoopConfig, Pass, Reject, RunHandle, Warn
from .context import AgentContext
from .settings import settings_of
from .sink import EventSink, Observer

_REQUEST_FIELDS = frozenset(ModelRequest.model_fields)

EventStream = ObjectSendStream[AgentEvent]


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


def _as_message(item: Any) -> AgentMessage:
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


def _unique_call_ids(message: AssistantMessage) -> None:
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


_TOOLSET_TYPES: dict[type, bool] = {}
_TOOLSET_TYPES_KEPT = 256


def _is_toolset(cls: type) -> bool:
    """Whether objects of ``cls`` may be toolsets (a ``get_tools`` method); cached, since a
    protocol ``isinstance`` check costs microseconds and runs for every tool every turn. The
    cache is bounded (emptied when full): classes made on the fly, one per run, cannot grow
    it without end."""
    found = _TOOLSET_TYPES.get(cls)
    if found is None:
        if len(_TOOLSET_TYPES) >= _TOOLSET_TYPES_KEPT:
            _TOOLSET_TYPES.clear()
        found = _TOOLSET_TYPES[cls] = callable(getattr(cls, "get_tools", None))
    return found


def _no_price(message: AssistantMessage) -> None:
    return None


def _nested(outer: tuple[HookFn, ...], own: tuple[HookFn, ...]) -> tuple[HookFn, ...]:
    """The ``on_event`` methods a run calls: those of the runs it is nested in (a
    sub-agent's parents) first, then its own; a hook in both is called once."""
    if not outer:
        return own
    found = list(outer)
    found.extend(fn for fn in own if fn not in found)
    return tuple(found)


class RunState:
    """State of one loop call: the context and config, the event sink, the cancel bridge,
    the open turn, usage, and the tools by name."""

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        events: EventStream | None,
        cancel: CancellationToken | None,
        new_messages: list[AgentMessage],
        parent: RunHandle | None = None,
    ) -> None:
        self.context = context
        self.config = config
        self.new_messages = new_messages
        self.hooks = hooks = hook_dispatch(config)
        # a sub-agent's observers: its parents' (through the parent's handle), then its own
        watching = _nested(parent._observers if parent is not None else (), hooks.on_event)
        self.handle = handle = RunHandle(self, parent, watching)
        self.observers: tuple[Observer, ...] = tuple(partial(fn, handle) for fn in watching)
        self.reporting = False  # custom events may be sent (between agent_start and agent_end)
        self.sink = EventSink(
            events,
            context.loop_id or "",
            context.depth,
            self.observers,
            merge=config.slow_consumer == "merge",
            max_bytes=config.slow_consumer_max_bytes,
            coalesce=config.coalesce_deltas,
        )
        self.bridge = CancelBridge(cancel)
        self.sink.own_cancel = lambda: self.bridge.immediate
        self.usage = Usage()
        self.turn_index = 0
        self.turn_open = False
        self.turn_message: AssistantMessage | None = None
        self.turn_results: list[ToolResultMessage] = []
        self.turn_usage = Usage()
        self.stream_state: StreamState | None = None
        self.tool_calls_run = 0
        self.started_at = anyio.current_time()  # the event loop's clock (mockable)
        self.inject: list[AgentMessage] = []  # user input taken for the next turn
        self.prompt_ids: set[int] = set()  # the run's prompts among them (not taken yet)
        self.due: list[AgentMessage] = []  # tool results decided, not yet in the history
        self.tools: dict[str, Tool] = {}
        self.traits: dict[str, ToolTraits] = {}  # each tool's, read when the tools resolve
        self.tool_specs: list[ToolSpec] = []
        self.end_sent = False
        self.before_end_ran = False
        self._tools_key: tuple[int, ...] = ()
        self.price: Callable[[AssistantMessage], None] = _no_price
        """Fills a reply's cost (the loop sets it to the context guard's)."""

    # ---- small helpers ----

    async def emit_custom(self, name: str, value: Any) -> CustomEvent | None:
        """``RunHandle.emit``: a custom event, while the run reports (None otherwise)."""
        if not self.reporting:
            return None
        event: CustomEvent | None = await self.sink.emit(CustomEvent, name=name, value=value)
        return event

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

    async def record_reply(self, message: AssistantMessage) -> None:
        """The model's answer for this turn: priced, counted in the turn's usage, recorded.
        (Assistant messages given as prompts are history, not this run's spending.)"""
        self.price(message)
        _unique_call_ids(message)
        self.turn_message = message
        self.turn_usage = self.turn_usage + message.usage
        await self.record(message)

    async def append(self, message: AgentMessage) -> None:
        """Add to the history and report it as a message_start/end pair (the pair closes
        even when an ``on_message`` hook fails: the message is in the history by then)."""
        await self.sink.emit(MessageStart, message=message)
        try:
            await self.record(message)
        finally:
            await self.sink.emit(MessageEnd, message=message)

    async def refresh_tools(self) -> None:
        """The tools by name, toolsets expanded; recomputed only when they changed."""
        items: list[Any] = []
        for item in self.context.tools:
            if _is_toolset(type(item)) and isinstance(item, Toolset) and not isinstance(item, Tool):
                listed = await self.call_hook(item.get_tools)
                items.extend(listed)
            else:
                items.append(item)
        key = tuple(id(t) for t in items)
        if key == self._tools_key:
            return
        tools: dict[str, Tool] = {}
        traits: dict[str, ToolTraits] = {}
        try:
            for item in items:
                found = as_tool(item)
                if found.name in tools:
                    first = traits[found.name].source or "a tool"
                    second = traits_of(found).source or "a tool"
                    raise ConfigurationError(
                        f"two tools are named {found.name!r} ({first} and {second}); names "
                        "must be unique: rename one, or give an MCP server another prefix"
                    )
                tools[found.name] = found
                traits[found.name] = traits_of(found)  # read once per tool, here
        except (TypeError, ValueError) as exc:
            raise HookFailed("AgentContext.tools", exc) from None
        self.tools, self.traits = tools, traits
        self.tool_specs = [tool_spec(t) for t in tools.values()]
        self._tools_key = key

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

    async def _poll(self, source: Any) -> list[AgentMessage]:
        if source is None:
            return []
        items = await self.call_hook(source)
        try:
            return [_as_message(m) for m in items or ()]
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

    async def flush_inject(self) -> None:
        """User messages waiting for a turn that will not come join the history anyway
        (as message pairs outside a turn): the run ending early must not lose them."""
        await self.append_all(self.inject)

    async def poll_steering(self) -> bool:
        """Collect steering messages for the next turn; True when any arrived."""
        got = await self._poll(self.config.get_steering_messages)
        self.inject.extend(got)
        return bool(got)

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
        values["tools"] = list(self.tool_specs) if with_tools else []
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
