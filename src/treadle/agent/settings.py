"""Checking what ``Agent(...)`` and ``run(..., model_settings=...)`` are given, and the
rarely changed knobs kept out of ``Agent()``: :class:`AgentOptions`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from ..errors import ConfigurationError, UsageError
from ..loop import ToolExecution
from ..loop.settings import flat_settings_error
from ..providers.base import Provider


def resolve_model(model: Any, *, api_key: str | None, base_url: str | None) -> Provider:
    """The provider ``Agent(model=...)`` names; a clear error for anything else."""
    if isinstance(model, str):
        if model.strip() == "offline":
            from ..testing import OfflineProvider

            offline: Provider = OfflineProvider()
            return offline
        from ..providers.registry import get_provider

        options = {k: v for k, v in (("api_key", api_key), ("base_url", base_url)) if v}
        return get_provider(model, **options)
    if api_key is not None or base_url is not None:
        raise UsageError(
            "api_key= and base_url= apply to a model string such as 'openai:gpt-4o-mini'; "
            f"this {type(model).__name__} is already built: give them to its constructor."
        )
    if isinstance(model, type):
        raise UsageError(
            f"Agent(model=...) got the class {model.__name__}, not an adapter: build one, "
            f"e.g. {model.__name__}('gpt-4o-mini'), or pass a model string such as "
            "'openai:gpt-4o-mini'."
        )
    if not callable(getattr(model, "stream", None)):
        raise UsageError(
            f"Agent(model=...) takes a model string such as 'openai:gpt-4o-mini' or a "
            f"Provider object, not {type(model).__name__} ({model!r})."
        )
    provider: Provider = model
    return provider


@dataclass(frozen=True)
class AgentOptions:
    """The rarely changed knobs of an :class:`~treadle.Agent`, kept out of its constructor
    so that it stays short (``Agent(model, options=AgentOptions(event_buffer=1024))``).

    Attributes:
        tool_execution: How a turn's tool calls run (``ToolExecution.parallel()`` by
            default, ``ToolExecution.sequential()``, ``ToolExecution.batched(n)``).
        tool_timeout: Seconds a tool may run when it sets no timeout of its own (None:
            its category's default).
        output_retries: How often a run with ``output_type`` asks the model again for a
            valid final answer.
        max_depth: How deep sub-agents (``agent.as_tool()``) may nest.
        event_buffer: How many events ``agent.stream()`` holds for a consumer that lags.
        coalesce_deltas: Join text deltas where nobody can tell (contract §2); False gives
            one update per provider wire event.
        resume_tool_calls: What resuming a stored session does with tool calls left
            unanswered: ``"cancel"`` answers them ``Cancelled``; ``"rerun_idempotent"``
            runs again those of idempotent tools.
    """

    tool_execution: ToolExecution | None = None
    tool_timeout: float | None = None
    output_retries: int = 2
    max_depth: int = 3
    event_buffer: int = 256
    coalesce_deltas: bool = True
    resume_tool_calls: Literal["cancel", "rerun_idempotent"] = "cancel"

    def __post_init__(self) -> None:
        if self.event_buffer < 0:
            raise ConfigurationError("event_buffer must be 0 or more")
        if self.output_retries < 0:
            raise ConfigurationError("output_retries must be 0 or more")
        if self.resume_tool_calls not in ("cancel", "rerun_idempotent"):
            raise ConfigurationError("resume_tool_calls must be 'cancel' or 'rerun_idempotent'")


# Keywords Agent() took before 0.1.0, and where each went (pre-release: no deprecation period).
_MOVED_TO_OPTIONS = {field.name for field in fields(AgentOptions)}


def removed_keyword_error(names: Mapping[str, Any]) -> UsageError:
    """The error for keywords ``Agent()`` no longer takes, saying where each went."""
    flat = flat_settings_error(names, where="Agent(...)")
    if flat is not None:
        return flat
    to_options = sorted(set(names) & _MOVED_TO_OPTIONS)
    if to_options:
        example = ", ".join(f"{name}=..." for name in to_options)
        return UsageError(
            f"Agent() takes {', '.join(to_options)} in its options: "
            f"Agent(model, options=AgentOptions({example})) "
            "(from treadle.agent import AgentOptions)"
        )
    if "description" in names:
        return UsageError(
            "Agent() takes no description: give it where it is used, agent.as_tool(description=...)"
        )
    return UsageError(f"Agent() got unexpected keyword argument(s): {', '.join(sorted(names))}")
