"""Agent: a stateful facade over agent_loop for scripts, servers and notebooks."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, Literal, NoReturn

from anyio.abc import ObjectSendStream
from anyio.streams.memory import MemoryObjectSendStream

from ..cancellation import CancellationToken, CancelMode
from ..errors import ConfigurationError
from ..loop import (
    AgentContext,
    AgentLoopConfig,
    ApprovalHandler,
    ExecutionLimits,
    Hooks,
    InputFilter,
    ModelSettings,
    RetryPolicy,
    ToolExecution,
)
from ..loop._scope import as_message
from ..loop.settings import validated_settings
from ..providers.base import Provider
from ..tools import Tool, open_toolsets
from ..types import (
    AgentEvent,
    AgentMessage,
    AssistantMessage,
    ContinuationKind,
    Usage,
    UserMessage,
)
from .forks import branch_agent, clone_agent, fork_agent
from .profile import Profile, run_ephemeral
from .result import AgentBusy, AgentSnapshot, RunResult
from .result import AgentOutputT as OutputT
from .runs import run_agent
from .settings import AgentOptions, checked_parts, removed_keyword_error, resolve_model
from .stream import AgentStream
from .sync import run_blocking
from .tally import (
    OUTPUT_TOOL,
    AgentHooks,
    RunTally,
    output_adapter,
    usage_of,
)

if TYPE_CHECKING:
    from ..context.compacting import CompactionResult
    from ..sessions import SessionRecorder, SessionStore

SteerMode = Literal["after_batch", "next_tool", "interrupt"]


class Agent(Generic[OutputT]):
    """A conversation with a model and tools, kept between runs (arguments: :meth:`__init__`).

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
        model_settings: ModelSettings | None = None,
        deps: Any = None,
        limits: ExecutionLimits | None = None,
        retry: RetryPolicy | None = None,
        approval_handler: ApprovalHandler | None = None,
        compaction: Any = None,
        planning: bool = False,
        name: str = "agent",
        store: SessionStore | None = None,
        session_id: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        options: AgentOptions | None = None,
        **removed: NoReturn,
    ) -> None:
        """Make an agent; nothing is sent to the model until a run.

        Args:
            model: A model string (``"openai:gpt-4o-mini"``) or a
                :class:`~treadle.Provider` object.
            tools: Tools (``@tool`` functions, :class:`~treadle.Tool` objects, toolsets).
            system_prompt: The system prompt, or a callable rebuilt on every model call.
            hooks: :class:`~treadle.Hooks` objects, called in order.
            input_filters: :class:`~treadle.loop.InputFilter` objects that screen prompts.
            output_type: A pydantic model or any type: runs produce a validated
                ``RunResult.output``.
            model_settings: Sampling settings for every run
                (:class:`~treadle.ModelSettings`: ``{"temperature": 0.2}``).
            deps: Handed to tools as ``ctx.deps`` (a run's own ``deps`` wins).
            limits: Runaway guards (:class:`~treadle.loop.ExecutionLimits`).
            retry: Retries of failed model calls (:class:`~treadle.loop.RetryPolicy`).
            approval_handler: Answers a hook's :class:`~treadle.Ask` in process; without
                one the run suspends for approval.
            compaction: A ``CompactionPolicy`` (``True``: the defaults).
            planning: Add a tool-free planning call before each run.
            name: The agent's name (its tool name as a sub-agent).
            store: A :class:`~treadle.sessions.SessionStore`: the conversation is durable.
            session_id: The stored session to resume, or the id of a new one.
            api_key: With a model string: the key to use instead of the environment's.
            base_url: With a model string: the server to talk to.
            options: Rarely changed knobs (:class:`~treadle.agent.AgentOptions`).

        Raises:
            UsageError: a keyword ``Agent()`` no longer takes (``temperature=``: use
                ``model_settings=``), or a model it cannot use.
            ConfigurationError: a bad setting value (``{"top_p": 2}``).
            SessionLocked: another Agent holds ``session_id``'s write lock.
        """
        if removed:
            raise removed_keyword_error(removed)
        options = options or AgentOptions()
        self.provider: Provider = resolve_model(model, api_key=api_key, base_url=base_url)
        self._owns_provider = isinstance(model, str)
        self.name = name
        self.description = ""
        self.output_type = output_type
        if output_type is not None:
            output_adapter(output_type)  # a type pydantic cannot take fails here, not mid-run
        self.output_retries = options.output_retries
        self.planning = planning
        self.max_depth = options.max_depth
        self.event_buffer = options.event_buffer
        self.coalesce_deltas = options.coalesce_deltas
        self.deps = deps
        tools, self._user_hooks, filters = checked_parts(tools, system_prompt, hooks, input_filters)
        self._settings: dict[str, Any] = {
            "input_filters": filters,
            "limits": limits or ExecutionLimits(),
            "retry": retry or RetryPolicy(),
            "tool_execution": options.tool_execution or ToolExecution(),
            "tool_timeout": options.tool_timeout,
            "model_settings": validated_settings(
                model_settings or {}, where="Agent(model_settings=...)"
            ),
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
        self._toolsets: AbstractAsyncContextManager[None] | None = None
        self.store = store
        self.resume_tool_calls = options.resume_tool_calls
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
        self.context.suspended.clear()
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

        The branch shares this agent's provider and its HTTP client without owning them:
        closing the branch leaves them open (a run of this agent in flight goes on); this
        agent closes them.

        With a store the branch is a new session that records its parent and branch point
        and shares the prefix without copying it. Its first run reports
        ``continuation_kind="branch"`` with this agent's last loop as ``parent_loop_id``. A
        branch point inside a batch of tool calls gives the calls left unanswered the result
        ``Cancelled``.
        """
        self._check_idle("branch")
        return branch_agent(self, at_index)

    def fork(
        self, session_id: str | None = None, *, store: SessionStore | None = None
    ) -> Agent[OutputT]:
        """A new Agent with this one's model, tools and settings and a conversation of its
        own (one per user or chat, in a server): with a store (``store``, else this agent's)
        the session ``session_id``, resumed or created; without one, an empty history."""
        return fork_agent(self, session_id, store)

    def close(self) -> None:
        """Release the stored session's write lock (another Agent may then resume it). Runs
        after this raise. Nothing to do without a store. Idempotent."""
        self._check_idle("close")
        if self._recorder is not None:
            self._recorder.close()

    async def aclose(self) -> None:
        """Close what this Agent opened: toolsets ``async with agent:`` started (from that
        task), the session lock, and a provider it made from a model string."""
        toolsets, self._toolsets = self._toolsets, None
        try:
            if toolsets is not None:
                await toolsets.__aexit__(None, None, None)
        finally:
            self.close()
            closer = getattr(self.provider, "aclose", None)
            if self._owns_provider and closer is not None:
                await closer()

    async def __aenter__(self) -> Agent[OutputT]:
        """Start the toolsets that need it (MCP servers ...); they stop when the block ends."""
        toolsets = open_toolsets(self.context.tools)
        await toolsets.__aenter__()
        self._toolsets = toolsets
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
        item = as_message(message)  # a dict gets the same clear error as a dict prompt
        if mode == "after_batch":
            self._steer_after.append(item)
        elif mode == "next_tool":
            self._steer_next.append(item)
        elif mode == "interrupt":
            self._interrupts.append(item)
            if self._token is not None:
                self._token.cancel("immediate", reason="interrupted by a steering message")
        else:
            raise ConfigurationError("mode must be 'after_batch', 'next_tool' or 'interrupt'")

    def follow_up(self, message: str | AgentMessage) -> None:
        """A message to handle after the run would otherwise end (it keeps going)."""
        self._follow_ups.append(as_message(message))

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
        """Run to the end and return the result.

        Args:
            prompt: A str (one user message), a message, or a list of messages.
            deps: This run's ``ctx.deps`` (default: the agent's).
            model_settings: Overrides the agent's model settings for this run only.

        Returns:
            The run's :class:`~treadle.RunResult`. Runtime failures do not raise: look at
            ``result.reason`` / ``result.error`` (or call ``result.raise_for_error()``).

        Raises:
            AgentBusy: a run of this agent is already in progress.
            UsageError: a prompt of a type it cannot take (a dict ...), unknown settings.
            ConfigurationError: a bad setting value.
        """
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
        hooks: Sequence[Hooks] = (),
    ) -> AgentStream[OutputT]:
        """``async with agent.stream(prompt) as events: async for event in events: ...``.

        Leaving the block early aborts the run (and still waits for it to close cleanly).

        Args:
            prompt: As for :meth:`run`.
            deps: As for :meth:`run`.
            model_settings: As for :meth:`run`.
            hooks: Hooks for this run only, after the agent's own.

        Returns:
            An :class:`~treadle.agent.AgentStream`: an async context manager whose value
            iterates the run's events; ``events.result`` holds the RunResult afterwards.

        Raises:
            AgentBusy: on entering the block, when a run is already in progress.
        """

        async def run(events: MemoryObjectSendStream[AgentEvent]) -> RunResult[OutputT]:
            return await self._run(
                prompt, deps=deps, events=events, settings=model_settings, hooks=hooks
            )

        return AgentStream(
            run,
            claim=self._claim,
            release=self._release,
            abort=self.abort,
            buffer=self.event_buffer,
        )

    def run_sync(
        self,
        prompt: str | AgentMessage | Sequence[AgentMessage],
        *,
        deps: Any = None,
        model_settings: ModelSettings | None = None,
    ) -> RunResult[OutputT]:
        """Blocking :meth:`run`, for scripts and notebooks. Inside a running event loop (a
        Jupyter cell) the run gets its own loop in a worker thread, so no nest_asyncio is
        needed.

        Args:
            prompt: As for :meth:`run`.
            deps: As for :meth:`run`.
            model_settings: As for :meth:`run`.

        Returns:
            The run's :class:`~treadle.RunResult`.

        Raises:
            AgentBusy: a run of this agent is already in progress.
        """

        call = partial(self.run, prompt, deps=deps, model_settings=model_settings)
        closer = getattr(self.provider, "aclose", None) if self._owns_provider else None
        return run_blocking(call, then=closer, stop=self.abort)

    def continue_sync(self, *, deps: Any = None) -> RunResult[OutputT]:
        """Blocking :meth:`continue_`, for scripts and notebooks (as :meth:`run_sync` is to
        :meth:`run`): carry on after a suspended ``run_sync`` once approvals are given."""
        call = partial(self.continue_, deps=deps)
        closer = getattr(self.provider, "aclose", None) if self._owns_provider else None
        return run_blocking(call, then=closer)

    async def continue_(self, *, deps: Any = None) -> RunResult[OutputT]:
        """Carry on after an error or abort (the failed assistant message is dropped and the
        last turn tried again), or after a suspension once approvals are given.

        Args:
            deps: This run's ``ctx.deps`` (default: the agent's).

        Returns:
            The run's :class:`~treadle.RunResult`.

        Raises:
            AgentBusy: a run of this agent is already in progress.
            ConfigurationError: nothing to continue (an empty or answered history).
        """
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
        from ..loop._context_guard import compact_context

        self._claim()
        try:
            state = RunTally(self.output_retries)
            config = self._config(state, None)
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
        self, prompt: str | AgentMessage, *, deps: Any = None, profile: Profile | None = None
    ) -> RunResult[OutputT]:
        """A run on a copy of the conversation: nothing stored here changes, and nothing is
        written to the session store. ``profile`` (a :class:`Profile`) sets that run's
        system prompt, tools, planning and turn cap."""
        result: RunResult[OutputT] = await run_ephemeral(self, prompt, deps=deps, profile=profile)
        return result

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a tool for another agent (a sub-agent). Its events are forwarded onto
        the parent's stream with their own loop_id and depth; its usage is added to the
        parent's; cancelling the parent cancels it."""
        from .subagent import SubAgentTool

        return SubAgentTool(self, name or self.name, description or self.description)

    # ---- internals ----

    def _clone(self) -> Agent[OutputT]:
        """A copy sharing settings, with no run state and no session (give it a context)."""
        return clone_agent(self)

    def _open_session(self, store: SessionStore, session_id: str | None) -> None:
        from ..sessions import SessionRecorder

        rerun = self.resume_tool_calls == "rerun_idempotent"
        self._recorder = SessionRecorder.open(store, self.context, session_id, rerun=rerun)
        self.usage = usage_of(self.context.messages)

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

    def _config(self, state: RunTally, deps: Any, extra: Sequence[Hooks] = ()) -> AgentLoopConfig:
        hooks: list[Hooks] = [AgentHooks(state), *self._user_hooks, *extra]
        return AgentLoopConfig(
            provider=self.provider,
            hooks=hooks,
            deps=deps if deps is not None else self.deps,
            get_steering_messages=partial(self._poll_steering, state),
            get_follow_up_messages=partial(self._poll_follow_ups, state),
            steering_mode="next_tool",
            coalesce_deltas=self.coalesce_deltas,
            **self._settings,
        )

    def _poll_steering(self, state: RunTally) -> list[AgentMessage]:
        taken = self._steer_next[:]
        del self._steer_next[: len(taken)]
        if not state.in_tools:
            after = self._steer_after[:]
            del self._steer_after[: len(after)]
            taken.extend(after)
        return taken

    def _poll_follow_ups(self, state: RunTally) -> list[AgentMessage]:
        if self.output_type is not None and not state.has_output and state.output_error is None:
            if state.nudges < self.output_retries:
                state.nudges += 1
                return [UserMessage.of(f"Call the {OUTPUT_TOOL} tool with your final answer.")]
        taken = self._follow_ups[:]
        del self._follow_ups[: len(taken)]
        return taken

    async def _run(
        self,
        prompt: Any,
        *,
        deps: Any,
        events: ObjectSendStream[AgentEvent] | None,
        settings: ModelSettings | None = None,
        hooks: Sequence[Hooks] = (),
    ) -> RunResult[OutputT]:
        result: RunResult[OutputT] = await run_agent(
            self, prompt, deps=deps, events=events, settings=settings, hooks=hooks
        )
        return result
