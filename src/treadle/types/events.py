"""Events: everything the loop reports, in the order the contract (docs/contract.md §2) gives.

Every event carries ``seq`` (strictly increasing on the stream it was sent to), ``loop_id``,
``depth`` (0 for a top-level loop) and ``timestamp``; the loop's event sink stamps them.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import (
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from ._base import Model
from .content import TextContent, ToolCall, UserContent
from .messages import (
    AgentMessage,
    AssistantMessage,
    ToolResultMessage,
    joined_text,
    marked_if_cancelled,
)
from .usage import ErrorInfo, Usage


class ContinuationKind(str, Enum):
    """How a loop relates to the history it continues."""

    INITIAL = "initial"
    """A fresh run from new prompts (``agent_loop``)."""
    DEFAULT = "default"
    """Carrying on an existing history (``agent_loop_continue``)."""
    RERUN = "rerun"
    """Trying the last turn again, for example after an error."""
    BRANCH = "branch"
    """A new line of conversation from a point in an old one."""
    COMPACTION = "compaction"
    """Continuing after the history was compacted."""


class TurnTrigger(str, Enum):
    """What started a turn."""

    USER = "user"
    SUB_AGENT = "sub_agent"
    CONTINUATION = "continuation"
    BRANCH = "branch"


AgentEndReason = Literal[
    "completed", "rejected", "vetoed", "cancelled", "error", "limit", "suspended"
]


class ToolResult(Model):
    """What a tool returns: content for the model, ``details`` for the application.

    ``terminate=True`` ends the run after the current batch of tool calls.
    """

    content: list[UserContent] = Field(default_factory=list)
    details: Any = None
    is_error: bool = False
    terminate: bool = False
    cancelled: bool = False
    """Set by the loop on a call that did not run to its end because the run was cancelled
    (``is_error`` too); the result message carries it on (``ToolResultMessage.cancelled``)."""

    _legacy = model_validator(mode="before")(marked_if_cancelled)

    @classmethod
    def of(cls, text: str, *, is_error: bool = False, details: Any = None) -> ToolResult:
        return cls(content=[TextContent(text=text)], is_error=is_error, details=details)

    @classmethod
    def error(cls, text: str, *, details: Any = None) -> ToolResult:
        return cls(content=[TextContent(text=text)], is_error=True, details=details)

    @property
    def text(self) -> str:
        return joined_text(self.content)


# ---- deltas (the ``delta`` of a message_update; also what providers stream) ----


class TextDelta(Model):
    type: Literal["text"] = "text"
    index: int
    text: str


class ThinkingDelta(Model):
    type: Literal["thinking"] = "thinking"
    index: int
    text: str


class ToolCallStart(Model):
    type: Literal["tool_call_start"] = "tool_call_start"
    index: int
    id: str
    name: str


class ToolCallDelta(Model):
    type: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    arguments: str


class ToolCallEnd(Model):
    type: Literal["tool_call_end"] = "tool_call_end"
    index: int
    tool_call: ToolCall


Delta = Annotated[
    Union[TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta, ToolCallEnd],
    Field(discriminator="type"),
]


# ---- events ----


class _Event(Model):
    seq: int = 0
    loop_id: str = ""
    depth: int = 0
    timestamp: int = 0


class AgentStart(_Event):
    type: Literal["agent_start"] = "agent_start"
    agent_id: str
    session_id: str
    parent_loop_id: str | None = None
    parent_tool_call_id: str | None = None
    """For a sub-agent: the parent's tool call that started this loop."""
    continuation_kind: ContinuationKind = ContinuationKind.INITIAL
    config: dict[str, Any] = Field(default_factory=dict)


class AgentEnd(_Event):
    type: Literal["agent_end"] = "agent_end"
    messages: list[AgentMessage] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    reason: AgentEndReason = "completed"
    error: ErrorInfo | None = None
    pending_tool_calls: list[str] = Field(default_factory=list)


