"""The loop's side of context management (LOOP-SPEC §4.1 step 4, §4.2, §6).

:class:`ContextGuard` belongs to one loop call. Before each model call it estimates the
request (anchored on the last reported usage, so one turn costs O(new messages)), compacts
past the policy's trigger, and fails the turn past the hard limit instead of sending a
request the provider would refuse. When a provider answers ``context_overflow`` anyway, it
compacts once more and the call is retried once. It also prices assistant messages from the
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

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ..providers.base import ModelRequest, ProviderError
from ..tools import tool_spec
from ..types import AssistantMessage, CompactionEnd, CompactionStart, ErrorInfo, Usage

if TYPE_CHECKING:
    from ..context.catalog import ModelInfo
    from ..context.compaction import CompactionPolicy, CompactionResult
    from ..context.tokens import ContextEstimate, ContextTracker
    from .run import _Run

logger = logging.getLogger("treadle.context")

FLOOR_KEY = "treadle.context.floor"
"""``context.state`` key: the history length right after the last compaction. Usage that
assistant messages before it reported describes the history before it was compacted, so
estimates do not anchor on it (an int, so the state stays JSON-friendly)."""

PRELOAD_TIMEOUT_S = 5.0
"""How long the first estimate waits for tiktoken to load an encoding in a worker thread
before it settles for the heuristic (the event loop never blocks on the load)."""

OVERFLOW_SHRINK = 0.75
"""After a provider's context_overflow, compact to at most this share of the estimate."""

OverflowHandler = Callable[[ProviderError, ModelRequest], Awaitable[ModelRequest | None]]


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
    raise TypeError(
        "AgentLoopConfig.compaction must be a CompactionPolicy, a dict of its fields, True "
        f"(defaults) or None, not {type(value).__name__}"
    )


