"""How a loop runs: the config, limits, retries, tool strategies, hooks and input filters."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from .._redact import redact_url
from ..errors import ConfigurationError, UsageError
from ..providers.base import (
    RETRYABLE_KINDS,
    ModelRequest,
    Provider,
    StopSequences,
    ThinkingLevel,
)
from ..types import (
    AgentEndReason,
    AgentEvent,
    AgentMessage,
    AssistantMessage,
    CustomEvent,
    ErrorInfo,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnTrigger,
    Usage,
)
from .context import AgentContext
from .decisions import Allow, Ask, Deny, ToolDecision

# ---- input filters ----


@dataclass(frozen=True, slots=True)
class Pass:
    """The input may go on unchanged."""


@dataclass(frozen=True, slots=True)
class Warn:
    """The input may go on, with a warning appended to the last user message."""

    message: str


@dataclass(frozen=True, slots=True)
class Reject:
    """The input is refused; the run ends with ``input_rejected``."""

    reason: str


FilterResult = Union[Pass, Warn, Reject]


class InputFilter:
    """Checks the text of user input before it joins the history.

    Subclass and override :meth:`filter` (sync or async). Prompts, steering and follow-ups
    are all filtered.
    """

    def filter(self, text: str) -> FilterResult | Awaitable[FilterResult]:
        return Pass()


ApprovalHandler = Callable[[ToolCall, AgentContext, Ask], Awaitable[Union[bool, Allow, Deny]]]


# ---- hooks ----


@dataclass
class RunEnding:
    """What a ``before_end`` hook sees: the run as it ends, just before ``agent_end``.

    ``new_messages`` (the run's messages, a copy), ``usage`` (the loop's), ``reason``,
    ``error`` and ``pending_tool_calls`` are what ``agent_end`` will carry; ``context`` and
    ``config`` are the run's (``config.provider`` is there to call). :meth:`emit` sends a
    :class:`~treadle.types.CustomEvent` on the run's stream, before ``agent_end``.
    """

    context: AgentContext
    config: AgentLoopConfig
    new_messages: list[AgentMessage]
    usage: Usage
    reason: AgentEndReason
    error: ErrorInfo | None
    pending_tool_calls: list[str]
    send: Callable[..., Awaitable[Any]]
    """How :meth:`emit` reaches the run's event sink (set by the loop)."""

    async def emit(self, name: str, value: Any = None) -> CustomEvent | None:
        """Send ``CustomEvent(name, value)``; returns it (None when nobody listens)."""
        event: CustomEvent | None = await self.send(CustomEvent, name=name, value=value)
        return event


class Hooks:
    """Override the methods you need; the config holds a list and the loop calls each in order.

    A hook that raises is a bug in the hook: the run ends with ``reason="error"`` after the
    history is repaired, and ``agent_end`` is still emitted exactly once.
    """

    async def before_loop(self, context: AgentContext) -> bool:
        """Before ``agent_start``. Return False to veto the run (``agent_end(reason=vetoed)``)."""
        return True

    async def after_loop(self, new_messages: list[AgentMessage], usage: Usage, reason: str) -> None:
        """After ``agent_end``, on every way out of the run (also a ``before_loop`` veto and
        a cancellation from outside, then under a shield). An exception is ignored."""

    async def before_end(self, ending: RunEnding) -> None:
        """Just before ``agent_end``, once, on every way out after ``agent_start`` (not
        after a ``before_loop`` veto, nor in ``run_loop``): post-run work that reports
        on the run's stream (``ending.emit``). Runs after the last ``turn_end``; changes
        nothing in the history. During a cancellation from outside it gets at most
        ``CANCEL_GRACE_S`` (5 s). An exception is logged (logger ``treadle.loop``) and
        ignored: the run keeps its reason. Only hooks that override it are called."""

    async def before_turn(self, context: AgentContext, turn_index: int) -> bool:
        """Before ``turn_start``. Return False to end the run (``reason=vetoed``)."""
        return True

    async def after_turn(self, context: AgentContext, event: TurnEnd) -> None:
        """After ``turn_end``."""

    async def on_message(self, message: AgentMessage) -> None:
        """A message joined the history; runs before its ``message_end`` is sent (so a store
        that persists here makes every reported message durable)."""

    async def on_error(self, message: AssistantMessage) -> None:
        """An assistant turn ended with ``stop_reason="error"``."""

    async def before_model_request(self, request: ModelRequest) -> ModelRequest:
        """Once per turn (not per retry). Return the request, edited or not."""
        return request

    async def before_tool_call(self, call: ToolCall, context: AgentContext) -> ToolDecision | None:
        """Before ``tool_execution_start``. ``None`` means allow."""
        return None

    async def after_tool_call(self, call: ToolCall, result: ToolResult) -> ToolResult | None:
        """After the tool ran. Return a result to replace it, or ``None`` to keep it."""
        return None

    async def before_compaction(self, estimate: int) -> bool:
        """Return False to skip compaction this turn."""
        return True

    async def after_compaction(self, stats: dict[str, Any]) -> None:
        """After compaction, with token and message counts before and after."""

    def on_event(self, event: AgentEvent) -> None:
        """Every event the loop reports, as it is sent (``seq`` stamped), whether or not the
        caller passed a stream — and those of sub-agents started inside this run. For
        observers (tracing, logging, metrics): it is called in the loop's task for every
        streamed delta too, so keep it quick and do not block; it may not change anything.
        An exception raised here is logged and ignored. Only hooks that override it are
        called, so a run without such a hook pays nothing."""


