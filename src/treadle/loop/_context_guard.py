"""The loop's side of context management (docs/contract.md §4 and docs/context.md).

:class:`ContextGuard` belongs to one loop call. Before each model call it estimates the
request (anchored on the last reported usage, so one turn costs O(new messages);
calibrated to the provider's own counts, see :mod:`treadle.context.calibration`), compacts
past the policy's trigger, and fails the turn past the hard limit instead of sending a
request the provider would refuse. When a provider answers ``context_overflow`` anyway, it
learns the sizes the error names, compacts harder and the call is retried, at most
:data:`~.streaming.OVERFLOW_RETRIES` times. It also prices assistant messages from the
model catalog when the provider did not.

What the history looks like after a compaction: ``context.messages`` is replaced in place
(same list object) by the compacted history. ``agent_end.messages`` (and the loop's return
value) still lists every message this loop appended, as it was appended and reported by
``message_start`` / ``message_end``: compaction rewrites the working history, not the record
of what happened, so those messages may no longer all be in ``context.messages``. The
``compaction_end`` event and the ``after_compaction`` hook report the rewrite.

The context package is imported on first use, so ``import treadle`` does not pay for it.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ..errors import UsageError
from ..providers.base import ModelRequest, Provider, ProviderError
from ..tools import Tool, tool_spec
from ..types import (
    AssistantMessage,
    CompactionEnd,
    CompactionStart,
    ErrorInfo,
    Usage,
)
from ._dispatch import hook_dispatch
from ._streaming import OVERFLOW_RETRIES
from .config import RunHandle
from .sidecall import call_model, side_request
from .sink import EventSink

if TYPE_CHECKING:
    from anyio.abc import ObjectSendStream

    from ..cancellation import CancellationToken
    from ..context.calibration import Calibration
    from ..context.catalog import ModelInfo
    from ..context.compacting import CompactionResult
    from ..context.compaction import CompactionPolicy, SummaryCall
    from ..context.tokens import ContextEstimate, ContextTracker, TokenCounter
    from ..types import AgentEvent
    from ._scope import RunScope
    from .config import AgentLoopConfig
    from .context import AgentContext

logger = logging.getLogger("treadle.context")

FLOOR_KEY = "treadle.context.floor"
"""``context.state`` key: the history length right after the last compaction. Usage that
assistant messages before it reported describes the history before it was compacted, so
estimates do not anchor on it (an int, so the state stays JSON-friendly)."""

PRELOAD_TIMEOUT_S = 5.0
"""How long the first estimate waits for tiktoken to load an encoding in a worker thread
before it settles for the heuristic (the event loop never blocks on the load)."""

QUICK_UNANCHORED = 16
"""Histories up to this length without reported usage are bounded by their byte length
before anything is tokenised (the first turn of a conversation)."""

OVERFLOW_SHRINK = 0.75
"""After a provider's context_overflow, compact to at most this share of the estimate."""

OVERFLOW_HARDER = 0.85
"""Each further overflow of the same call lowers the target by this factor again."""

OverflowHandler = Callable[
    [ProviderError, ModelRequest], Awaitable[ModelRequest | ProviderError | None]
]
"""After a ``context_overflow``: the request to retry with, the error to end the call with
(compaction could not help), or ``None`` (the error stands as it is)."""


def as_policy(value: Any) -> CompactionPolicy | None:
    """``AgentLoopConfig.compaction`` as a policy: ``None``/``False`` (off), ``True`` (the
    defaults), a :class:`CompactionPolicy`, or a dict of its fields."""
    if value is None or value is False:
        return None
    from ..context.compaction import CompactionPolicy

    if value is True:
        return CompactionPolicy()
    if isinstance(value, CompactionPolicy):
        return value
    if isinstance(value, Mapping):
        return CompactionPolicy(**value)
    raise UsageError(
        "AgentLoopConfig.compaction must be a CompactionPolicy, a dict of its fields, True "
        f"(defaults) or None, not {type(value).__name__}"
    )


async def prepare_counter(counter: TokenCounter) -> None:
    """Load ``counter``'s tiktoken encoding in a worker thread (the event loop never waits
    on it); if that takes longer than :data:`PRELOAD_TIMEOUT_S`, settle for the heuristic."""
    from ..context.tokens import encoding_loaded, encoding_loading, load_encoding

    for name in counter.candidates():
        if not encoding_loaded(name) and not encoding_loading(name):
            with anyio.move_on_after(PRELOAD_TIMEOUT_S):
                await anyio.to_thread.run_sync(load_encoding, name, abandon_on_cancel=True)
        if encoding_loaded(name) and load_encoding(name) is not None:
            break
    counter.use_loaded_only()


