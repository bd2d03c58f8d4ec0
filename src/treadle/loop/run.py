"""agent_loop, agent_loop_continue and run_loop: the turn loop (docs/contract.md §4)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..cancellation import CancellationToken
from ..errors import ConfigurationError
from ..types import (
    AgentEnd,
    AgentEndReason,
    AgentMessage,
    AgentStart,
    AssistantMessage,
    ContinuationKind,
    ErrorInfo,
    InputRejected,
    TurnEnd,
    TurnStart,
    TurnTrigger,
    Usage,
    UserMessage,
    now_ms,
)
from .arguments import _check_call, _prompts
from .compaction import ContextGuard
from .config import AgentLoopConfig
from .context import AgentContext
from .eager import EagerCalls, eager_turn
from .ending import after_loop, end_run
from .errors import HookFailed
from .sink import CURRENT_SINK, OBSERVED_SEQ, OBSERVERS
from .state import EventStream, RunState
from .streaming import StreamBounds, StreamState, close_message, stream_message
from .tool_exec import ToolBatch, ToolRaised


@dataclass
class LoopResult:
    """How :func:`run_loop` ended."""

    usage: Usage = field(default_factory=Usage)
    reason: AgentEndReason = "completed"
    error: ErrorInfo | None = None
    pending_tool_calls: list[str] = field(default_factory=list)


class _Run(RunState):
    """State of one loop call. Everything that was reported is tracked, so any way out
    (completion, error, cancellation from the token or from outside) closes what is open."""

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        events: EventStream | None,
        cancel: CancellationToken | None,
        new_messages: list[AgentMessage],
    ) -> None:
        super().__init__(context, config, events, cancel, new_messages)
        self.batch: ToolBatch | None = None
        self.eager_group: TaskGroup | None = None  # the turn's eager calls run here
        self.eager: EagerCalls | None = None  # those of the model call in progress
        self.stream_limit: str | None = None  # a limit cut the model call off mid-stream
        self.guard = ContextGuard(self)  # context size (compaction) and prices
        self.price = self.guard.price

    async def model_call(
        self,
        *,
        with_tools: bool = True,
        instruction: str | None = None,
        fallback_text: str | None = None,
    ) -> AssistantMessage:
        request = await self.build_request(with_tools=with_tools, instruction=instruction)
        provider = self.config.provider
        state = self.stream_state = StreamState(
            request, getattr(provider, "name", ""), snapshots=self.sink.active
        )
        message: AssistantMessage | None = None
        group = self.eager_group if with_tools else None
        eager = self.eager = EagerCalls(self, group) if group is not None else None
        with self.bridge.scope():
            message = await stream_message(
                provider,
                request,
                self.sink,
                self.config.retry,
                state,
                self.bridge.token,
                self.record_reply,
                fallback_text=fallback_text,
                text_only=not with_tools,
                on_overflow=self.guard.on_overflow(),
                bounds=self._bounds(),
                on_call=eager.offer if eager is not None else None,
                on_retry=eager.discard_attempt if eager is not None else None,
                coalesce=self.config.coalesce_deltas,
            )
        if message is None:  # cancelled mid-stream
            message = await close_message(
                self.sink, state, state.closed("aborted"), self.record_reply
            )
        self.stream_state = None
        if state.limit_reason is not None:
            self.stream_limit = state.limit_reason
        return message

    async def record_reply(self, message: AssistantMessage) -> None:
        eager, self.eager = self.eager, None
        if eager is None:
            await super().record_reply(message)
        else:  # eager calls meet the message's calls
            await eager.record(message, super().record_reply, self)

    def _bounds(self) -> StreamBounds:
        limits = self.config.limits
        deadline = None
        if limits.max_duration_s is not None:
            left = limits.max_duration_s - (anyio.current_time() - self.started_at)
            deadline = anyio.current_time() + max(0.0, left)
        room = None
        if limits.max_total_tokens is not None:
            used = self.usage.total_tokens + self.turn_usage.total_tokens
            room = max(0, limits.max_total_tokens - used)
        return StreamBounds(deadline, room, limits.max_idle_s, limits.max_call_duration_s)

    # ---- turns ----

    async def open_turn(self, trigger: TurnTrigger) -> None:
        self.turn_open = True
        self.turn_message = None
        self.turn_results = []
        self.turn_usage = Usage()
        await self.sink.emit(TurnStart, turn_index=self.turn_index, trigger=trigger)

    async def close_turn(self) -> None:
        if not self.turn_open:
            return
        message = self.turn_message
        failure: HookFailed | None = None
        if message is None:  # the turn ended before a model call: record that it was aborted
            message = self.turn_message = AssistantMessage(
                model=self.config.model_name,
                provider=getattr(self.config.provider, "name", ""),
                stop_reason="aborted",
            )
            try:
                await self.append(message)
            except HookFailed as exc:  # the turn still ends; the run ends with the error
                failure = exc
        self.turn_open = False
        self.usage = self.usage + self.turn_usage
        fields: dict[str, Any] = {
            "turn_index": self.turn_index,
            "message": message,
            "tool_results": self.turn_results,
            "usage": self.turn_usage,
        }
        event = await self.sink.emit(TurnEnd, **fields)
        if event is None:  # nobody listens; after_turn hooks still get a stamped event
            event = TurnEnd(
                loop_id=self.sink.loop_id, depth=self.sink.depth, timestamp=now_ms(), **fields
            )
        self.turn_index += 1
        if failure is not None:
            raise failure
        for hook in self.overriding("after_turn"):
            await self.call_hook(hook.after_turn, self.context, event)

    async def run_tools(self, calls: Any, *, resumed: bool = False) -> ToolBatch:
        batch = self.batch = self.batch or ToolBatch(self, calls, resumed=resumed)
        await batch.execute()
        await self.record_batch(batch, suspend=not self.bridge.immediate)  # cancelled: answered
        return batch

    async def record_batch(self, batch: ToolBatch, *, suspend: bool = False) -> None:
        """Answer the batch's calls and add their results (``suspend``: pending calls wait)."""
        results = await batch.finish(suspend=suspend and batch.raised is None)
        self.batch = None  # only now: a batch interrupted while it finishes is finished again
        self.tool_calls_run += len(results)
        self.turn_results.extend(results)
        self.due.extend(results)
        try:
            await self.append_all(self.due)  # every call keeps its result, hooks or not
        finally:
            if batch.raised is not None:
                raise ToolRaised(batch.raised)

    def limit_hit(self) -> str | None:
        limits = self.config.limits
        if limits.max_turns is not None and self.turn_index >= limits.max_turns:
            return f"reached max_turns={limits.max_turns}"
        if (
            limits.max_total_tokens is not None
            and self.usage.total_tokens >= limits.max_total_tokens
        ):
            used = self.usage.total_tokens
            return f"used {used} tokens of max_total_tokens={limits.max_total_tokens}"
        if limits.max_duration_s is not None:
            elapsed = anyio.current_time() - self.started_at
            if elapsed >= limits.max_duration_s:
                return f"ran {elapsed:.1f}s of max_duration_s={limits.max_duration_s:g}"
        if limits.max_cost_usd is not None and (self.usage.cost_usd or 0.0) >= limits.max_cost_usd:
            return f"cost ${self.usage.cost_usd:.4f} of max_cost_usd={limits.max_cost_usd:g}"
        if limits.max_tool_calls is not None and self.tool_calls_run >= limits.max_tool_calls:
            return f"ran {self.tool_calls_run} tool calls of max_tool_calls={limits.max_tool_calls}"
        return None

    async def on_limit(self, reason: str) -> None:
        limits = self.config.limits
        if limits.on_limit == "final_answer" and await self._turn_allowed():
            # a turn like any other: before_turn first, after_turn after its turn_end
            await self.open_turn(TurnTrigger.CONTINUATION)
            await self.model_call(
                with_tools=False,
                instruction=limits.final_answer_instruction.format(reason=reason),
                fallback_text=limits.final_answer_fallback.format(reason=reason),
            )
            await self.close_turn()
        else:
            await self.append(UserMessage.of(f"[Agent stopped: {reason}]"))

    async def _turn_allowed(self) -> bool:
        """The before_turn hooks, in order; False when one of them says no."""
        for hook in self.overriding("before_turn"):
            if not await self.call_hook(hook.before_turn, self.context, self.turn_index):
                return False
        return True

    async def turns(self, prompts: list[AgentMessage], pending: list[str]) -> LoopResult:
        """LOOP-SPEC §4.1, one turn at a time, until something ends the run."""
        trigger = self.config.first_turn_trigger if prompts else TurnTrigger.CONTINUATION
        first = True
        prompt_ids = self.prompt_ids = {id(m) for m in prompts}  # filtered already
        while True:
            if self.bridge.after_turn:
                await self.flush_inject()
                return LoopResult(reason="cancelled")
            hit = self.limit_hit()
            if hit is not None:
                await self.flush_inject()
                await self.on_limit(hit)
                return LoopResult(reason="limit", error=ErrorInfo(kind="limit", message=hit))
            self.inject.extend(await self._poll(self.config.get_steering_messages))
            if any(id(m) not in prompt_ids for m in self.inject):
                rejected = await self.filter_input(self.inject, frozenset(prompt_ids))
                if rejected is not None:
                    self.inject = []  # not taken
                    await self.sink.emit(InputRejected, reason=rejected.reason)
                    return LoopResult(reason="rejected")
            if not await self._turn_allowed():
                # A refusal: the run's own prompts are not taken (the caller has them), but
                # steering and follow-ups already taken from their callbacks join the
                # history, outside a turn: nothing the loop took is lost.
                self.inject = [m for m in self.inject if id(m) not in prompt_ids]
                await self.flush_inject()
                return LoopResult(reason="vetoed")
            await self.refresh_tools()
            await self.open_turn(trigger)
            if first and pending:
                assistant = self._last_assistant()
                calls = [c for c in assistant.tool_calls if c.id in pending] if assistant else []
                resumed = await self.run_tools(calls, resumed=bool(prompts))
                if resumed.pending_ids:
                    self.turn_message = assistant
                    await self.close_turn()
                    return LoopResult(reason="suspended", pending_tool_calls=resumed.pending_ids)
            first = False
            await self.flush_inject()

            async with eager_turn(self) as self.eager_group:  # eager calls: docs/loop.md
                message = await self.guard.check() or await self.model_call()  # §4.1 steps 4-5
                if self.stream_limit is not None:
                    await self.close_turn()
                    await self.flush_inject()
                    await self.on_limit(self.stream_limit)
                    return LoopResult(
                        reason="limit", error=ErrorInfo(kind="limit", message=self.stream_limit)
                    )
                if message.stop_reason == "error":
                    for hook in self.config.hooks:
                        await self.call_hook(hook.on_error, message)
                    await self.close_turn()
                    return LoopResult(reason="error", error=message.error)
                calls = message.tool_calls
                if message.stop_reason == "aborted":
                    if calls:
                        await self.record_batch(self.batch or ToolBatch(self, calls))
                    await self.close_turn()
                    return LoopResult(reason="cancelled")
                batch: ToolBatch | None = await self.run_tools(calls) if calls else None
            await self.close_turn()
            if batch is not None and batch.pending_ids:  # (not when cancelled by then)
                return LoopResult(reason="suspended", pending_tool_calls=batch.pending_ids)
            if self.bridge.immediate:
                return LoopResult(reason="cancelled")
            if batch is not None and batch.terminate:
                return LoopResult(reason="completed")
            if self.bridge.after_turn:
                return LoopResult(reason="cancelled")
            if calls:
                trigger = TurnTrigger.CONTINUATION
                continue
            if self.inject or await self.poll_steering():
                trigger = TurnTrigger.CONTINUATION
                continue
            follow_ups = await self._poll(self.config.get_follow_up_messages)
            if follow_ups:
                self.inject.extend(follow_ups)
                trigger = TurnTrigger.USER
                continue
            return LoopResult(reason="completed")

    def _last_assistant(self) -> AssistantMessage | None:
        for message in reversed(self.context.messages):
            if isinstance(message, AssistantMessage):
                return message
        return None

    async def close_open(self) -> None:
        """On any way out but a suspension: close the open message, answer open calls, close
        the turn, then add the steering and follow-ups taken for a turn that will not come,
        outside a turn. Each step runs whatever a hook did in the one before; the first
        failure is raised at the end (a tool's ``BaseException`` first)."""
        failures: list[Exception] = []
        for step in (self._close_message, self._close_calls, self.close_turn, self._close_input):
            try:
                await step()
            except (HookFailed, ToolRaised) as exc:
                failures.append(exc)
        failures.sort(key=lambda exc: not isinstance(exc, ToolRaised))
        if failures:
            raise failures[0]

    async def _close_message(self) -> None:
        state, self.stream_state = self.stream_state, None
        if state is None or not state.started:
            return
        try:
            if not state.ended:
                final = state.final or state.closed("aborted")
                await close_message(self.sink, state, final, self.record_reply)
        finally:
            message = state.final
            if message is not None and message.tool_calls and self.batch is None:
                self.batch = ToolBatch(self, message.tool_calls)

    async def _close_calls(self) -> None:
        await self.append_all(self.due)
        if self.batch is not None:
            await self.record_batch(self.batch)

    async def flush_inject(self) -> None:
        await self._close_calls()  # the results of calls still open come first
        await super().flush_inject()

    async def _close_input(self) -> None:
        self.inject = [m for m in self.inject if id(m) not in self.prompt_ids]
        await self.flush_inject()