# ---- limits, retries, strategies ----


class ExecutionLimits(BaseModel):
    """Runaway guards. ``None`` means no limit. ``on_limit``: ``"stop"`` appends
    ``[Agent stopped: <reason>]`` and ends; ``"final_answer"`` first makes one more model
    call without tools asking the model to answer from what it has."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    max_turns: int | None = Field(default=None, ge=0)
    max_total_tokens: int | None = Field(default=None, ge=0)
    max_duration_s: float | None = Field(default=None, ge=0)
    """Also bounds a model call that is still streaming: it is cut off at the deadline."""
    max_cost_usd: float | None = Field(default=None, ge=0)
    max_tool_calls: int | None = Field(default=None, ge=0)
    max_idle_s: float | None = Field(default=300.0, gt=0)
    """A model call that sends nothing for this long fails with a retryable ``timeout``
    (a server that keeps the connection open with pings but never answers)."""
    max_call_duration_s: float | None = Field(default=None, gt=0)
    """A model call that takes longer than this in all fails with a retryable ``timeout``."""
    on_limit: Literal["stop", "final_answer"] = "stop"
    final_answer_instruction: str = (
        "You have reached the limit of this run ({reason}). Do not call any tools. "
        "Answer the user now from what you already know, and say what is left undone."
    )
    final_answer_fallback: str = (
        "I had to stop ({reason}) before I could finish, and could not write a summary."
    )


class RetryPolicy(BaseModel):
    """Retries of failed model calls: exponential backoff with jitter; a provider's
    Retry-After wins, unless it asks for more than ``max_retry_after_s`` (then the turn fails
    at once rather than hanging)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    max_retries: int = Field(default=3, ge=0)
    initial_delay_s: float = Field(default=1.0, ge=0)
    multiplier: float = Field(default=2.0, ge=1)
    max_delay_s: float = Field(default=30.0, ge=0)
    jitter: float = Field(default=0.2, ge=0, le=1)
    max_retry_after_s: float = Field(default=60.0, ge=0)
    retry_on: frozenset[str] = RETRYABLE_KINDS

    def delay(self, attempt: int, rand: float) -> float:
        """Backoff before retry number ``attempt`` (0-based); ``rand`` in [0, 1)."""
        base = min(self.initial_delay_s * self.multiplier**attempt, self.max_delay_s)
        return max(0.0, base * (1 + self.jitter * (2 * rand - 1)))


@dataclass(frozen=True, slots=True)
class ToolExecution:
    """How a turn's tool calls run: ``ToolExecution.parallel()`` (default; optional
    ``max_concurrency``), ``ToolExecution.sequential()`` or ``ToolExecution.batched(n)``."""

    mode: Literal["sequential", "parallel", "batched"] = "parallel"
    max_concurrency: int | None = None
    batch_size: int | None = None

    @classmethod
    def sequential(cls) -> ToolExecution:
        return cls("sequential")

    @classmethod
    def parallel(cls, max_concurrency: int | None = None) -> ToolExecution:
        if max_concurrency is not None and max_concurrency < 1:
            raise ConfigurationError("max_concurrency must be at least 1")
        return cls("parallel", max_concurrency=max_concurrency)

    @classmethod
    def batched(cls, n: int) -> ToolExecution:
        if n < 1:
            raise ConfigurationError("batch size must be at least 1")
        return cls("batched", batch_size=n)


