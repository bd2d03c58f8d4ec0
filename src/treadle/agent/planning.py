"""The planning call: before a run, ask the model for a numbered plan (``planning=True``)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from typing import Any

from .._signals import HookFailed
from ..cancellation import CancellationToken
from ..loop import (
    AgentContext,
    AgentLoopConfig,
    InputFilter,
    Reject,
    RunHandle,
    call_model,
    side_request,
)
from ..providers.base import Provider
from ..types import AgentMessage, PlanCreated, TextContent, Usage, UserMessage
from .tally import RunTally

PLANNER_INSTRUCTION = (
    "Before acting, decide whether the user's request needs a plan. If it can be answered "
    "directly, reply with exactly DIRECT. Otherwise reply with a short numbered plan, one step "
    "per line, and nothing else."
)


async def make_plan(
    provider: Provider,
    token: CancellationToken | None,
    system: str | None,
    history: Sequence[AgentMessage],
    prompts: list[AgentMessage],
    state: RunTally,
    config: AgentLoopConfig,
    context: AgentContext | None = None,
) -> list[AgentMessage]:
    """The prompts, followed by the model's plan and "Carry out the plan." when it gave a
    numbered plan; the prompts alone when it answered DIRECT, failed, or was aborted. A
    plan is announced by ``plan_created`` at the next turn start. The hooks see the call
    with a detached run handle on ``context`` (the run has not started)."""
    request = side_request(
        config,
        [*history, *prompts],
        purpose="planning",
        system_prompt=f"{system}\n\n{PLANNER_INSTRUCTION}" if system else PLANNER_INSTRUCTION,
        provider=provider,
    )
    try:
        # the loop's path: its before_model_request hooks, its retries, its settings
        run = RunHandle.detached(context or AgentContext(), config)
        message = await call_model(config, request, provider=provider, cancel=token, run=run)
    except HookFailed:
        return prompts  # the run's first turn calls the same hook and ends with its error
    state.planning_usage = message.usage
    if message.stop_reason in ("error", "aborted"):
        # No plan then (logged by call_model): the run itself reports a failing provider.
        return prompts
    text = message.text.strip()
    steps = [m.group(1).strip() for m in re.finditer(r"^\s*\d+[.)]\s*(.+)$", text, re.MULTILINE)]
    if not steps or text.upper().startswith("DIRECT"):
        return prompts  # no numbered plan means: answer directly
    state.plan = PlanCreated(plan=text, steps=steps)
    plan_message = message.model_copy(
        update={"content": [TextContent(text=text)], "stop_reason": "stop", "usage": Usage()}
    )
    return [*prompts, plan_message, UserMessage.of("Carry out the plan.")]


class _Screened(InputFilter):
    """An input filter whose verdict on the run's prompts was taken before the planning
    call: the loop's first call (the prompts) gets that verdict, later ones (steering,
    follow-ups) the filter itself. So a filter judges the prompts once."""

    def __init__(self, inner: Any, verdict: Any) -> None:
        self.inner = inner
        self._verdict = verdict

    def filter(self, *args: Any) -> Any:
        verdict, self._verdict = self._verdict, None
        if verdict is not None:
            return verdict
        return self.inner.filter(*args)

    def __repr__(self) -> str:
        return f"_Screened({self.inner!r})"


async def screen_prompts(
    config: AgentLoopConfig, prompts: Sequence[AgentMessage]
) -> tuple[bool, AgentLoopConfig]:
    """The input filters' verdicts on ``prompts``, taken before the planning call (a
    rejected prompt reaches no model and is never stored: docs/contract.md §2.2). Returns
    whether the prompts may be planned and the config the run uses: each filter that judged
    them hands the loop its verdict instead of judging them again. A filter that raises
    leaves planning out; the loop calls it again and ends the run with its error."""
    filters = list(config.input_filters)
    text = "\n".join(m.text for m in prompts if isinstance(m, UserMessage))
    if not filters or not any(isinstance(m, UserMessage) for m in prompts):
        return True, config
    wrapped: list[Any] = []
    plan = True
    for index, input_filter in enumerate(filters):
        try:
            verdict = input_filter.filter(text)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception:
            wrapped += filters[index:]
            plan = False
            break
        wrapped.append(_Screened(input_filter, verdict))
        if isinstance(verdict, Reject):
            wrapped += filters[index + 1 :]
            plan = False
            break
    return plan, config.model_copy(update={"input_filters": wrapped})
