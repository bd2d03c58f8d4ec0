"""How a loop runs: the config, limits, retries, tool strategies, hooks and input filters."""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from .._redact import redact_url
from ..errors import ConfigurationError, UsageError
from ..providers.base import (
    RETRYABLE_KINDS,
    ModelRequest,
    Provider,
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
from .settings import ModelSettings, flat_settings_error, validated_settings

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


ApprovalHandler = Callable[["RunHandle", ToolCall, Ask], Awaitable[Union[bool, Allow, Deny]]]
"""Decides a tool call a hook answered with ``Ask``: ``(run, call, ask)``, the run handle
first as for hooks; returns True / False or an ``Allow`` / ``Deny``."""


# ---- the run a hook is called for ----


class _RunView(Protocol):
    """What a :class:`RunHandle` reads of the run behind it (the loop's own state)."""

    context: AgentContext
    config: AgentLoopConfig
    usage: Usage
    turn_index: int
    turn_open: bool
    turn_usage: Usage

    async def emit_custom(self, name: str, value: Any) -> CustomEvent | None: ...


class RunHandle:
    """One run of the loop, as every hook method sees it (its first argument, ``run``).

    Read-only: ``loop_id``, ``session_id``, ``agent_id``, ``parent_loop_id`` and ``depth``
    (the ids of this run; ``parent`` is the run of the tool that started a sub-agent),
    ``context`` (the :class:`AgentContext`: the history, tools, ``state``), ``config`` (the
    :class:`AgentLoopConfig`, ``config.provider`` there to call), ``deps`` (``config.deps``),
    ``usage`` (what the run's model calls used so far, the open turn's included) and
    ``turn_index`` (of the turn in progress, or the next one). :meth:`emit` sends a
    :class:`~treadle.types.CustomEvent` on the run's stream; :meth:`state_for` is a scratch
    dict per run and per hook, dropped when the run ends.

    One hook object may serve many runs at once (``Agent.fork()`` shares its hooks, and a
    server runs forks side by side): whatever a hook keeps about a run belongs in
    ``run.state_for(self)`` or comes from ``run``, never on the hook itself. The loop makes
    one handle per run (its constructor is the loop's); hook calls made outside a run
    (``Agent.compact()``, a planning call, :func:`~treadle.loop.call_model` without
    ``run=``) get :meth:`detached` ones.
    """

    __slots__ = ("_observers", "_parent", "_run", "_scratch")

    def __init__(
        self,
        run: _RunView,
        parent: RunHandle | None = None,
        observers: tuple[Callable[..., None], ...] = (),
    ) -> None:
        self._run = run
        self._parent = parent
        self._observers = observers  # on_event methods of this run and the runs around it
        self._scratch: dict[int, tuple[object, dict[str, Any]]] | None = None

    @classmethod
    def detached(cls, context: AgentContext, config: AgentLoopConfig) -> RunHandle:
        """A handle for hook calls made outside a run: ids and ``context`` from
        ``context``, ``usage`` zero, :meth:`emit` sends nothing (returns None). For a
        hook's own tests, too."""
        return cls(_Detached(context, config))

    @property
    def loop_id(self) -> str | None:
        return self._run.context.loop_id

    @property
    def session_id(self) -> str | None:
        return self._run.context.session_id

    @property
    def agent_id(self) -> str | None:
        return self._run.context.agent_id

    @property
    def parent_loop_id(self) -> str | None:
        return self._run.context.parent_loop_id

    @property
    def depth(self) -> int:
        return self._run.context.depth

    @property
    def parent(self) -> RunHandle | None:
        """The run a sub-agent was started from (``Agent.as_tool``), else None."""
        return self._parent

    @property
    def context(self) -> AgentContext:
        return self._run.context

    @property
    def config(self) -> AgentLoopConfig:
        return self._run.config

    @property
    def deps(self) -> Any:
        return self._run.config.deps

    @property
    def usage(self) -> Usage:
        run = self._run
        return run.usage + run.turn_usage if run.turn_open else run.usage

    @property
    def turn_index(self) -> int:
        return self._run.turn_index

    async def emit(self, name: str, value: Any = None) -> CustomEvent | None:
        """Send ``CustomEvent(name, value)`` on the run's stream now, reaching its
        ``on_event`` observers too. Returns the event; None when nobody listens or the
        run is not reporting (before ``agent_start``: a ``before_loop`` hook; after
        ``agent_end``: an ``after_loop`` hook). ``name`` should be namespaced
        (``"myapp.cache_hit"``); ``value`` is any JSON."""
        return await self._run.emit_custom(name, value)

    def state_for(self, owner: object) -> dict[str, Any]:
        """A dict for ``owner`` (a hook passes ``self``) to keep what it knows about this
        run: the same dict for every call of this run, another for each other run, dropped
        when the run ends (after the ``after_loop`` hooks)."""
        scratch = self._scratch
        if scratch is None:
            scratch = self._scratch = {}
        found = scratch.get(id(owner))
        if found is None:  # the owner is kept with its dict, so its id is not reused
            found = scratch[id(owner)] = (owner, {})
        return found[1]

    def _close(self) -> None:
        """Drop every owner's state (the loop calls it when the run has ended)."""
        self._scratch = None

    def __repr__(self) -> str:
        return (
            f"RunHandle(loop_id={self.loop_id!r}, session_id={self.session_id!r}, "
            f"depth={self.depth})"
        )


class _Detached:
    """The run behind a :meth:`RunHandle.detached` handle: nothing runs, nothing is sent."""

    __slots__ = ("config", "context", "turn_index", "turn_open", "turn_usage", "usage")

    def __init__(self, context: AgentContext, config: AgentLoopConfig) -> None:
        self.context = context
        self.config = config
        self.usage = self.turn_usage = Usage()
        self.turn_index = 0
        self.turn_open = False

    async def emit_custom(self, name: str, value: Any) -> CustomEvent | None:
        return None


# ---- hooks ----


@dataclass(frozen=True, slots=True)
class RunEnding:
    """How a run ends, as ``before_end`` (just before ``agent_end``) and ``after_loop``
    (just after it) see it: ``new_messages`` (the run's messages, a copy), ``usage`` (the
    loop's), ``reason``, ``error`` and ``pending_tool_calls``, as ``agent_end`` carries
    them. The rest (ids, context, config, ``emit``) is on the run handle."""

    new_messages: list[AgentMessage]
    usage: Usage
    reason: AgentEndReason
    error: ErrorInfo | None = None
    pending_tool_calls: list[str] = field(default_factory=list)


class Hooks:
    """Your code, called by the loop at fixed points of a run: to watch a run, record it,
    or steer it.

    Subclass ``Hooks``, override the methods you need, and pass instances to
    ``AgentLoopConfig(hooks=[...])`` or ``Agent(hooks=[...])``. The loop calls each hook's
    method in list order when its point comes: ``before_loop`` / ``after_loop`` around a
    run and ``before_end`` just before its last event; ``before_turn`` / ``after_turn``
    around each model turn, ``before_model_request`` to edit a request, ``on_error`` when an
    answer fails; ``on_message`` for each message that joins the history (a session store
    persists there); ``before_tool_call`` to allow, deny or ask a person about a call
    (``Allow``, ``Deny``, ``Ask``) and ``after_tool_call`` to replace a result; ``on_event``
    for every event of the run.

    A method the class does not override is never called, and one set on an instance
    (``hook.on_event = fn``) counts as overridden. Methods may be sync or async, except
    ``on_event`` (always sync: it must not block).

    Every method gets the run first (``run``, a :class:`RunHandle`): its ids, context,
    config, deps and usage, ``run.emit`` for custom events, and ``run.state_for(self)`` for
    what the hook keeps about this run. One hook object may serve several runs at once (the
    forks of an Agent), so it keeps nothing about a run on itself.

    A hook that raises is a bug in the hook: the run ends with ``reason="error"`` after the
    history is repaired, and ``agent_end`` is still sent exactly once (``after_loop`` and
    ``before_end`` are the exceptions: their errors are logged and ignored).

    Example:
        A hook that lets the model delete nothing:

        ```python
        from treadle import Agent, AssistantMessage, Deny, Hooks, RunHandle, ToolCall, tool
        from treadle.testing import ScriptedProvider


        class NoDeletes(Hooks):
            def before_tool_call(self, run: RunHandle, call: ToolCall) -> Deny | None:
                return Deny("Deleting is not allowed.") if call.name.startswith("delete") else None


        @tool(description="Delete a file.")
        def delete_file(path: str) -> str:
            raise AssertionError("never runs")


        call = ToolCall(id="c1", name="delete_file", arguments={"path": "notes.txt"})
        model = ScriptedProvider([AssistantMessage(content=[call]), "I may not delete it."])
        agent = Agent(model, tools=[delete_file], hooks=[NoDeletes()])
        result = agent.run_sync("Delete notes.txt")
        assert result.messages[2].text == "Deleting is not allowed."  # the call's result
        ```
    """

    async def before_loop(self, run: RunHandle) -> bool:
        """Before ``agent_start``. Return False to veto the run (``agent_end(reason=vetoed)``)."""
        return True

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        """After ``agent_end``, on every way out of the run (also a ``before_loop`` veto and
        a cancellation from outside, then under a shield). An exception is logged and
        ignored. ``run.emit`` sends nothing any more."""

    async def before_end(self, run: RunHandle, ending: RunEnding) -> None:
        """Just before ``agent_end``, once, on every way out after ``agent_start`` (not
        after a ``before_loop`` veto, nor in ``run_loop``): post-run work that reports
        on the run's stream (``run.emit``). Runs after the last ``turn_end``; changes
        nothing in the history. During a cancellation from outside it gets at most
        ``CANCEL_GRACE_S`` (5 s). An exception is logged (logger ``treadle.loop``) and
        ignored: the run keeps its reason."""

    async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
        """Before ``turn_start``. Return False to end the run (``reason=vetoed``)."""
        return True

    async def after_turn(self, run: RunHandle, event: TurnEnd) -> None:
        """After ``turn_end``."""

    async def on_message(self, run: RunHandle, message: AgentMessage) -> None:
        """A message joined the history; runs before its ``message_end`` is sent (so a store
        that persists here makes every reported message durable)."""

    async def on_error(self, run: RunHandle, message: AssistantMessage) -> None:
        """An assistant turn ended with ``stop_reason="error"``."""

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        """Once per turn (not per retry), and for side calls (``request.purpose``). Return
        the request, edited or not."""
        return request

    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> ToolDecision | None:
        """Before ``tool_execution_start``. ``None`` means allow."""
        return None

    async def after_tool_call(
        self, run: RunHandle, call: ToolCall, result: ToolResult
    ) -> ToolResult | None:
        """After the tool ran. Return a result to replace it, or ``None`` to keep it."""
        return None

    async def before_compaction(self, run: RunHandle, estimate: int) -> bool:
        """Return False to skip compaction this turn."""
        return True

    async def after_compaction(self, run: RunHandle, stats: dict[str, Any]) -> None:
        """After compaction, with token and message counts before and after."""

    def on_event(self, run: RunHandle, event: AgentEvent) -> None:
        """Every event the loop reports, as it is sent (``seq`` stamped), whether or not the
        caller passed a stream — and those of sub-agents started inside this run (``run``
        is then the sub-agent's run, whose ``parent`` leads back). For observers (tracing,
        logging, metrics): it is called in the loop's task for every streamed delta too, so
        keep it quick and do not block; it may not change anything. An exception raised
        here is logged and ignored."""


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


class AgentLoopConfig(BaseModel):
    """Read-only settings of one loop call.

    Model: ``provider`` (required; a :class:`~treadle.providers.Provider` object — build one
    from a model string with ``get_provider("openai:gpt-4o-mini")``), ``model`` (defaults to
    the provider's), ``model_settings`` (a :class:`~treadle.loop.ModelSettings` dict:
    ``{"temperature": 0.2, "max_tokens": 1024}``), ``tool_choice``, ``response_format``. A
    ``before_model_request`` hook may change any of them per turn.
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
    model_settings: ModelSettings = Field(default_factory=lambda: ModelSettings())
    """Sampling settings every request carries (:class:`~treadle.loop.ModelSettings`)."""
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    prompt_cache: Literal["off", "short", "long"] = "short"
    """Deprecated: ``model_settings={"prompt_cache": ...}``, which wins when both are set."""

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
    """An async ``ApprovalHandler``: ``(run, call, ask) -> bool | Allow | Deny``."""
    deps: Any = None
    first_turn_trigger: TurnTrigger = TurnTrigger.USER
    _hook_dispatch: Any = PrivateAttr(default=None)
    """Which hooks implement which method (``dispatch.hook_dispatch``), made once."""

    @model_validator(mode="before")
    @classmethod
    def _no_flat_settings(cls, data: Any) -> Any:
        if isinstance(data, dict):
            # prompt_cache is still a field of its own here (deprecated): not a flat setting
            names = [name for name in data if name != "prompt_cache"]
            error = flat_settings_error(names, where="AgentLoopConfig(...)")
            if error is not None:
                raise error
        return data

    @field_validator("prompt_cache")
    @classmethod
    def _deprecated_prompt_cache(cls, value: str) -> str:
        warnings.warn(
            "AgentLoopConfig(prompt_cache=...) is deprecated: pass "
            f"model_settings={{'prompt_cache': {value!r}}} (also on Agent and per run)",
            DeprecationWarning,
            stacklevel=2,
        )
        return value

    @field_validator("model_settings", mode="before")
    @classmethod
    def _checked_settings(cls, value: Any) -> Any:
        return validated_settings(value, where="AgentLoopConfig(model_settings=...)")

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

    def summary(self) -> dict[str, Any]:
        """What ``agent_start`` reports: no keys, headers or callables."""
        base_url = getattr(self.provider, "base_url", None)
        return {
            "provider": getattr(self.provider, "name", type(self.provider).__name__),
            "model": self.model_name,
            "base_url": redact_url(str(base_url)) if base_url else None,
            "max_tokens": self.model_settings.get("max_tokens"),
            "temperature": self.model_settings.get("temperature"),
            "top_p": self.model_settings.get("top_p"),
            "seed": self.model_settings.get("seed"),
            "thinking_level": self.model_settings.get("thinking_level", "off"),
            "tool_execution": self.tool_execution.mode,
            "limits": self.limits.model_dump(
                exclude={"final_answer_instruction", "final_answer_fallback"}
            ),
            "retry": {"max_retries": self.retry.max_retries},
        }
