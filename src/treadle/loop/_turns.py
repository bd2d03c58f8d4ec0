"""One run's turns: model calls, tool batches, steering, and closing whatever is open on
any way out (docs/contract.md §4). The entry points are in ``run``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
from anyio.abc import ObjectSendStream, TaskGroup

from .._signals import HookFailed, ToolRaised
from ..cancellation import CancelBridge, CancellationToken
from ..providers.base import ModelRequest
from ..types import (
    AgentEndReason,
    AgentEvent,
    AgentMessage,
    AssistantMessage,
    CustomEvent,
    ErrorInfo,
    InputRejected,
    ToolCall,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
    TurnTrigger,
    Usage,
    UserMessage,
    now_ms,
)
from ._bounds import StreamBounds
from ._context_guard import ContextGuard
from ._dispatch import HookFn, hook_dispatch
from ._eager import EagerCalls, eager_possible, eager_turn
from ._scope import RunScope, unique_call_ids
from ._streaming import StreamState, close_message, stream_message
from ._tool_exec import ToolBatch
from .config import AgentLoopConfig, Reject, RunHandle
from .context import AgentContext
from .sink import EventSink

EventStream = ObjectSendStream[AgentEvent]


@dataclass
class LoopResult:
    """How :func:`run_loop` ended."""

    usage: Usage = field(default_factory=Usage)
    reason: AgentEndReason = "completed"
    error: ErrorInfo | None = None
    pending_tool_calls: list[str] = field(default_factory=list)


def _nested(outer: tuple[HookFn, ...], own: tuple[HookFn, ...]) -> tuple[HookFn, ...]:
    """The ``on_event`` methods a run calls: those of the runs it is nested in (a
    sub-agent's parents) first, then its own; a hook in both is called once."""
    if not outer:
        return own
    found = list(outer)
    found.extend(fn for fn in own if fn not in found)
    return tuple(found)


class Run:
    """One loop call: its turns and their state. What its parts share (context, config,
    hooks, sink, cancellation, tools) is its :class:`RunScope`; the parts (the tool batch,
    the eager calls, the context guard) get that and return what they produce. Everything
    reported is tracked here, so any way out (completion, error, cancellation from the
    token or from outside) closes what is open."""

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        events: EventStream | None,
        cancel: CancellationToken | None,
        new_messages: list[AgentMessage],
        parent: RunHandle | None = None,
    ) -> None:
        hooks = hook_dispatch(config)
        # a sub-agent's observers: its parents' (through the parent's handle), then its own
        watching = _nested(parent._observers if parent is not None else (), hooks.on_event)
        handle = RunHandle(self, parent, watching)
        sink = EventSink(
            events,
            context.loop_id or "",
            context.depth,
            tuple(partial(fn, handle) for fn in watching),
            merge=config.slow_consumer == "merge",
            max_bytes=config.slow_consumer_max_bytes,
            coalesce=config.coalesce_deltas,
        )
        bridge = CancelBridge(cancel)
        sink.own_cancel = lambda: bridge.immediate
        self.scope = RunScope(context, config, hooks, sink, bridge, handle, new_messages)
        self.context, self.config, self.hooks = context, config, hooks
        self.sink, self.bridge, self.handle = sink, bridge, handle
        self.new_messages = new_messages
        self.reporting = False  # custom events may be sent (between agent_start and agent_end)
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
        self.end_sent = False
        self.before_end_ran = False
        self.batch: ToolBatch | None = None
        self.eager_group: TaskGroup | None = None  # the turn's eager calls run here
        self.eager: EagerCalls | None = None  # those of the model call in progress
        self.stream_limit: str | None = None  # a limit cut the model call off mid-stream
        # Calls a continued run resumes, until its first turn takes them up, and calls a
        # batch left waiting for a decision: a run that ends before they are taken up leaves
        # them pending, as they were (contract §2.2).
        self.waiting: list[str] = []
        self.guard = ContextGuard(self.scope, self._spend)  # context size and prices

    def _spend(self, usage: Usage) -> None:
        """Usage of a call made for this turn besides its reply (a compaction summary)."""
        self.turn_usage = self.turn_usage + usage

    async def emit_custom(self, name: str, value: Any) -> CustomEvent | None:
        """``RunHandle.emit``: a custom event, while the run reports (None otherwise)."""
        if not self.reporting:
            return None
        event: CustomEvent | None = await self.sink.emit(CustomEvent, name=name, value=value)
        return event

    async def poll_steering(self) -> bool:
        """Collect steering messages for the next turn; True when any arrived."""
        got = await self.scope.poll(self.config.get_steering_messages)
        self.inject.extend(got)
        return bool(got)

    def new_batch(
        self, calls: Sequence[ToolCall], *, resumed: bool = False, waited: bool = False
    ) -> ToolBatch:
        return ToolBatch(
            self.scope, calls, steering=self.poll_steering, resumed=resumed, waited=waited
        )

    async def model_call(
        self,
        *,
        with_tools: bool = True,
        instruction: str | None = None,
        fallback_text: str | None = None,
    ) -> AssistantMessage:
        request = await self.scope.build_request(with_tools=with_tools, instruction=instruction)
        provider = self.config.provider
        state = self.stream_state = StreamState(
            request, getattr(provider, "name", ""), self.sink.active, text_only=not with_tools
        )
        message: AssistantMessage | None = None
        group = self.eager_group if with_tools else None
        eager = self.eager = (
            EagerCalls(self.scope, group, self.new_batch([]), self.tool_calls_run)
            if group is not None
            else None
        )
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
                tool_ran=eager.ran if eager is not None else None,
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
        """The model's answer for this turn: priced, counted in the turn's usage, recorded.
        (Assistant messages given as prompts are history, not this run's spending.) Eager
        calls meet the message's calls first: the batch is in place before the message is
        recorded, so any interruption finds every started call in it."""
        eager, self.eager = self.eager, None
        if eager is not None:
            self.batch = eager.reconcile(message)
        else:
            unique_call_ids(message)
        self.guard.price(message)
        self.turn_message = message
        self.turn_usage = self.turn_usage + message.usage
        await self.scope.record(message)
        if eager is not None:
            await eager.batch.end_discarded()  # before the message_end
            if not eager.batch.states:
                self.batch = None

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

    async def _check_context(self) -> AssistantMessage | None:
        """The context guard's check before a model call; past the hard limit, its error
        message is this turn's reply, reported and recorded as a streamed reply is (priced,
        counted, recorded), so a hook failing on it or a cancellation closes its pair the
        same way."""
        failed = await self.guard.check()
        if failed is None:
            return None
        state = self.stream_state = StreamState(ModelRequest(model=failed.model), failed.provider)
        message = await close_message(self.sink, state, failed, self.record_reply)
        self.stream_state = None
        return message

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
                await self.scope.append(message)
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
        self.turn_index += 1
        if failure is not None:
            raise failure
        hooks = self.hooks.after_turn
        if hooks and event is None:  # nobody listens; after_turn hooks still get an event
            event = TurnEnd(
                loop_id=self.sink.loop_id, depth=self.sink.depth, timestamp=now_ms(), **fields
            )
        for fn in hooks:
            await self.scope.call_hook(fn, self.handle, event)

    async def run_tools(
        self, calls: Any, *, resumed: bool = False, waited: bool = False
    ) -> ToolBatch:
        batch = self.batch = self.batch or self.new_batch(calls, resumed=resumed, waited=waited)
        await batch.execute()
        await self.record_batch(batch, suspend=not self.bridge.immediate)  # cancelled: answered
        return batch

    async def record_batch(self, batch: ToolBatch, *, suspend: bool = False) -> None:
        """Answer the batch's calls and add their results (``suspend``: pending calls wait)."""
        results = await batch.finish(suspend=suspend and batch.raised is None)
        self.batch = None  # only now: a batch interrupted while it finishes is finished again
        # Calls left waiting for a decision stay pending however the run ends from here (a
        # hook failing on a result or after the turn): listed in agent_end, never answered.
        self.waiting = batch.pending_ids
        self.tool_calls_run += len(results)
        self.turn_results.extend(results)
        self.due.extend(results)
        try:
            await self.scope.append_all(self.due)  # every call keeps its result, hooks or not
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
            await self.scope.append(UserMessage.of(f"[Agent stopped: {reason}]"))

    async def _turn_allowed(self) -> bool:
        """The before_turn hooks, in order; False when one of them says no."""
        for fn in self.hooks.before_turn:
            if not await self.scope.call_hook(fn, self.handle, self.turn_index):
                return False
        return True

    def _forget_stale(self, pending: list[str]) -> None:
        """Suspensions and decisions for calls this run does not resume are dropped: a
        decision never carries over to a later call that happens to get the same id."""
        context = self.context
        for records in (context.suspended, context.approvals):
            for call_id in [c for c in records if c not in pending]:
                del records[call_id]

    async def turns(self, prompts: list[AgentMessage], pending: list[str]) -> LoopResult:
        """One turn at a time (docs/contract.md §4), until something ends the run."""
        trigger = self.config.first_turn_trigger if prompts else TurnTrigger.CONTINUATION
        first = True
        prompt_ids = self.prompt_ids = {id(m) for m in prompts}  # filtered already
        self.waiting = list(pending)
        self._forget_stale(pending)
        # Steering is taken once the resumed calls are answered: a message taken before, in a
        # run that then ends before its first turn, would have no place in the history.
        deferred = bool(pending)
        while True:
            if self.bridge.after_turn:
                await self.flush_inject()
                return LoopResult(reason="cancelled")
            hit = self.limit_hit()
            if hit is not None:
                await self.flush_inject()
                await self.on_limit(hit)
                return LoopResult(reason="limit", error=ErrorInfo(kind="limit", message=hit))
            if not deferred and (rejected := await self._take_steering()) is not None:
                await self.sink.emit(InputRejected, reason=rejected.reason)
                return LoopResult(reason="rejected")
            if not await self._turn_allowed():
                # A refusal: the run's own prompts are not taken (the caller has them), but
                # steering and follow-ups already taken from their callbacks join the
                # history, outside a turn: nothing the loop took is lost.
                self.inject = [m for m in self.inject if id(m) not in prompt_ids]
                await self.flush_inject()
                return LoopResult(reason="vetoed")
            await self.scope.tools.refresh(self.context.tools, self.scope.call_hook)
            await self.open_turn(trigger)
            if first and pending:
                self.waiting = []
                assistant = self._last_assistant()
                calls = [c for c in assistant.tool_calls if c.id in pending] if assistant else []
                resumed = await self.run_tools(calls, resumed=bool(prompts), waited=True)
                if resumed.pending_ids:
                    self.turn_message = assistant
                    await self.close_turn()
                    return LoopResult(reason="suspended", pending_tool_calls=resumed.pending_ids)
                deferred = False
                if (rejected := await self._take_steering()) is not None:
                    self.turn_message = assistant
                    await self.close_turn()  # the turn that ran the calls ends first
                    await self.sink.emit(InputRejected, reason=rejected.reason)
                    return LoopResult(reason="rejected")
            first = False
            await self.flush_inject()

            possible = eager_possible(self.config, self.scope.tools)
            async with eager_turn(possible) as self.eager_group:  # eager calls: docs/loop.md
                message = await self._check_context() or await self.model_call()
                if self.stream_limit is not None:
                    await self.close_turn()
                    await self.flush_inject()
                    await self.on_limit(self.stream_limit)
                    return LoopResult(
                        reason="limit", error=ErrorInfo(kind="limit", message=self.stream_limit)
                    )
                if message.stop_reason == "error":
                    for fn in self.hooks.on_error:
                        await self.scope.call_hook(fn, self.handle, message)
                    await self.close_turn()
                    return LoopResult(reason="error", error=message.error)
                calls = message.tool_calls
                if message.stop_reason == "aborted":
                    if calls:
                        await self.record_batch(self.batch or self.new_batch(calls))
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
            follow_ups = await self.scope.poll(self.config.get_follow_up_messages)
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

    async def _take_steering(self) -> Reject | None:
        """Poll the steering callback into the messages waiting for the next turn and run
        the input filters over what is new; a rejection takes none of them."""
        self.inject.extend(await self.scope.poll(self.config.get_steering_messages))
        if any(id(m) not in self.prompt_ids for m in self.inject):
            rejected = await self.scope.filter_input(self.inject, frozenset(self.prompt_ids))
            if rejected is not None:
                self.inject = []  # not taken
                return rejected
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
                self.batch = self.new_batch(message.tool_calls)

    async def _close_calls(self) -> None:
        await self.scope.append_all(self.due)
        if self.batch is not None:
            await self.record_batch(self.batch)

    async def flush_inject(self) -> None:
        if self.waiting:  # a message after calls left pending would break the transcript
            self.inject = []  # dropped, as by a suspension (contract §2.2)
            return
        await self._close_calls()  # the results of calls still open come first
        # user messages waiting for a turn that will not come join the history anyway (as
        # message pairs outside a turn): the run ending early must not lose them
        await self.scope.append_all(self.inject)

    async def _close_input(self) -> None:
        self.inject = [m for m in self.inject if id(m) not in self.prompt_ids]
        await self.flush_inject()
