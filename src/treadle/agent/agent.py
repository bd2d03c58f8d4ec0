"""Agent: a stateful facade over agent_loop for scripts, servers and notebooks."""

from __future__ import annotations

import re
import sys
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from typing_extensions import TypeVar

from .._cancel import CancellationToken, CancelMode
from ..loop import (
    AgentContext,
    AgentLoopConfig,
    ExecutionLimits,
    Hooks,
    InputFilter,
    ModelSettings,
    RetryPolicy,
    ToolExecution,
    agent_loop,
    agent_loop_continue,
)
from ..loop.cancel import CancelBridge
from ..loop.run import LAST_ERROR_KEY
from ..loop.sink import EventSink
from ..providers.base import ModelRequest, Provider, ProviderError, StreamDone, ThinkingLevel
from ..tools import TaskComplete, Tool, ToolContext
from ..tools.function_tool import _strip_titles
from ..types import (
    AgentEvent,
    AgentMessage,
    AssistantMessage,
    ContinuationKind,
    ErrorInfo,
    PlanCreated,
    TextContent,
    ToolResult,
    TurnEnd,
    TurnTrigger,
    Usage,
    UserMessage,
)
from .result import AgentBusy, RunResult

if TYPE_CHECKING:
    from ..context.compaction import CompactionResult
    from ..sessions import SessionRecorder, SessionStore

OutputT = TypeVar("OutputT", default=None)
"""What ``RunResult.output`` holds: the ``output_type``; ``None`` for a text-only agent."""
SteerMode = Literal["after_batch", "next_tool", "interrupt"]

PLANNER_INSTRUCTION = (
    "Before acting, decide whether the user's request needs a plan. If it can be answered "
    "directly, reply with exactly DIRECT. Otherwise reply with a short numbered plan, one step "
    "per line, and nothing else."
)
OUTPUT_TOOL = "final_result"


class AgentSnapshot(BaseModel):
    """An Agent's conversation state, for ``restore`` (JSON round-trips)."""

    model_config = ConfigDict(extra="forbid")

    messages: list[AgentMessage] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    agent_id: str | None = None
    session_id: str | None = None


class _OutputTool:
    """The final-result tool that carries structured output; validation errors go back to
    the model, a bounded number of times."""

    category = "info"
    timeout = None
    sequential = False
    accepts_raw_arguments = False
    validates_arguments = True  # its own validation errors count towards output_retries

    def __init__(self, output_type: Any, run_state: _RunState) -> None:
        self.name = OUTPUT_TOOL
        self.description = "Give your final answer. Call this exactly once, when you are done."
        if isinstance(output_type, type) and issubclass(output_type, BaseModel):
            self._model: type[BaseModel] = output_type
            self._wrapped = False
        else:
            self._model = create_model("FinalResult", value=(output_type, ...))
            self._wrapped = True
        self.parameters: dict[str, Any] = _strip_titles(self._model.model_json_schema())
        self._state = run_state

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> ToolResult:
        try:
            value: Any = self._model.model_validate(arguments)
        except ValidationError as exc:
            self._state.output_failures += 1
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            text = f"The final result did not validate: {problems}. Call {OUTPUT_TOOL} again."
            give_up = self._state.output_failures > self._state.output_retries
            if give_up:
                self._state.output_error = problems
            return ToolResult(content=[TextContent(text=text)], is_error=True, terminate=give_up)
        self._state.output = value.value if self._wrapped else value
        self._state.has_output = True
        raise TaskComplete("Final result recorded.")


class _RunState:
    """What one run of an Agent accumulates besides the history."""

    def __init__(self, output_retries: int) -> None:
        self.reason: str = "completed"
        self.usage = Usage()
        self.output: Any = None
        self.has_output = False
        self.output_failures = 0
        self.output_retries = output_retries
        self.output_error: str | None = None
        self.nudges = 0
        self.in_tools = False
        self.plan: PlanCreated | None = None
        self.planning_usage = Usage()
        self.store_error: str | None = None