async def _start(
    run: _Run,
    context: AgentContext,
    config: AgentLoopConfig,
    parent: str | None,
    kind: ContinuationKind,
) -> bool:
    """before_loop hooks then agent_start. False: vetoed (agent_end already sent)."""
    for hook in config.hooks:
        if not await run.call_hook(hook.before_loop, context):
            run.end_sent = True
            await run.sink.emit(AgentEnd, messages=[], usage=Usage(), reason="vetoed")
            return False
    await run.sink.emit(
        AgentStart,
        agent_id=context.agent_id,
        session_id=context.session_id,
        parent_loop_id=parent,
        parent_tool_call_id=context.parent_tool_call_id,
        continuation_kind=kind,
        config=config.snapshot(),
    )
    return True


async def _execute(
    run: _Run,
    prompts: list[AgentMessage],
    pending: list[str],
    kind: ContinuationKind,
) -> list[AgentMessage]:
    context, config = run.context, run.config
    result = LoopResult()
    started = False
    raised: BaseException | None = None
    observing = OBSERVERS.set(run.observers)  # sub-agents started by tools inherit them
    sinking = CURRENT_SINK.set(None)  # emit_custom_event: from agent_start to agent_end
    run.sink.run_started()
    counting = OBSERVED_SEQ.set(run.sink.observed_seq)  # ... and, without a stream, its seq
    try:
        try:
            started = await _start(run, context, config, context.parent_loop_id, kind)
            if started:
                CURRENT_SINK.set(run.sink)
            if not started:
                result.reason = "vetoed"
            elif prompts and (rejected := await run.filter_input(prompts)) is not None:
                # (a warning replaces a prompt in ``prompts`` by an edited copy)
                await run.sink.emit(InputRejected, reason=rejected.reason)
                result.reason = "rejected"
            else:
                run.inject = list(prompts)
                result = await run.turns(prompts, pending)
                if result.reason != "suspended":
                    await run.close_open()
        except HookFailed as exc:
            result = LoopResult(reason="error", error=ErrorInfo(kind="hook", message=str(exc)))
            if not started:
                started = True
                await run.sink.emit(
                    AgentStart,
                    agent_id=context.agent_id,
                    session_id=context.session_id,
                    parent_loop_id=context.parent_loop_id,
                    parent_tool_call_id=context.parent_tool_call_id,
                    continuation_kind=kind,
                    config=config.snapshot(),
                )
            raised = await _safe_close(run)
        except ToolRaised as exc:
            await _safe_close(run)
            raised = exc.original
        if raised is not None:  # a tool's BaseException: raised again after agent_end
            message = f"{type(raised).__name__}: {raised}"
            result = LoopResult(reason="error", error=ErrorInfo(kind="tool", message=message))
        if started:
            await _end(run, result)
        else:
            await after_loop(run, result.reason)
        if raised is not None:
            raise raised from None
        return run.new_messages
    except anyio.get_cancelled_exc_class():
        run.sink.start_grace()
        if not run.end_sent:
            with anyio.CancelScope(shield=True):
                await _safe_close(run)
                if started:
                    await _end(run, LoopResult(reason="cancelled"))
        raise
    finally:
        CURRENT_SINK.reset(sinking)
        OBSERVED_SEQ.reset(counting)
        OBSERVERS.reset(observing)
        run.bridge.close()
        run.sink.after_run()


