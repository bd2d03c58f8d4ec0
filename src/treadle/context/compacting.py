"""``compact``: compact a history now, under a policy — the entry point the loop, the Agent
and applications call. The policy, the job and the strategies are in :mod:`.compaction`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._signals import CompactionCancelled
from ..cancellation import CancellationToken
from ..providers.base import Provider
from ..types import (
    AgentMessage,
    ToolSpec,
    Usage,
)
from .compaction import (
    CompactionJob,
    CompactionPolicy,
    SummaryCall,
    pending_calls,
)
from .tokens import ContextTracker
from .transcript import repair_transcript

# ---- the entry point ----


@dataclass(frozen=True)
class CompactionResult:
    """What :func:`compact` did. ``messages`` is the new history (a copy of the input when
    nothing changed, and always when ``cancelled``); tokens are measured (counted) sizes of
    the request, system prompt and tools included; ``usage`` is what the summary calls
    cost."""

    messages: list[AgentMessage]
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    target: int
    strategies: tuple[str, ...] = ()
    summary: str | None = None
    usage: Usage = field(default_factory=Usage)
    reason: str = "manual"
    cancelled: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.strategies)

    @property
    def strategy(self) -> str:
        """The strategies that changed something, joined with ``+``."""
        return "+".join(self.strategies)

    def stats(self) -> dict[str, Any]:
        """Plain numbers and names (for hooks and logs)."""
        return {
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "target": self.target,
            "strategy": self.strategy,
            "summary": self.summary,
            "reason": self.reason,
            "cost_usd": self.usage.cost_usd,
        }


async def compact(
    messages: Sequence[AgentMessage],
    *,
    policy: CompactionPolicy | None = None,
    provider: Provider | None = None,
    model: str = "",
    system_prompt: str | None = None,
    tools: Sequence[ToolSpec] = (),
    context_window: int | None = None,
    target_tokens: int | None = None,
    tracker: ContextTracker | None = None,
    cancel: CancellationToken | None = None,
    reason: str = "manual",
    force: bool | None = None,
    complete: SummaryCall | None = None,
) -> CompactionResult:
    """Compact ``messages`` under ``policy`` (default: :class:`CompactionPolicy()`).

    The target is ``target_tokens``, else ``policy.compact_to`` of the usable window
    (``context_window``, else the policy's resolution for ``model`` and ``provider``).
    ``provider`` and ``model`` also serve the summary call unless the policy names its own.
    With ``force`` (the default for ``reason="manual"``) the target is at most half the
    current size, and the strategies that are not a last resort run even when the history
    is already under it: an explicit request to compact summarises. ``complete`` makes the
    summary call (the loop passes its own model-call path: hooks, retries, settings); without
    it the summary is a bare call to the provider. The input is never modified.
    """
    policy = policy if policy is not None else CompactionPolicy()
    provider_name = getattr(provider, "name", None)
    window = context_window or policy.window_for(model, provider_name)
    budget = policy.budget(window)
    target = target_tokens if target_tokens is not None else int(budget * policy.compact_to)
    tracker = tracker if tracker is not None else ContextTracker(policy.counter(model))
    job = CompactionJob(
        messages=list(messages),
        policy=policy,
        target=target,
        window=window,
        fixed=tracker.fixed(system_prompt, tools),
        tracker=tracker,
        provider=provider,
        model=model,
        cancel=cancel,
        force=(reason == "manual") if force is None else force,
        complete=complete,
    )
    before = job.total
    need = target
    if job.force and target_tokens is None:
        # An explicit request to compact aims at half the current size at most (seed 003's
        # manual compaction "to a lower target budget"), so it does something in a big
        # window; the last resort still runs only to get under the policy's target.
        job.target = target = min(target, before // 2)
    applied: list[str] = []
    cancelled = False
    try:
        for strategy in policy.strategies:
            if strategy.last_resort:
                job.target = need
                if not job.over():
                    continue
            elif not job.over() and not job.force:
                continue
            if await strategy.apply(job):
                applied.append(strategy.name)
    except CompactionCancelled:
        cancelled = True
    if cancelled or not applied:
        return CompactionResult(
            messages=list(messages),
            tokens_before=before,
            tokens_after=before,
            messages_before=len(messages),
            messages_after=len(messages),
            target=need,
            usage=job.usage,
            reason=reason,
            cancelled=cancelled,
        )
    out = repair_transcript(job.messages, allow_pending=pending_calls(messages))
    if len(out) != len(job.messages):
        job.set_messages(out)
    return CompactionResult(
        messages=out,
        tokens_before=before,
        tokens_after=job.total,
        messages_before=len(messages),
        messages_after=len(out),
        target=need,
        strategies=tuple(applied),
        summary=job.summary,
        usage=job.usage,
        reason=reason,
    )


__all__ = ["CompactionResult", "compact"]
