"""Profiles: named bundles of a system prompt, tools, planning and a turn cap, and the
ephemeral runs that use them (``Agent.run_ephemeral(prompt, profile=...)``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from ..errors import ConfigurationError
from ..loop import AgentContext
from ..types import AgentMessage
from .result import RunResult


@dataclass(frozen=True)
class Profile:
    """A named way for an agent to work. Each field left ``None`` keeps the agent's own:
    ``system_prompt`` (a string or a callable rebuilt on every model call), ``tools``
    (replace the agent's tools; toolsets allowed), ``planning`` (the tool-free planning call
    before a run) and ``max_turns`` (the run's turn cap, ``ExecutionLimits.max_turns``)."""

    name: str
    system_prompt: Union[str, Callable[[], str], None] = None
    tools: Sequence[Any] | None = None
    planning: bool | None = None
    max_turns: int | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.max_turns is not None and self.max_turns < 0:
            raise ConfigurationError("max_turns must be at least 0")


async def run_ephemeral(
    agent: Any,
    prompt: str | AgentMessage,
    *,
    deps: Any = None,
    profile: Profile | None = None,
) -> RunResult[Any]:
    """A run of a clone of ``agent`` on a copy of its conversation, under ``profile``
    when given: nothing stored on ``agent`` changes, and nothing is written to its session
    store. (``agent`` is an :class:`~treadle.Agent`; not imported here, which imports this.)"""
    clone = agent._clone()
    update: dict[str, Any] = {"messages": list(agent.messages), "approvals": {}, "state": {}}
    if profile is not None:
        if profile.system_prompt is not None:
            update["system_prompt"] = profile.system_prompt
        if profile.tools is not None:  # validated like Agent(tools=...): wrapped, unique
            update["tools"] = AgentContext(tools=list(profile.tools)).tools
    clone.context = agent.context.model_copy(update=update)
    if profile is not None:
        if profile.planning is not None:
            clone.planning = profile.planning
        if profile.max_turns is not None:
            settings = dict(clone._settings)
            settings["limits"] = settings["limits"].model_copy(
                update={"max_turns": profile.max_turns}
            )
            clone._settings = settings
    result: RunResult[Any] = await clone.run(prompt, deps=deps)
    return result
