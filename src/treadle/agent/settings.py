"""Checking what ``Agent(...)`` and ``run(..., model_settings=...)`` are given, and the
rarely changed knobs kept out of ``Agent()``: :class:`AgentOptions`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from ..errors import ConfigurationError, UsageError
from ..loop import ExecutionLimits, ToolExecution
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
    limits = sorted(set(names) & set(ExecutionLimits.model_fields))
    if limits:
        example = ", ".join(f"{name}=..." for name in limits)
        return UsageError(
            f"Agent() takes {', '.join(limits)} in its limits: "
            f"Agent(model, limits=ExecutionLimits({example})) "
            "(from treadle import ExecutionLimits)"
        )
    return UsageError(f"Agent() got unexpected keyword argument(s): {', '.join(sorted(names))}")


_HOOK_METHODS = (
    "before_loop", "after_loop", "before_end", "before_turn", "after_turn", "on_message",
    "on_error", "before_model_request", "before_tool_call", "after_tool_call",
    "before_compaction", "after_compaction", "on_event",
)  # fmt: skip


def checked_parts(
    tools: Any, system_prompt: Any, hooks: Any, input_filters: Any
) -> tuple[list[Any], list[Any], list[Any]]:
    """``Agent(tools=, system_prompt=, hooks=, input_filters=)`` as lists, or a
    :class:`~treadle.errors.UsageError` that says what each takes (a newcomer's
    ``tools=add``, ``hooks=[fn]`` or ``system_prompt=[...]`` otherwise fails deep inside)."""

    def listed(value: Any, name: str, example: str) -> list[Any]:
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
            raise UsageError(f"Agent({name}=...) takes a list, e.g. {name}={example}")
        return list(value)

    if system_prompt is not None and not (
        isinstance(system_prompt, str) or callable(system_prompt)
    ):
        raise UsageError(
            "Agent(system_prompt=...) takes one string, or a function that returns one; "
            "to join several parts: system_prompt='\\n\\n'.join(parts)"
        )
    found_hooks = listed(hooks, "hooks", "[MyHooks()]")
    for hook in found_hooks:
        if isinstance(hook, type) or not any(hasattr(hook, m) for m in _HOOK_METHODS):
            what = f"the class {hook.__name__}" if isinstance(hook, type) else repr(hook)
            raise UsageError(
                f"Agent(hooks=[...]) takes Hooks objects, not {what}: subclass treadle.Hooks, "
                "override the methods you need (each takes the run first, e.g. "
                "on_event(self, run, event)) and pass an instance"
            )
    filters = listed(input_filters, "input_filters", "[MyFilter()]")
    for item in filters:
        if isinstance(item, type) or not callable(getattr(item, "filter", None)):
            raise UsageError(
                f"Agent(input_filters=[...]) takes InputFilter objects with a filter(text) "
                f"method, not {item!r}"
            )
    return listed(tools, "tools", "[add]"), found_hooks, filters