async def _safe_close(run: _Run) -> BaseException | None:
    """``close_open`` for a run already ending with an error: a hook failing now changes
    nothing. Returns a tool's ``BaseException`` met on the way, to raise after the end."""
    try:
        await run.close_open()
    except ToolRaised as exc:
        return exc.original
    except HookFailed:
        pass  # the first failure stands; close_open closed everything regardless
    return None


async def _end(run: _Run, result: LoopResult) -> None:
    await end_run(run, result.reason, result.error, result.pending_tool_calls)


def _ensure_ids(context: AgentContext) -> None:
    if context.loop_id is None:
        context.loop_id = str(uuid.uuid4())
    if context.agent_id is None:
        context.agent_id = str(uuid.uuid4())
    if context.session_id is None:
        context.session_id = str(uuid.uuid4())


async def agent_loop(
    prompts: str | AgentMessage | Sequence[AgentMessage | str],
    context: AgentContext,
    config: AgentLoopConfig,
    events: EventStream | None = None,
    cancel: CancellationToken | None = None,
) -> list[AgentMessage]:
    """Start a run from new prompts; return the messages it added to ``context.messages``.

    ``prompts`` is a str (one user message), a message, or a list of them. Emits
    ``agent_start`` … ``agent_end`` on ``events`` (never closing it). Runtime failures end the
    run with a reason; only a caller's mistake (no prompts, wrong types) raises, before any
    event.
    """
    messages = _prompts(prompts)
    if not messages:
        raise ConfigurationError(
            "agent_loop needs at least one prompt; use agent_loop_continue to resume"
        )
    _check_call("agent_loop", context, config, events, cancel)
    _ensure_ids(context)
    pending = context.pending_tool_calls
    run = _Run(context, config, events, cancel, [])
    return await _execute(run, messages, pending, context.continuation_kind)