class ContextGuard:
    """Context size and prices for one loop call (see the module docs)."""

    def __init__(self, scope: RunScope, spend: Callable[[Usage], None]) -> None:
        self.scope = scope
        self.spend = spend  # counts a summary call's usage in the turn's
        self.policy = as_policy(scope.config.compaction)
        self._prices: dict[tuple[str, str], ModelInfo | None] = {}
        self._tracker: ContextTracker | None = None
        self._loaded = False
        self._window: int | None = None
        self._warned = False
        self._calibration: Calibration | None = None
        self._calibrated_on: AssistantMessage | None = None  # the anchor last calibrated on
        self.last_result: CompactionResult | None = None

    # ---- prices ----

    def price(self, message: AssistantMessage) -> None:
        """Fill ``message.usage.cost_usd`` from the catalog when the provider did not."""
        usage = message.usage
        if usage.cost_usd is not None:
            return
        config = self.scope.config
        key = (message.provider or getattr(config.provider, "name", ""), message.model)
        try:
            info = self._prices[key]
        except KeyError:
            info = self._prices[key] = self._model_info(key[1] or config.model_name, key[0])
        if info is None:
            return
        from ..context.catalog import with_cost

        filled = with_cost(usage, info)
        if filled is not usage:
            message.usage = filled

    def _model_info(self, model: str, provider: str) -> ModelInfo | None:
        if self.policy is not None:
            return self.policy.model_for(model, provider)
        from ..context.catalog import lookup_model

        return lookup_model(model, provider)

    # ---- estimates ----

    @property
    def window(self) -> int:
        """The policy's context window, or the smaller one an overflow error named."""
        if self._window is None:
            assert self.policy is not None
            config = self.scope.config
            name = getattr(config.provider, "name", None)
            window = self.policy.window_for(config.model_name, name)
            learned = self.calibration.window
            self._window = min(window, learned) if learned else window
        return self._window

    # ---- calibration ----

    @property
    def _calibration_key(self) -> str:
        config = self.scope.config
        return f"{getattr(config.provider, 'name', '') or ''}:{config.model_name}"

    @property
    def calibration(self) -> Calibration:
        """What this context learned about the provider's counts (kept in its state)."""
        if self._calibration is None:
            from ..context.calibration import Calibration

            self._calibration = Calibration.load(self.scope.context.state, self._calibration_key)
        return self._calibration

    def _recalibrated(self) -> None:
        calibration = self.calibration
        calibration.save(self.scope.context.state, self._calibration_key)
        self._window = None
        if self._tracker is not None:
            self._tracker.scale = calibration.ratio
            self._tracker.reset()  # running totals were in the old scale

    async def _calibrate_on(self, tracker: ContextTracker, index: int) -> bool:
        """Set the ratio from the usage the anchor at ``index`` reported for its request
        (the history before it, the system prompt and the tools), once per anchor."""
        messages = self.scope.context.messages
        anchor = messages[index]
        if anchor is self._calibrated_on or not isinstance(anchor, AssistantMessage):
            return False
        self._calibrated_on = anchor
        usage = anchor.usage
        reported = usage.input + usage.cache_read + usage.cache_write
        counted = tracker.raw(messages[:index]) + await self._fixed_raw(tracker)
        if not self.calibration.observe(reported, counted):
            return False
        self._recalibrated()
        return True

    def _current_tracker(self) -> ContextTracker:
        """The tracker, created on first use; its tokenizer is not loaded yet."""
        if self._tracker is None:
            from ..context.tokens import ContextTracker

            assert self.policy is not None
            self._tracker = ContextTracker(
                self.policy.counter(self.scope.config.model_name), scale=self.calibration.ratio
            )
        state = self.scope.context.state
        floor = state.get(FLOOR_KEY)
        if isinstance(floor, int):
            if 0 <= floor <= len(self.scope.context.messages):
                self._tracker.floor = max(self._tracker.floor, floor)
            else:  # the history was cleared or replaced since: the mark means nothing now
                del state[FLOOR_KEY]
        return self._tracker

    async def tracker(self) -> ContextTracker:
        """The tracker with its tokenizer ready. tiktoken loads its encoding in a worker
        thread (never blocking the event loop); if that takes too long, this run counts
        with the heuristic. Runs far below the window never get here, so they never load
        tiktoken (some 40 MB)."""
        tracker = self._current_tracker()
        if not self._loaded:
            await prepare_counter(tracker.counter)
            self._loaded = True
        return tracker

    async def _fixed(self, tracker: ContextTracker) -> int:
        return tracker.scaled(await self._fixed_raw(tracker))

    async def _fixed_raw(self, tracker: ContextTracker) -> int:
        scope = self.scope
        system = await scope.call_hook(scope.context.resolve_system_prompt)
        return tracker.fixed_raw(system, scope.tools.specs, scope.tools.key)

    async def _quick_bound(self) -> float:
        """An upper bound of the estimate that tokenises nothing (inf when there is no cheap
        one: a long history without reported usage)."""
        from ..context.tokens import text_bound, token_bound

        tracker = self._current_tracker()
        messages = self.scope.context.messages
        bound = tracker.upper_bound(messages)
        if bound is not None:
            return bound
        if len(messages) > QUICK_UNANCHORED:
            return math.inf
        scope = self.scope
        system = await scope.call_hook(scope.context.resolve_system_prompt)
        tools = sum(text_bound(spec.model_dump_json()) for spec in scope.tools.specs)
        return text_bound(system or "") + tools + sum(token_bound(m) for m in messages)

    async def estimate(self) -> ContextEstimate:
        """Tokens the next request will take."""
        tracker = await self.tracker()
        messages = self.scope.context.messages
        found = tracker.anchored(messages)
        if found is not None:
            assert found.anchor_index is not None
            if await self._calibrate_on(tracker, found.anchor_index):
                found = tracker.anchored(messages)
                assert found is not None
            return found
        return tracker.counted(messages, await self._fixed(tracker))

    # ---- before a model call ----

    async def check(self) -> AssistantMessage | None:
        """Before a model call: compact past the trigger; past the hard limit, return an
        error message (``context_overflow``, not reported yet: the run reports it as the
        turn's reply), so the turn fails without calling the model. ``None``: go ahead."""
        policy = self.policy
        if policy is None:
            return None
        budget = policy.budget(self.window)
        if await self._quick_bound() <= policy.warn_at * budget:
            return None  # certainly below every threshold: no need to tokenise anything
        tokens = (await self.estimate()).tokens
        if tokens > policy.warn_at * budget and not self._warned:
            self._warned = True
            logger.warning(
                "the conversation uses about %s of %s context tokens (%.0f%%)",
                f"{tokens:,}",
                f"{budget:,}",
                100 * tokens / budget,
            )
        if tokens > policy.compact_at * budget:
            tokens = await self.compact(tokens, "threshold")
            if self.scope.bridge.immediate:
                return None  # cancelled meanwhile: the model call records the abort
        if policy.fail_at is not None and tokens > policy.fail_at * budget:
            return self._fail(tokens, int(policy.fail_at * budget))
        return None

    def _fail(self, tokens: int, limit: int) -> AssistantMessage:
        config = self.scope.config
        assert self.policy is not None and self.policy.fail_at is not None
        return AssistantMessage(
            model=config.model_name,
            provider=getattr(config.provider, "name", ""),
            stop_reason="error",
            error=ErrorInfo(
                kind="context_overflow",
                message=(
                    f"the request would take about {tokens:,} tokens, over the limit of "
                    f"{limit:,} ({self.policy.fail_at:.0%} of the {self.window:,}-token "
                    "context window) even after compaction; the model was not called"
                ),
            ),
        )

    # ---- compaction ----

    async def compact(self, estimate: int, reason: str, target: int | None = None) -> int:
        """Run the hooks, the events and the policy's strategies; replace the history.
        Returns the estimate afterwards."""
        from ..context.compacting import compact

        scope = self.scope
        policy = self.policy
        assert policy is not None
        for fn in scope.hooks.before_compaction:
            if not await scope.call_hook(fn, scope.handle, estimate):
                return estimate
        context = scope.context
        before = len(context.messages)
        await scope.sink.emit(
            CompactionStart, tokens_before=estimate, messages_before=before, reason=reason
        )
        tracker = await self.tracker()
        result: CompactionResult | None = None
        try:
            system = await scope.call_hook(context.resolve_system_prompt)
            with scope.bridge.scope():
                result = await compact(
                    list(context.messages),
                    policy=policy,
                    provider=scope.config.provider,
                    model=scope.config.model_name,
                    system_prompt=system,
                    tools=list(scope.tools.specs),
                    context_window=self.window,
                    target_tokens=target,
                    tracker=tracker,
                    cancel=scope.bridge.token,
                    reason=reason,
                    force=False,
                    complete=summary_call(scope.config, scope.bridge.token, scope.handle),
                )
        finally:
            if result is None:  # cancelled: the history is as it was
                with anyio.CancelScope(shield=True):
                    await scope.sink.emit(
                        CompactionEnd,
                        tokens_before=estimate,
                        tokens_after=estimate,
                        messages_before=before,
                        messages_after=before,
                        reason=reason,
                    )
        if result is None:
            return estimate
        self.last_result = result
        if result.changed:
            context.messages[:] = result.messages
            tracker.reset(context.messages)
            context.state[FLOOR_KEY] = len(context.messages)
            tokens = reported = result.tokens_after
        elif not result.cancelled and result.tokens_before <= result.target:
            # Counting says the history is small: the usage we anchored on was reported
            # before an earlier compaction (a restored session). Stop anchoring on it. The
            # history is unchanged, so the events claim no savings: the estimate was off.
            tracker.floor = len(context.messages)
            tokens, reported = result.tokens_before, estimate
        else:
            tokens = reported = estimate
        if result.usage != Usage():
            self.spend(result.usage)
        await scope.sink.emit(
            CompactionEnd,
            tokens_before=estimate,
            tokens_after=reported,
            messages_before=before,
            messages_after=len(context.messages),
            strategy=result.strategy,
            reason=reason,
            summary=result.summary,
            usage=result.usage,
        )
        stats = {**result.stats(), "tokens_before": estimate, "tokens_after": reported}
        for fn in scope.hooks.after_compaction:
            await scope.call_hook(fn, scope.handle, stats)
        return tokens

    # ---- context_overflow from the provider ----

    def on_overflow(self) -> OverflowHandler | None:
        """For one model call: a handler that, after a ``context_overflow``, learns what the
        error says (the request's size in the provider's tokens, its real limit), compacts
        to fit — harder on each further overflow — and returns the request to retry with;
        or the error to end the call with when nothing more can be dropped or the
        :data:`OVERFLOW_RETRIES` compactions are spent. ``None`` without a policy."""
        if self.policy is None:
            return None
        tried: list[str] = []

        async def handle(
            error: ProviderError, request: ModelRequest
        ) -> ModelRequest | ProviderError | None:
            sent = await self._learn_from(error)
            assert self.policy is not None
            while len(tried) < OVERFLOW_RETRIES:
                estimate = (await self.estimate()).tokens
                if sent is not None:  # the size of this very history, as the provider counted
                    estimate, sent = max(estimate, sent), None
                budget = self.policy.budget(self.window)
                share = min(budget * self.policy.compact_to, estimate * OVERFLOW_SHRINK)
                target = int(share * OVERFLOW_HARDER ** len(tried))
                # compaction weighs messages by counting them: when the provider's size is
                # larger still (the ratio is capped), aim lower in the same proportion
                tracker = await self.tracker()
                messages = self.scope.context.messages
                counted = tracker.counted(messages, await self._fixed(tracker)).tokens
                if 0 < counted < estimate:
                    target = int(target * counted / estimate)
                self.last_result = None
                after = await self.compact(estimate, "overflow", target)
                result = self.last_result
                if result is None or not result.changed or after >= estimate:
                    # Nothing changed, a hook skipped it, or nothing shrank: the error
                    # stands, and says so rather than sending the same request again.
                    return self._overflow_error(error, tried, exhausted=False)
                tried.append(f"{result.strategy}, to about {after:,} tokens")
                known = self.calibration.window
                if known is None or after <= known:
                    messages = await self.scope.request_messages()
                    return request.model_copy(update={"messages": messages})
                # still larger than the size the provider named: harder, before sending
            return self._overflow_error(error, tried, exhausted=True)

        return handle

    async def _learn_from(self, error: ProviderError) -> int | None:
        """Calibrate on the sizes an overflow error names: the limit is the real window, and
        the request's size against what the tracker counts for it gives the ratio. Returns
        the request's size when the error names it."""
        from ..context.calibration import overflow_sizes

        sizes = overflow_sizes(error.message)
        changed = False
        if sizes.limit is not None:
            changed = self.calibration.limit(sizes.limit)
        if sizes.requested is not None:
            tracker = await self.tracker()
            counted = tracker.raw(self.scope.context.messages) + await self._fixed_raw(tracker)
            changed = self.calibration.observe(sizes.requested, counted, minimum=1) or changed
        if changed:
            self._recalibrated()
        return sizes.requested

    def _overflow_error(
        self, error: ProviderError, tried: list[str], exhausted: bool
    ) -> ProviderError:
        from ..context.calibration import unfit_error

        left = len(self.scope.context.messages)
        return unfit_error(error, tried, exhausted, left, self.calibration.window)