class _AgentHooks(Hooks):
    """The Agent's own bookkeeping, done through the public hooks."""

    def __init__(self, state: _RunState, sink_for: Callable[[], EventSink | None]) -> None:
        self.state = state
        self.sink_for = sink_for

    async def before_turn(self, context: AgentContext, turn_index: int) -> bool:
        plan = self.state.plan
        sink = self.sink_for()
        if plan is not None and sink is not None:
            self.state.plan = None
            await sink.emit(PlanCreated, plan=plan.plan, steps=plan.steps)
        return True

    async def on_message(self, message: AgentMessage) -> None:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            self.state.in_tools = True  # until the turn ends: steering waits for the batch

    async def after_turn(self, context: AgentContext, event: TurnEnd) -> None:
        self.state.in_tools = False

    async def after_loop(self, new_messages: list[AgentMessage], usage: Usage, reason: str) -> None:
        self.state.reason = reason
        self.state.usage = self.state.usage + usage


def _in_running_loop() -> bool:
    """True when this thread is inside a running asyncio or trio loop (a notebook cell)."""
    aio = sys.modules.get("asyncio")
    if aio is not None and aio._get_running_loop() is not None:
        return True
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_trio_token()
        except RuntimeError:
            return False
        return True
    return False


def _resolve_model(model: Any, *, api_key: str | None, base_url: str | None) -> Provider:
    """The provider ``Agent(model=...)`` names; a clear error for anything else."""
    if isinstance(model, str):
        from ..providers.registry import get_provider

        options = {k: v for k, v in (("api_key", api_key), ("base_url", base_url)) if v}
        return get_provider(model, **options)
    if api_key is not None or base_url is not None:
        raise TypeError(
            "api_key= and base_url= apply to a model string such as 'openai:gpt-4o-mini'; "
            f"this {type(model).__name__} is already built: give them to its constructor."
        )
    if not callable(getattr(model, "stream", None)):
        raise TypeError(
            f"Agent(model=...) takes a model string such as 'openai:gpt-4o-mini' or a "
            f"Provider object, not {type(model).__name__} ({model!r})."
        )
    provider: Provider = model
    return provider


_SETTINGS = frozenset(ModelSettings.__annotations__)


def _checked_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(settings) - _SETTINGS)
    if unknown:
        raise TypeError(
            f"unknown model setting(s) {', '.join(unknown)}; "
            f"model_settings takes: {', '.join(sorted(_SETTINGS))}"
        )
    updates = dict(settings)
    if "stop" in updates:
        updates["stop"] = list(updates["stop"])
    return updates