class TurnStart(_Event):
    type: Literal["turn_start"] = "turn_start"
    turn_index: int
    trigger: TurnTrigger = TurnTrigger.USER


class TurnEnd(_Event):
    type: Literal["turn_end"] = "turn_end"
    turn_index: int
    message: AssistantMessage
    tool_results: list[ToolResultMessage] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)


class MessageStart(_Event):
    type: Literal["message_start"] = "message_start"
    message: AgentMessage


class MessageUpdate(_Event):
    """One streamed delta, with the partial assistant message as it stood after it.

    ``message`` is a snapshot: it never changes once the event exists, however far the
    stream has moved on. The loop builds it on first use (``event.message``, a dump, a copy,
    a comparison), so a consumer that reads only ``delta`` never pays for a message per
    delta; what it returns is the same either way.

    An update the loop sent that nobody has looked at yet may take in the next deltas of its
    block (``coalesce_deltas``, contract §2): its ``delta`` and ``message`` are fixed the
    first time either is read, or the event is dumped, copied or compared, and never change
    after that. So every reader sees one unchanging event, and each delta is in exactly one.
    """

    type: Literal["message_update"] = "message_update"
    message: AssistantMessage
    delta: Delta
    _snapshot: Any = PrivateAttr(default=None)  # builds `message` when it is first read
    _delta: Any = PrivateAttr(default=None)  # the first delta, while `delta` is not fixed
    _parts: Any = PrivateAttr(default=None)  # the text of the deltas it took in, if any

    def _fix_delta(self) -> None:
        """Fix ``delta`` (once; later calls do nothing): no delta joins it after this."""
        values = self.__dict__
        if "delta" in values:
            return
        private = self.__pydantic_private__
        first = private.get("_delta") if private else None
        if private is None or first is None:
            raise AttributeError("delta")
        parts = private["_parts"]
        if parts is not None:
            key = "arguments" if first.type == "tool_call_delta" else "text"
            first = first.model_copy(update={key: "".join(parts)})
            private["_parts"] = None
        values["delta"] = first
        private["_delta"] = None

    def _built(self) -> None:
        """Fix ``delta`` and put the snapshot's message into the fields (once)."""
        self._fix_delta()
        values = self.__dict__
        if "message" not in values:
            private = self.__pydantic_private__
            snapshot = private.get("_snapshot") if private else None
            if private is None or snapshot is None:
                raise AttributeError("message")
            message = snapshot.build()
            delta = values.pop("delta")  # in field order, as validation would have put it
            values["message"] = message
            values["delta"] = delta
            private["_snapshot"] = None  # built: the event is now like any other

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            if name == "delta":
                self._fix_delta()
                return self.__dict__["delta"]
            if name == "message":
                self._built()
                return self.__dict__["message"]
            return super().__getattr__(name)

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        # No return annotation: pydantic then keeps the fields' serialization schema.
        self._built()
        return handler(self)

    def __eq__(self, other: object) -> bool:
        self._built()
        if isinstance(other, MessageUpdate):
            other._built()
        return super().__eq__(other)

    def __repr_args__(self) -> Any:
        self._built()
        return super().__repr_args__()

    def __iter__(self) -> Any:
        self._built()
        return super().__iter__()

    def __copy__(self) -> Any:
        self._built()
        return super().__copy__()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Any:
        self._built()
        return super().__deepcopy__(memo)

    def __getstate__(self) -> dict[Any, Any]:
        self._built()
        return super().__getstate__()


class MessageEnd(_Event):
    type: Literal["message_end"] = "message_end"
    message: AgentMessage


class ToolExecutionStart(_Event):
    """A tool call starts. ``tool_category``: the tool's ``category`` (a
    :class:`~treadle.tools.ToolCategory` value: ``"mcp"`` for a tool behind an MCP server),
    ``None`` when no tool has the call's name."""

    type: Literal["tool_execution_start"] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)
    tool_category: str | None = None