async def compact_context(
    context: AgentContext,
    config: AgentLoopConfig,
    *,
    events: ObjectSendStream[AgentEvent] | None = None,
    cancel: CancellationToken | None = None,
    target_tokens: int | None = None,
    force: bool = True,
) -> CompactionResult | None:
    """Compact ``context`` now, outside a run: what ``Agent.compact()`` does.

    Uses ``config``'s policy (the defaults when it has none), provider, model and hooks:
    ``before_compaction`` hooks may veto (``None`` is returned), ``after_compaction`` hooks
    get the stats. ``compaction_start`` / ``compaction_end`` (reason ``manual``) go to
    ``events`` when given. With ``force`` (the default) the history is summarised even when
    it is under the target. ``context.messages`` is replaced in place; the summary calls'
    usage is in ``result.usage`` (there is no turn to count it in).
    """
    from ..context.compacting import compact
    from ..context.compaction import CompactionPolicy
    from ..context.tokens import ContextTracker

    policy = as_policy(config.compaction) or CompactionPolicy()
    provider = config.provider
    model = config.model_name
    tracker = ContextTracker(policy.counter(model))
    await prepare_counter(tracker.counter)
    system = context.resolve_system_prompt()
    tools = [tool_spec(t) for t in context.tools if isinstance(t, Tool)]  # toolsets: per turn
    messages = list(context.messages)
    estimate = tracker.counted(messages, tracker.fixed(system, tools)).tokens
    hooks = hook_dispatch(config)
    handle = RunHandle.detached(context, config)
    for fn in hooks.before_compaction:
        if not await _awaited(fn(handle, estimate)):
            return None
    sink = EventSink(events, context.loop_id or "", context.depth)
    async with sink.watching():  # a stream of one's own: its sends bounded once cancelled
        await sink.emit(
            CompactionStart, tokens_before=estimate, messages_before=len(messages), reason="manual"
        )
        result = await compact(
            messages,
            policy=policy,
            provider=provider,
            model=model,
            system_prompt=system,
            tools=tools,
            context_window=policy.window_for(model, getattr(provider, "name", None)),
            target_tokens=target_tokens,
            tracker=tracker,
            cancel=cancel,
            reason="manual",
            force=force,
            complete=summary_call(config, cancel, handle),
        )
        if result.changed:
            context.messages[:] = result.messages
            context.state[FLOOR_KEY] = len(context.messages)
        await sink.emit(
            CompactionEnd,
            tokens_before=estimate,
            tokens_after=result.tokens_after,
            messages_before=result.messages_before,
            messages_after=len(context.messages),
            strategy=result.strategy,
            reason="manual",
            summary=result.summary,
            usage=result.usage,
        )
    for fn in hooks.after_compaction:
        await _awaited(fn(handle, result.stats()))
    return result


async def _awaited(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def summary_call(
    config: AgentLoopConfig, cancel: CancellationToken | None, run: RunHandle | None = None
) -> SummaryCall:
    """The compaction summary as a side call of ``config``: its hooks (given ``run``),
    retries, settings."""

    async def complete(base: ModelRequest, provider: Provider) -> AssistantMessage:
        request = side_request(
            config,
            base.messages,
            purpose="compaction",
            system_prompt=base.system_prompt,
            provider=provider,
            model=base.model,
            max_tokens=base.max_tokens,
        )
        return await call_model(config, request, provider=provider, cancel=cancel, run=run)

    return complete