MessagesTransform = Callable[
    [list[AgentMessage]], Union[list[AgentMessage], Awaitable[list[AgentMessage]]]
]
MessagePoll = Callable[[], Union[Sequence[AgentMessage], Awaitable[Sequence[AgentMessage]]]]


class ModelSettings(TypedDict, total=False):
    """Sampling settings for one run (``Agent.run(..., model_settings={...})``): the same
    names as the :class:`AgentLoopConfig` fields they override."""

    max_tokens: int
    temperature: float
    top_p: float
    seed: int
    stop: str | list[str]
    """Stop sequences; a string is one sequence."""
    presence_penalty: float
    frequency_penalty: float
    extra_body: dict[str, Any]
    thinking_level: ThinkingLevel


class AgentLoopConfig(BaseModel):
    """Read-only settings of one loop call.

    Model: ``provider`` (required; a :class:`~treadle.providers.Provider` object — build one
    from a model string with ``get_provider("openai:gpt-4o-mini")``), ``model`` (defaults to
    the provider's), ``max_tokens``, ``temperature``, ``top_p``, ``seed``, ``stop``,
    ``presence_penalty``, ``frequency_penalty``, ``extra_body`` (provider-specific fields
    merged into every request body), ``thinking_level``, ``tool_choice``,
    ``response_format``. A ``before_model_request`` hook may change any of them per turn.
    Control: ``hooks``, ``input_filters``, ``tool_execution``, ``tool_timeout``, ``limits``,
    ``retry``, ``compaction``, ``transform_context``, ``convert_to_llm``,
    ``get_steering_messages``, ``get_follow_up_messages``, ``steering_mode``,
    ``approval_handler``, ``deps`` (handed to tools as ``ctx.deps``), ``first_turn_trigger``.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, arbitrary_types_allowed=True, defer_build=True
    )

    provider: Provider
    model: str | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, ge=0, le=1)
    seed: int | None = None
    stop: StopSequences = None
    """Stop sequences. A string is one sequence (``stop="END"`` is ``["END"]``)."""
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)
    thinking_level: ThinkingLevel = "off"
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    prompt_cache: Literal["off", "short", "long"] = "short"

    hooks: list[Hooks] = Field(default_factory=list)
    input_filters: list[InputFilter] = Field(default_factory=list)
    tool_execution: ToolExecution = ToolExecution()
    tool_timeout: float | None = Field(default=None, gt=0)
    raise_tool_errors: bool = False
    slow_consumer: Literal["merge", "wait"] = "merge"
    """While the event stream's buffer is full (the consumer lags), ``"merge"`` folds
    consecutive text / thinking / tool-argument deltas of one content block into a single
    ``message_update`` (their text concatenated, the newest snapshot) so the model call is
    not held up; lifecycle events are never merged or dropped and order is kept. ``"wait"``
    sends every delta, waiting for the consumer."""
    coalesce_deltas: bool = True
    """Join deltas where nobody can tell (contract §2): those of one content block that an
    adapter parses from the same read, and those that follow an update still waiting unread
    in the stream's buffer (it takes them in until someone reads its ``delta`` or
    ``message``). The number of updates is not fixed; their concatenation is the text, and
    no delta waits. ``False`` gives one update per provider wire event (for tests that count
    them, replay tools)."""
    slow_consumer_max_bytes: int = Field(default=8 * 1024 * 1024, gt=0)
    """With ``"merge"``: the most the updates waiting in the stream's buffer may hold, in
    bytes of message text (each carries the message so far, so a long answer to a lagging
    consumer would otherwise cost the buffer size times the answer). Past it, deltas are
    merged as if the buffer were full."""
    max_tool_result_chars: int | None = Field(default=200_000, gt=0)
    """Tool results longer than this (text, in characters) are cut to it, keeping the head
    and the tail around a marker saying how much went; ``None`` keeps them whole."""
    limits: ExecutionLimits = Field(default_factory=ExecutionLimits)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    compaction: Any = None
    """A ``treadle.context.CompactionPolicy`` (``True``: the defaults; a dict: its fields):
    estimate, compact and guard the context window before each model call. See
    docs/context.md."""
    transform_context: MessagesTransform | None = None
    convert_to_llm: MessagesTransform | None = None
    get_steering_messages: MessagePoll | None = None
    get_follow_up_messages: MessagePoll | None = None
    steering_mode: Literal["after_batch", "next_tool"] = "after_batch"
    approval_handler: Callable[..., Awaitable[Any]] | None = None
    """An async ``ApprovalHandler``: ``(call, context, ask) -> bool | Allow | Deny``."""
    deps: Any = None
    first_turn_trigger: TurnTrigger = TurnTrigger.USER

    @field_validator("provider", mode="before")
    @classmethod
    def _provider_object(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise UsageError(
                f"AgentLoopConfig(provider=...) takes a Provider object, not the model string "
                f"{value!r}: use provider=get_provider({value!r}) "
                "(from treadle.providers import get_provider)."
            )
        if not callable(getattr(value, "stream", None)):
            raise UsageError(
                f"AgentLoopConfig(provider=...) got {type(value).__name__}, which has no "
                "stream(request, *, cancel=None) method: pass a treadle.providers adapter "
                "(OpenAIChat, Anthropic, ...), get_provider('openai:gpt-4o-mini'), or your own "
                "object following the Provider protocol."
            )
        return value

    @field_validator("tool_execution", mode="before")
    @classmethod
    def _strategy_from_name(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value == "batched":
                raise ValueError("use ToolExecution.batched(n) to give the batch size")
            if value not in ("sequential", "parallel"):
                raise ValueError("tool_execution must be 'sequential', 'parallel' or ToolExecution")
            return ToolExecution(value)  # type: ignore[arg-type]
        return value

    @property
    def model_name(self) -> str:
        return self.model or str(getattr(self.provider, "model", "") or "")

    def snapshot(self) -> dict[str, Any]:
        """What ``agent_start`` reports: no keys, headers or callables."""
        base_url = getattr(self.provider, "base_url", None)
        return {
            "provider": getattr(self.provider, "name", type(self.provider).__name__),
            "model": self.model_name,
            "base_url": redact_url(str(base_url)) if base_url else None,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "thinking_level": self.thinking_level,
            "tool_execution": self.tool_execution.mode,
            "limits": self.limits.model_dump(
                exclude={"final_answer_instruction", "final_answer_fallback"}
            ),
            "retry": {"max_retries": self.retry.max_retries},
        }


def settings_of(config: AgentLoopConfig, *, same_provider: bool = True) -> dict[str, Any]:
    """The model settings every request of ``config`` carries, turns and side calls alike.
    ``extra_body`` is provider-specific: it goes only to the config's own provider."""
    settings: dict[str, Any] = {
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "seed": config.seed,
        "stop": config.stop,
        "presence_penalty": config.presence_penalty,
        "frequency_penalty": config.frequency_penalty,
        "thinking_level": config.thinking_level,
        "prompt_cache": config.prompt_cache,
        "extra_body": dict(config.extra_body) if same_provider else {},
    }
    return settings


