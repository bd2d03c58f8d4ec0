"""The planning call: before a run, ask the model for a numbered plan (``planning=True``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..cancellation import CancelBridge, CancellationToken
from ..loop import AgentLoopConfig
from ..providers.base import ModelRequest, Provider, ProviderError, StreamDone
from ..types import AgentMessage, AssistantMessage, PlanCreated, TextContent, Usage, UserMessage
from .runstate import RunState

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
    state: RunState,
    config: AgentLoopConfig,
) -> list[AgentMessage]:
    """The prompts, followed by the model's plan and "Carry out the plan." when it gave a
    numbered plan; the prompts alone when it answered DIRECT, failed, or was aborted. A
    plan is announced by ``plan_created`` at the next turn start."""
    request = ModelRequest(
        model=config.model_name,
        system_prompt=f"{system}\n\n{PLANNER_INSTRUCTION}" if system else PLANNER_INSTRUCTION,
        messages=[m for m in [*history, *prompts] if m.role != "extension"],
        max_tokens=config.max_tokens,
    )
    message: AssistantMessage | None = None
    bridge = CancelBridge(token)  # abort() stops the planning call too
    try:
        with bridge.scope():
            async for event in provider.stream(request, cancel=token):
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
    steps = [m.group(1).strip() for m in re.finditer(r"^\s*\d+[.)]\s*(.+)$", text, re.MULTILINE)]
    if not steps or text.upper().startswith("DIRECT"):
        return prompts  # no numbered plan means: answer directly
    state.plan = PlanCreated(plan=text, steps=steps)
    plan_message = message.model_copy(
        update={"content": [TextContent(text=text)], "stop_reason": "stop", "usage": Usage()}
    )
    return [*prompts, plan_message, UserMessage.of("Carry out the plan.")]