class ContextGuard:
    """Context size and prices for one loop call (see the module docs)."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.policy = as_policy(run.config.compaction)
        self._prices: dict[tuple[str, str], ModelInfo | None] = {}
        self._tracker: ContextTracker | None = None
        self._window: int | None = None
        self._warned = False

    # ---- prices ----

    def price(self, message: AssistantMessage) -> None:
        """Fill ``message.usage.cost_usd`` from the catalog when the provider did not."""
        usage = message.usage
        if usage.cost_usd is not None:
            return
        config = self.run.config
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
        if self._window is None:
            assert self.policy is not None
            config = self.run.config
            name = getattr(config.provider, "name", None)
            self._window = self.policy.window_for(config.model_name, name)
        return self._window

    async def tracker(self) -> ContextTracker:
        if self._tracker is None:
            from ..context.tokens import (
                ContextTracker,
                encoding_loaded,
                encoding_loading,
                load_encoding,
            )

            assert self.policy is not None
            counter = self.policy.counter(self.run.config.model_name)
            for name in counter.candidates():
                if not encoding_loaded(name) and not encoding_loading(name):
                    with anyio.move_on_after(PRELOAD_TIMEOUT_S):
                        await anyio.to_thread.run_sync(load_encoding, name, abandon_on_cancel=True)
                if encoding_loaded(name) and load_encoding(name) is not None:
                    break
            counter.use_loaded_only()
            self._tracker = ContextTracker(counter)
        messages = self.run.context.messages
        floor = self.run.context.state.get(FLOOR_KEY)
        if isinstance(floor, int) and 0 <= floor <= len(messages):
            self._tracker.floor = max(self._tracker.floor, floor)
        return self._tracker

    async def _fixed(self, tracker: ContextTracker) -> int:
        run = self.run
        system = await run.call_hook(run.context.resolve_system_prompt)
        tools = list(run.tools.values())
        specs = [tool_spec(t) for t in tools]
        return tracker.fixed(system, specs, tuple(id(t) for t in tools))

    async def estimate(self) -> ContextEstimate:
        """Tokens the next request will take (LOOP-SPEC §6)."""
        tracker = await self.tracker()
        messages = self.run.context.messages
        found = tracker.anchored(messages)
        if found is not None:
            return found
        return tracker.counted(messages, await self._fixed(tracker))

    # ---- step 4 ----

    async def check(self) -> AssistantMessage | None:
        """Before a model call: compact past the trigger; past the hard limit, append an
        error message (``context_overflow``) and return it, so the turn fails without
        calling the model. ``None``: go ahead."""
        policy = self.policy
        if policy is None:
            return None
        tokens = (await self.estimate()).tokens
        budget = policy.budget(self.window)
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
        if policy.fail_at is not None and tokens > policy.fail_at * budget:
            return await self._fail(tokens, int(policy.fail_at * budget))
        return None

    async def _fail(self, tokens: int, limit: int) -> AssistantMessage:
        run = self.run
        assert self.policy is not None and self.policy.fail_at is not None
        message = AssistantMessage(
            model=run.config.model_name,
            provider=getattr(run.config.provider, "name", ""),
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
        await run.append(message)
        return message

    # ---- compaction ----

    async def compact(self, estimate: int, reason: str, target: int | None = None) -> int:
        """Run the hooks, the events and the policy's strategies; replace the history.
        Returns the estimate afterwards."""
        from ..context.compaction import compact

        run = self.run
        policy = self.policy
        assert policy is not None
        for hook in run.config.hooks:
            if not await run.call_hook(hook.before_compaction, estimate):
                return estimate
        context = run.context
        before = len(context.messages)
        await run.sink.emit(
            CompactionStart, tokens_before=estimate, messages_before=before, reason=reason
        )
        tracker = await self.tracker()
        result: CompactionResult | None = None
        try:
            system = await run.call_hook(context.resolve_system_prompt)
            with run.bridge.scope():
                result = await compact(
                    list(context.messages),
                    policy=policy,
                    provider=run.config.provider,
                    model=run.config.model_name,
                    system_prompt=system,
                    tools=[tool_spec(t) for t in run.tools.values()],
                    context_window=self.window,
                    target_tokens=target,
                    tracker=tracker,
                    cancel=run.bridge.token,
                    reason=reason,
                    force=False,
                )
        finally:
            if result is None:  # cancelled: the history is as it was
                with anyio.CancelScope(shield=True):
                    await run.sink.emit(
                        CompactionEnd,
                        tokens_before=estimate,
                        tokens_after=estimate,
                        messages_before=before,
                        messages_after=before,
                        reason=reason,
                    )
        if result is None:
            return estimate
        if result.changed:
            context.messages[:] = result.messages
            tracker.reset(context.messages)
            context.state[FLOOR_KEY] = len(context.messages)
            tokens = result.tokens_after
        elif not result.cancelled and result.tokens_before <= result.target:
            # Counting says the history is small: the usage we anchored on was reported
            # before an earlier compaction (a restored session). Stop anchoring on it.
            tracker.floor = len(context.messages)
            tokens = result.tokens_before
        else:
            tokens = estimate
        if result.usage != Usage():
            run.turn_usage = run.turn_usage + result.usage
        await run.sink.emit(
            CompactionEnd,
            tokens_before=estimate,
            tokens_after=tokens,
            messages_before=before,
            messages_after=len(context.messages),
            strategy=result.strategy,
            reason=reason,
            summary=result.summary,
            usage=result.usage,
        )
        stats = {**result.stats(), "tokens_before": estimate, "tokens_after": tokens}
        for hook in run.config.hooks:
            await run.call_hook(hook.after_compaction, stats)
        return tokens

    # ---- §4.2: context_overflow from the provider ----

    def on_overflow(self) -> OverflowHandler | None:
        """For one model call: a handler that compacts once after a ``context_overflow``
        and returns the request to retry with (``None``: no retry). ``None`` without a
        policy."""
        if self.policy is None:
            return None
        used = False

        async def handle(error: ProviderError, request: ModelRequest) -> ModelRequest | None:
            nonlocal used
            if used:
                return None
            used = True
            estimate = (await self.estimate()).tokens
            assert self.policy is not None
            budget = self.policy.budget(self.window)
            target = min(int(budget * self.policy.compact_to), int(estimate * OVERFLOW_SHRINK))
            before = list(self.run.context.messages)
            await self.compact(estimate, "overflow", target)
            after = self.run.context.messages
            if len(after) == len(before) and all(
                a is b for a, b in zip(after, before, strict=True)
            ):
                return None  # nothing changed (or a hook skipped it): the error stands
            messages = await self.run.request_messages()
            return request.model_copy(update={"messages": messages})

        return handle