async def agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    events: EventStream | None = None,
    cancel: CancellationToken | None = None,
) -> list[AgentMessage]:
    """Carry on from the existing history (after an error, a tool-result message, a
    suspension whose approvals were given). The last message must not be an assistant
    message, unless it has tool calls waiting for approval."""
    _check_call("agent_loop_continue", context, config, events, cancel, first=1)
    if not context.messages:
        raise ConfigurationError(
            "agent_loop_continue needs a non-empty history; use agent_loop to start"
        )
    pending = context.pending_tool_calls
    last = context.messages[-1]
    if isinstance(last, AssistantMessage) and not pending:
        raise ConfigurationError(
            "the last message is an assistant message, so there is nothing to continue from; "
            "add a user message with agent_loop, or remove the last assistant message to retry it"
        )
    if context.agent_id is None or context.session_id is None:
        raise ConfigurationError(
            "agent_loop_continue needs context.agent_id and context.session_id from the run it "
            "continues (agent_loop writes them back); set them to continue a stored history"
        )
    if context.loop_id is None:
        context.loop_id = str(uuid.uuid4())
    kind = context.continuation_kind
    if kind == ContinuationKind.INITIAL:
        kind = ContinuationKind.DEFAULT
    run = _Run(context, config, events, cancel, [])
    return await _execute(run, [], pending, kind)