class ToolExecutionUpdate(_Event):
    type: Literal["tool_execution_update"] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    partial: ToolResult


class ToolExecutionEnd(_Event):
    """A tool call ends. ``error_type``: the class name of the exception the tool raised
    (its ``result`` then reads ``"Type: message"``), ``None`` when it did not raise or an
    ``after_tool_call`` hook turned the error into a success — so an observer can report
    the failure's kind without its text (see :mod:`treadle.otel`)."""

    type: Literal["tool_execution_end"] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: ToolResult
    is_error: bool = False
    duration_ms: float = 0.0
    child_loop_id: str | None = None
    error_type: str | None = None


class InputRejected(_Event):
    type: Literal["input_rejected"] = "input_rejected"
    reason: str


class CompactionStart(_Event):
    """The history is about to be compacted. ``reason``: ``threshold`` (the estimate passed
    the policy's trigger), ``overflow`` (the provider said the request was too long) or
    ``manual``."""

    type: Literal["compaction_start"] = "compaction_start"
    tokens_before: int
    messages_before: int
    reason: str = "threshold"


class CompactionEnd(_Event):
    """The history was compacted (``context.messages`` replaced). ``strategy``: the
    strategies that changed something, joined with ``+`` (empty: nothing changed);
    ``summary``: the summary text, when one was written; ``usage``: what the summary calls
    cost (also counted in the turn's usage)."""

    type: Literal["compaction_end"] = "compaction_end"
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    strategy: str = ""
    reason: str = "threshold"
    summary: str | None = None
    usage: Usage = Field(default_factory=Usage)


class ProviderRetry(_Event):
    type: Literal["provider_retry"] = "provider_retry"
    attempt: int
    max_retries: int
    delay_s: float
    error_kind: str
    status_code: int | None = None
    message: str = ""
    discard_partial: bool = False


class ProviderFallback(_Event):
    """A :class:`~treadle.providers.FallbackModel` moved from one model to the next after
    the first failed with ``error_kind`` (a kind it falls back on). ``discard_partial``: a
    partial answer was shown; drop it, a fresh ``message_start`` follows (as after a
    ``provider_retry``). False: nothing was shown yet; the next ``message_start`` is the
    first. Usage and cost are the answering model's, on its message."""

    type: Literal["provider_fallback"] = "provider_fallback"
    from_provider: str
    from_model: str
    to_provider: str
    to_model: str
    error_kind: str
    status_code: int | None = None
    message: str = ""
    discard_partial: bool = False


class PlanCreated(_Event):
    """An agent's planning phase produced a plan (added to the history as an assistant message)."""

    type: Literal["plan_created"] = "plan_created"
    plan: str
    steps: list[str] = Field(default_factory=list)


class CustomEvent(_Event):
    """An event of an extension or an app, not of the loop itself: ``name`` says what it
    is (for example ``"treadle.ext.summary"``), ``value`` is any JSON. ``before_end`` hooks
    send them between the last ``turn_end`` and ``agent_end`` (``RunEnding.emit``); hooks,
    tools and providers send them during the run with
    :func:`treadle.loop.emit_custom_event`, at the moment they call it (a provider that
    sends one before it streams: just before that answer's ``message_start``)."""

    type: Literal["custom"] = "custom"
    name: str
    value: Any = None


AgentEvent = Annotated[
    Union[
        AgentStart,
        AgentEnd,
        TurnStart,
        TurnEnd,
        MessageStart,
        MessageUpdate,
        MessageEnd,
        ToolExecutionStart,
        ToolExecutionUpdate,
        ToolExecutionEnd,
        InputRejected,
        CompactionStart,
        CompactionEnd,
        ProviderRetry,
        ProviderFallback,
        PlanCreated,
        CustomEvent,
    ],
    Field(discriminator="type"),
]
"""Any event the loop emits."""