_SETTING_NAMES = tuple(ModelSettings.__annotations__)
_settings_model: type[BaseModel] | None = None


def validated_settings(settings: Any, *, where: str = "model_settings") -> dict[str, Any]:
    """``settings`` (model setting names to values, as ``Agent(...)`` or
    ``run(..., model_settings=...)`` take them) checked by the same rules as the
    :class:`AgentLoopConfig` fields they set, at once: an unknown name is a ``TypeError``, a
    bad value (``top_p=2``, ``max_tokens=0``) a ``ValueError`` naming it. Returns the
    values as the config holds them (``stop="END"`` becomes ``["END"]``)."""
    global _settings_model
    unknown = sorted(set(settings) - set(_SETTING_NAMES))
    if unknown:
        raise UsageError(
            f"unknown model setting(s) {', '.join(unknown)}; "
            f"{where} takes: {', '.join(sorted(_SETTING_NAMES))}"
        )
    if _settings_model is None:
        fields = AgentLoopConfig.model_fields
        _settings_model = create_model(  # type: ignore[call-overload]
            "ModelSettings",
            __config__=ConfigDict(extra="forbid"),
            **{name: (fields[name].annotation, fields[name]) for name in _SETTING_NAMES},
        )
    try:
        checked = _settings_model.model_validate(dict(settings))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}={repr(e['input'])[:60]}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise ConfigurationError(f"invalid {where}: {problems}") from None
    return {name: getattr(checked, name) for name in settings}