class Agent(Generic[OutputT]):
    """A conversation with a model and tools, kept between runs.

    ``model`` is a model string (``"openai:gpt-4o-mini"``, ``"anthropic:claude-sonnet-4-5"``,
    ``"ollama:llama3.2"`` …) or a :class:`~treadle.providers.Provider`. ``system_prompt`` may
    be a callable, rebuilt on every model call. ``output_type`` (a pydantic model or any type)
    makes runs produce a validated ``RunResult.output``. ``deps`` reaches tools as
    ``ctx.deps``. ``planning=True`` adds a tool-free planning call before each run.

    ``store`` (a :class:`~treadle.sessions.SessionStore`) makes the conversation durable:
    every message is written before its ``message_end`` is sent. With ``session_id`` of a
    stored session it is resumed (history loaded, unanswered tool calls given the result
    ``Cancelled``, ids restored); otherwise a new session is created (with that id, if
    given). The agent holds the session's write lock until :meth:`close`; a second Agent on
    the same session gets :class:`~treadle.sessions.SessionLocked`. Opening the session is
    blocking I/O done here, once; during runs the store is written from a worker thread.

    One run at a time: a second ``run`` while one is in progress raises :class:`AgentBusy`.
    """

    def __init__(
        self,
        model: str | Provider,
        *,
        tools: Sequence[Any] = (),
        system_prompt: str | Callable[[], str] | None = None,
        hooks: Sequence[Hooks] = (),
        input_filters: Sequence[InputFilter] = (),
        output_type: type[OutputT] | None = None,
        output_retries: int = 2,
        limits: ExecutionLimits | None = None,
        retry: RetryPolicy | None = None,
        tool_execution: ToolExecution | None = None,
        tool_timeout: float | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        presence_penalty: float | None = None,
        frequency_penalty: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        thinking_level: ThinkingLevel = "off",
        deps: Any = None,
        approval_handler: Any = None,
        compaction: Any = None,
        planning: bool = False,
        name: str = "agent",
        description: str = "",
        max_depth: int = 3,
        event_buffer: int = 256,
        store: SessionStore | None = None,
        session_id: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> None:
        self.provider: Provider = _resolve_model(model, api_key=api_key, base_url=base_url)
        self._owns_provider = isinstance(model, str)
        self.name = name
        self.description = description
        self.output_type = output_type
        self.output_retries = output_retries
        self.planning = planning
        self.max_depth = max_depth
        self.event_buffer = event_buffer
        self.deps = deps
        self._user_hooks = list(hooks)
        self._settings: dict[str, Any] = {
            "input_filters": list(input_filters),
            "limits": limits or ExecutionLimits(),
            "retry": retry or RetryPolicy(),
            "tool_execution": tool_execution or ToolExecution(),
            "tool_timeout": tool_timeout,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "seed": seed,
            "stop": list(stop) if stop is not None else None,
            "presence_penalty": presence_penalty,
            "frequency_penalty": frequency_penalty,
            "extra_body": dict(extra_body or {}),
            "thinking_level": thinking_level,
            "approval_handler": approval_handler,
            "compaction": compaction,
        }
        self.context = AgentContext(system_prompt=system_prompt, tools=list(tools))
        self.context.agent_id = str(uuid.uuid4())
        self.context.session_id = str(uuid.uuid4())
        self.usage = Usage()
        self._running = False
        self._token: CancellationToken | None = None
        self._aborted = False
        self._steer_after: list[AgentMessage] = []
        self._steer_next: list[AgentMessage] = []
        self._interrupts: list[AgentMessage] = []
        self._follow_ups: list[AgentMessage] = []
        self._sink: EventSink | None = None
        self.store = store
        self._recorder: SessionRecorder | None = None
        if session_id is not None:
            self.context.session_id = session_id
        if store is not None:
            self._open_session(store, session_id)

    def __repr__(self) -> str:
        return (
            f"Agent(name={self.name!r}, provider={self.provider!r}, messages={len(self.messages)})"
        )

    # ---- state ----

    @property
    def messages(self) -> list[AgentMessage]:
        """The conversation so far (the live history)."""
        return self.context.messages

    @property
    def running(self) -> bool:
        return self._running

    @property
    def session_id(self) -> str:
        """The id of this conversation (its id in the store, when there is one)."""
        return self.context.session_id or ""

    def reset(self) -> None:
        """Forget the conversation and usage; start a new session id (a new session in the
        store, if there is one; the old one stays stored)."""
        self._check_idle("reset")
        self.context.messages.clear()
        self.context.approvals.clear()
        self.context.continuation_kind = ContinuationKind.INITIAL
        self.context.parent_loop_id = None
        self.usage = Usage()
        if self._recorder is not None and self.store is not None:
            self._recorder.close()
            self._recorder = None
            self._open_session(self.store, None)
        else:
            self.context.session_id = str(uuid.uuid4())

    def branch(self, at_index: int | None = None) -> Agent[OutputT]:
        """A new Agent whose conversation starts with the first ``at_index`` messages of this
        one (all of them by default; negative counts from the end), with the same model,
        tools and settings. This agent is left untouched.

        With a store the branch is a new session that records its parent and branch point
        and shares the prefix without copying it. Its first run reports
        ``continuation_kind="branch"`` with this agent's last loop as ``parent_loop_id``. A
        branch point inside a batch of tool calls gives the calls left unanswered the result
        ``Cancelled``.
        """
        self._check_idle("branch")
        count = len(self.messages)
        at = count if at_index is None else at_index
        if at < 0:
            at += count
        if not 0 <= at <= count:
            raise IndexError(f"at_index {at_index} is outside a history of {count} messages")
        clone = self._clone()
        clone.context = self.context.model_copy(
            update={
                "messages": [],
                "approvals": {},
                "state": {},
                "agent_id": str(uuid.uuid4()),
                "loop_id": None,
                "parent_loop_id": self.context.loop_id,
                "continuation_kind": ContinuationKind.BRANCH,
            }
        )
        if self._recorder is not None and self.store is not None:
            self._recorder.sync_now()
            new_id = self.store.branch(self.session_id, at, agent_id=clone.context.agent_id)
            clone._open_session(self.store, new_id)
        else:
            from ..sessions import repair_history

            prefix = [m.model_copy(deep=True) for m in self.messages[:at]]
            clone.context.messages = repair_history(prefix)[0]
            clone.context.session_id = str(uuid.uuid4())
            clone.usage = _usage_of(clone.context.messages)
        return clone

    def close(self) -> None:
        """Release the stored session's write lock (another Agent may then resume it). Runs
        after this raise. Nothing to do without a store. Idempotent."""
        self._check_idle("close")
        if self._recorder is not None:
            self._recorder.close()

    async def aclose(self) -> None:
        """Close what this Agent opened: the session lock, and the provider's HTTP client when
        the Agent made the provider from a model string. ``async with Agent(...)`` does it."""
        self.close()
        closer = getattr(self.provider, "aclose", None)
        if self._owns_provider and closer is not None:
            await closer()

    async def __aenter__(self) -> Agent[OutputT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def snapshot(self) -> AgentSnapshot:
        """The conversation state, deep-copied (safe to keep, serialise and restore)."""
        return AgentSnapshot(
            messages=[m.model_copy(deep=True) for m in self.messages],
            usage=self.usage,
            agent_id=self.context.agent_id,
            session_id=self.context.session_id,
        )

    def restore(self, snapshot: AgentSnapshot) -> None:
        """Put back a state taken with :meth:`snapshot`. With a store, the history is
        written to this agent's session (which keeps its id)."""
        self._check_idle("restore")
        self.context.messages[:] = [m.model_copy(deep=True) for m in snapshot.messages]
        self.usage = snapshot.usage
        self.context.agent_id = snapshot.agent_id or self.context.agent_id
        if self._recorder is not None:
            self._recorder.sync_now()
        else:
            self.context.session_id = snapshot.session_id or self.context.session_id

    # ---- steering ----

    def steer(self, message: str | AgentMessage, mode: SteerMode = "after_batch") -> None:
        """Add a user message to the running conversation.

        ``after_batch``: seen by the model after the current tool calls finish.
        ``next_tool``: with sequential tool execution, the remaining tools of the batch are
        skipped. ``interrupt``: the current model call and tools stop now, then the run goes
        on with this message. Without a run in progress it joins the next run's prompt.
        Safe to call from another task or thread.
        """
        item = UserMessage.of(message) if isinstance(message, str) else message
        if mode == "after_batch":
            self._steer_after.append(item)
        elif mode == "next_tool":
            self._steer_next.append(item)
        elif mode == "interrupt":
            self._interrupts.append(item)
            if self._token is not None:
                self._token.cancel("immediate", reason="interrupted by a steering message")
        else:
            raise ValueError("mode must be 'after_batch', 'next_tool' or 'interrupt'")

    def follow_up(self, message: str | AgentMessage) -> None:
        """A message to handle after the run would otherwise end (it keeps going)."""
        self._follow_ups.append(UserMessage.of(message) if isinstance(message, str) else message)

    def abort(self, mode: CancelMode = "immediate") -> None:
        """Stop the run in progress (``immediate`` or ``after_turn``). Thread-safe."""
        if self._token is not None:
            self._aborted = True
            self._token.cancel(mode)

    # ---- runs ----

    async def run(
        self,
        prompt: str | AgentMessage | Sequence[AgentMessage],
        *,
        deps: Any = None,
        model_settings: ModelSettings | None = None,
    ) -> RunResult[OutputT]:
        """Run to the end and return the result. Never raises for runtime failures: look at
        ``result.reason`` / ``result.error`` (or call ``result.raise_for_error()``).
        ``model_settings`` overrides the agent's sampling settings for this run only."""
        self._claim()
        try:
            return await self._run(prompt, deps=deps, events=None, settings=model_settings)
        finally:
            self._release()

    def stream(
        self,
        prompt: str | AgentMessage | Sequence[AgentMessage],
        *,
        deps: Any = None,
        model_settings: ModelSettings | None = None,
    ) -> AgentStream[OutputT]:
        """``async with agent.stream(prompt) as events: async for event in events: ...``;
        ``events.result`` holds the RunResult afterwards. Leaving the block early aborts the
        run (and still waits for it to close cleanly)."""
        return AgentStream(self, prompt, deps, model_settings)

    def run_sync(
        self,
        prompt: str | AgentMessage | Sequence[AgentMessage],
        *,
        deps: Any = None,
        model_settings: ModelSettings | None = None,
    ) -> RunResult[OutputT]:
        """Blocking run, for scripts and notebooks. Inside a running event loop (a Jupyter
        cell) the run gets its own loop in a worker thread, so no nest_asyncio is needed."""
        call = partial(self.run, prompt, deps=deps, model_settings=model_settings)
        if not _in_running_loop():
            return anyio.run(call)
        box: list[Any] = []

        def target() -> None:
            try:
                box.append(("ok", anyio.run(call)))
            except BaseException as exc:  # handed to the caller's thread
                box.append(("error", exc))

        thread = threading.Thread(target=target, name="treadle-run-sync")
        thread.start()
        thread.join()
        kind, value = box[0]
        if kind == "error":
            raise value
        result: RunResult[OutputT] = value
        return result

    async def continue_(self, *, deps: Any = None) -> RunResult[OutputT]:
        """Carry on after an error or abort (the failed assistant message is dropped and the
        last turn tried again), or after a suspension once approvals are given."""
        self._claim()
        try:
            last = self.messages[-1] if self.messages else None
            if (
                isinstance(last, AssistantMessage)
                and last.stop_reason in ("error", "aborted")
                and not last.tool_calls
            ):
                self.messages.pop()
                self.context.continuation_kind = ContinuationKind.RERUN
            return await self._run(None, deps=deps, events=None)
        finally:
            self.context.continuation_kind = ContinuationKind.INITIAL
            self._release()

    async def compact(self, *, target_tokens: int | None = None) -> CompactionResult | None:
        """Compact the conversation now (the chat REPL's ``/compact``): summarise the middle,
        keep the first exchange and the recent turns, under the agent's compaction policy
        (its defaults when the agent has none). Returns what changed, or None when a
        ``before_compaction`` hook vetoed it. The summary call's usage joins ``agent.usage``.
        With nothing worth compacting (a short conversation) no model call is made and the
        result says so: ``result.changed`` is False and ``result.usage`` is zero.
        """
        from ..loop.compaction import compact_context

        self._claim()
        try:
            state = _RunState(self.output_retries)
            config = self.config(state, None)
            if self._recorder is not None:
                config = config.model_copy(update={"hooks": [self._recorder, *config.hooks]})
            result = await compact_context(self.context, config, target_tokens=target_tokens)
            if self._recorder is not None:
                await self._recorder.sync()
        finally:
            self._release()
        if result is not None:
            self.usage = self.usage + result.usage
        return result

    async def run_ephemeral(
        self, prompt: str | AgentMessage, *, deps: Any = None
    ) -> RunResult[OutputT]:
        """A run on a copy of the conversation: nothing stored here changes, and nothing is
        written to the session store."""
        clone = self._clone()
        clone.context = self.context.model_copy(
            update={"messages": list(self.messages), "approvals": {}, "state": {}}
        )
        result: RunResult[OutputT] = await clone.run(prompt, deps=deps)
        return result

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a tool for another agent (a sub-agent). Its events are forwarded onto
        the parent's stream with their own loop_id and depth; its usage is added to the
        parent's; cancelling the parent cancels it."""
        from .subagent import SubAgentTool

        return SubAgentTool(self, name or self.name, description or self.description)

    # ---- internals ----

    def _clone(self) -> Agent[OutputT]:
        """A copy sharing settings, with no run state and no session (the caller gives it a
        context)."""
        clone: Agent[OutputT] = Agent.__new__(Agent)
        clone.__dict__.update(self.__dict__)
        clone.usage = Usage()
        clone._running = False
        clone._token = None
        clone._steer_after, clone._steer_next, clone._interrupts, clone._follow_ups = [], [], [], []
        clone._sink = None
        clone._recorder = None
        return clone

    def _open_session(self, store: SessionStore, session_id: str | None) -> None:
        from ..sessions import SessionRecorder

        self._recorder = SessionRecorder.open(store, self.context, session_id)
        self.usage = _usage_of(self.context.messages)

    def _check_idle(self, what: str) -> None:
        if self._running:
            raise AgentBusy(f"cannot {what} while a run is in progress; await it or abort() it")

    def _claim(self) -> None:
        if self._running:
            raise AgentBusy(
                "this Agent is already running; one run at a time keeps its history valid. "
                "Await the current run, use steer()/follow_up() to add to it, or use "
                "run_ephemeral() for an independent run."
            )
        self._running = True

    def _release(self) -> None:
        self._running = False
        self._token = None

    def config(self, state: _RunState, deps: Any) -> AgentLoopConfig:
        hooks: list[Hooks] = [_AgentHooks(state, lambda: self._sink), *self._user_hooks]
        return AgentLoopConfig(
            provider=self.provider,
            hooks=hooks,
            deps=deps if deps is not None else self.deps,
            get_steering_messages=partial(self._poll_steering, state),
            get_follow_up_messages=partial(self._poll_follow_ups, state),
            steering_mode="next_tool",
            **self._settings,
        )

    def _poll_steering(self, state: _RunState) -> list[AgentMessage]:
        taken = self._steer_next[:]
        del self._steer_next[: len(taken)]
        if not state.in_tools:
            after = self._steer_after[:]
            del self._steer_after[: len(after)]
            taken.extend(after)
        return taken

    def _poll_follow_ups(self, state: _RunState) -> list[AgentMessage]:
        if self.output_type is not None and not state.has_output and state.output_error is None:
            if state.nudges < self.output_retries:
                state.nudges += 1
                return [UserMessage.of(f"Call the {OUTPUT_TOOL} tool with your final answer.")]
        taken = self._follow_ups[:]
        del self._follow_ups[: len(taken)]
        return taken

    def _prompts(self, prompt: Any) -> list[AgentMessage]:
        if prompt is None:
            return []
        if isinstance(prompt, str):
            return [UserMessage.of(prompt)]
        if isinstance(prompt, BaseModel):
            return [prompt]  # type: ignore[list-item]
        return list(prompt)

    async def _run(
        self,
        prompt: Any,
        *,
        deps: Any,
        events: MemoryObjectSendStream[AgentEvent] | None,
        settings: ModelSettings | None = None,
    ) -> RunResult[OutputT]:
        recorder = self._recorder
        if recorder is not None and recorder.closed:
            from ..sessions import SessionError

            raise SessionError(f"this Agent closed its session {self.session_id!r}")
        state = _RunState(self.output_retries)
        self._aborted = False
        token = self._token = CancellationToken()
        prompts = self._prompts(prompt)
        prompts = [*self._interrupts, *self._steer_after, *self._steer_next, *prompts]
        self._interrupts.clear()
        self._steer_after.clear()
        self._steer_next.clear()
        self.context.loop_id = str(uuid.uuid4())
        self._sink = EventSink(events, self.context.loop_id, self.context.depth) if events else None
        tools_before = self.context.tools
        if self.output_type is not None:
            self.context.tools = [*tools_before, _OutputTool(self.output_type, state)]
        config = self.config(state, deps)
        if settings:
            config = config.model_copy(update=_checked_settings(settings))
        branching = self.context.continuation_kind == ContinuationKind.BRANCH
        if branching and prompts:
            config = config.model_copy(update={"first_turn_trigger": TurnTrigger.BRANCH})
        if recorder is not None:  # first, so a message is durable before others hear of it
            config = config.model_copy(update={"hooks": [recorder, *config.hooks]})
        new: list[AgentMessage] = []
        try:
            if recorder is not None:
                await recorder.sync()  # edits since the last run (continue_, restore ...)
                if self.planning and prompts:
                    await recorder.write_ahead(prompts)  # durable before the planning call
            if self.planning and prompts and not token.cancelled:
                prompts = await self._plan(prompts, state, config)
            if prompts:
                new += await agent_loop(prompts, self.context, config, events, token)
            else:
                new += await agent_loop_continue(self.context, config, events, token)
            while self._interrupts and state.reason == "cancelled" and not self._aborted:
                token = self._token = CancellationToken()
                again, self._interrupts[:] = list(self._interrupts), []
                self.context.loop_id = str(uuid.uuid4())
                new += await agent_loop(again, self.context, config, events, token)
        finally:
            self.context.tools = tools_before
            self._sink = None
            if branching:
                self.context.continuation_kind = ContinuationKind.INITIAL
                self.context.parent_loop_id = None
            if recorder is not None and not recorder.closed:
                try:
                    await recorder.sync()
                except Exception as exc:  # the run's result says so; runs do not raise
                    state.store_error = f"{type(exc).__name__}: {exc}"
        usage = state.usage + state.planning_usage + _take_child_usage(self.context)
        self.usage = self.usage + usage
        return self._result(new, usage, state)

    def _result(self, new: list[AgentMessage], usage: Usage, state: _RunState) -> RunResult[Any]:
        reason: Any = state.reason
        error: ErrorInfo | None = None
        for message in reversed(new):
            if isinstance(message, AssistantMessage) and message.error is not None:
                error = message.error
                break
        if error is None and reason in ("error", "limit"):  # a hook's failure, a limit
            error = self.context.state.get(LAST_ERROR_KEY)
        if self.output_type is not None and reason == "completed" and not state.has_output:
            reason = "error"
            error = ErrorInfo(
                kind="output_validation",
                message=state.output_error
                or f"the model did not call {OUTPUT_TOOL} with a final answer",
            )
        if reason == "completed":
            error = None
        if state.store_error is not None and error is None:
            reason = "error"
            error = ErrorInfo(
                kind="session", message=f"the session store failed: {state.store_error}"
            )
        return RunResult(
            messages=new,
            usage=usage,
            reason=reason,
            error=error,
            output=state.output if state.has_output else None,
            pending_tool_calls=self.context.pending_tool_calls if reason == "suspended" else [],
        )

    async def _plan(
        self, prompts: list[AgentMessage], state: _RunState, config: AgentLoopConfig
    ) -> list[AgentMessage]:
        system = self.context.resolve_system_prompt()
        request = ModelRequest(
            model=config.model_name,
            system_prompt=f"{system}\n\n{PLANNER_INSTRUCTION}" if system else PLANNER_INSTRUCTION,
            messages=[m for m in [*self.messages, *prompts] if m.role != "extension"],
            max_tokens=config.max_tokens,
        )
        message: AssistantMessage | None = None
        bridge = CancelBridge(self._token)  # abort() stops the planning call too
        try:
            with bridge.scope():
                async for event in self.provider.stream(request, cancel=self._token):
                    if isinstance(event, StreamDone):
                        message = event.message
        except ProviderError:
            # No plan then: the run itself reports a failing provider (runs do not raise).
            return prompts
        finally:
            bridge.close()
        if message is None:
            return prompts
        state.planning_usage = message.usage
        text = message.text.strip()
        steps = [
            m.group(1).strip() for m in re.finditer(r"^\s*\d+[.)]\s*(.+)$", text, re.MULTILINE)
        ]
        if not steps or text.upper().startswith("DIRECT"):
            return prompts  # seed 004: no numbered plan means answer directly
        state.plan = PlanCreated(plan=text, steps=steps)
        plan_message = message.model_copy(
            update={"content": [TextContent(text=text)], "stop_reason": "stop", "usage": Usage()}
        )
        return [*prompts, plan_message, UserMessage.of("Carry out the plan.")]


CHILD_USAGE_KEY = "treadle.child_usage"


def _take_child_usage(context: AgentContext) -> Usage:
    """Usage that sub-agents called from this context added (see SubAgentTool)."""
    usage = context.state.pop(CHILD_USAGE_KEY, None)
    return usage if isinstance(usage, Usage) else Usage()


def _usage_of(messages: Sequence[AgentMessage]) -> Usage:
    total = Usage()
    for message in messages:
        if isinstance(message, AssistantMessage):
            total = total + message.usage
    return total


class AgentStream(Generic[OutputT]):
    """The live events of one run; ``result`` is set when the run has ended."""

    def __init__(
        self, agent: Agent[OutputT], prompt: Any, deps: Any, settings: ModelSettings | None = None
    ) -> None:
        self._agent = agent
        self._prompt = prompt
        self._deps = deps
        self._settings = settings
        self._result: RunResult[OutputT] | None = None
        self._receive: MemoryObjectReceiveStream[AgentEvent] | None = None
        self._tg: Any = None

    async def __aenter__(self) -> AgentStream[OutputT]:
        self._agent._claim()
        send, receive = anyio.create_memory_object_stream[AgentEvent](self._agent.event_buffer)
        self._receive = receive
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._drive, send)
        return self

    async def _drive(self, send: MemoryObjectSendStream[AgentEvent]) -> None:
        try:
            async with send:
                self._result = await self._agent._run(
                    self._prompt, deps=self._deps, events=send, settings=self._settings
                )
        finally:
            self._agent._release()

    @property
    def finished(self) -> bool:
        """Whether the run has ended (``result`` is ready)."""
        return self._result is not None

    @property
    def result(self) -> RunResult[OutputT]:
        """The run's :class:`RunResult`, once it has ended (after the ``async with`` block, or
        after the last event). Reading it earlier raises ``RuntimeError``."""
        if self._result is None:
            raise RuntimeError(
                "the run has not ended yet: read events.result after the 'async with' block"
            )
        return self._result

    def __aiter__(self) -> AgentStream[OutputT]:
        return self

    async def __anext__(self) -> AgentEvent:
        assert self._receive is not None, "use 'async with agent.stream(...) as events'"
        try:
            # Drain what is buffered without a checkpoint per event (anyio's receive() makes
            # one each time); wait only when the buffer is empty.
            return self._receive.receive_nowait()
        except anyio.WouldBlock:
            pass
        except anyio.EndOfStream:
            raise StopAsyncIteration from None
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if self._result is None:
            self._agent.abort("immediate")
        assert self._receive is not None
        self._receive.close()
        if exc is not None and not isinstance(exc, anyio.get_cancelled_exc_class()):
            # The caller's own error: let the run close cleanly, then raise it as it is
            # (not wrapped in an ExceptionGroup).
            await self._tg.__aexit__(None, None, None)
            return False
        return bool(await self._tg.__aexit__(exc_type, exc, tb))