async def run_loop(
    context: AgentContext,
    new_messages: list[AgentMessage],
    config: AgentLoopConfig,
    events: EventStream | None = None,
    cancel: CancellationToken | None = None,
) -> LoopResult:
    """The turn loop alone, without agent_start/agent_end or input filtering of prompts:
    for callers that manage a run's framing themselves. Messages it adds are appended to both
    ``context.messages`` and ``new_messages``."""
    if context.loop_id is None:
        context.loop_id = str(uuid.uuid4())
    run = _Run(context, config, events, cancel, new_messages)
    try:
        raised: BaseException | None = None
        try:
            result = await run.turns([], context.pending_tool_calls)
            if result.reason != "suspended":
                await run.close_open()
        except HookFailed as exc:
            raised = await _safe_close(run)
            result = LoopResult(reason="error", error=ErrorInfo(kind="hook", message=str(exc)))
        except ToolRaised as exc:  # raise_tool_errors=True: the history is closed first
            await _safe_close(run)
            raised = exc.original
        if raised is not None:
            raise raised from None
        result.usage = run.usage
        return result
    except anyio.get_cancelled_exc_class():
        run.sink.start_grace()
        with anyio.CancelScope(shield=True):
            await _safe_close(run)
        raise
    finally:
        run.bridge.close()
