"""A caller's mistakes in calling the loop (arguments swapped, a model string for a config,
a config for the prompts), found before any event, with what to do about them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anyio.abc import ObjectSendStream

from ..cancellation import CancellationToken
from ..errors import UsageError
from ..types import (
    AgentMessage,
    AssistantMessage,
    ExtensionMessage,
    ToolResultMessage,
    UserMessage,
)
from ._scope import as_message, dict_prompt_error
from .config import AgentLoopConfig
from .context import AgentContext


def _check_call(
    function: str, context: Any, config: Any, events: Any, cancel: Any, *, first: int = 2
) -> None:
    """A caller's mistake (arguments swapped, a model string for a config) fails here, before
    any event, naming the argument and what it should be. ``first`` is the position of
    ``context`` in ``function``'s signature."""
    args: list[tuple[str, Any, tuple[type, ...]]] = [
        ("context", context, (AgentContext,)),
        ("config", config, (AgentLoopConfig,)),
        ("events", events, (ObjectSendStream, type(None))),
        ("cancel", cancel, (CancellationToken, type(None))),
    ]
    for index, (name, value, expected) in enumerate(args):
        if isinstance(value, expected):
            continue
        wanted = " or ".join("None" if t is type(None) else t.__name__ for t in expected)
        swapped = [
            n for i, (n, _, types) in enumerate(args[:2]) if i != index and isinstance(value, types)
        ]
        hint = f" It looks like {name} and {swapped[0]} are swapped." if swapped else ""
        raise UsageError(
            f"{function}(): argument {first + index} ({name}) must be {wanted}, not "
            f"{type(value).__name__}.{hint}"
        )


def _prompts(prompts: Any) -> list[AgentMessage]:
    if isinstance(prompts, str) or isinstance(
        prompts, (UserMessage, AssistantMessage, ToolResultMessage, ExtensionMessage)
    ):
        return [as_message(prompts)]  # one prompt, never one message per character
    if isinstance(prompts, Mapping):
        raise dict_prompt_error(prompts)  # iterating it would make one message per key
    if isinstance(prompts, (AgentContext, AgentLoopConfig)):
        raise UsageError(
            f"agent_loop(): the first argument, prompts, must be the new messages (a str, a "
            f"message or a list of them), not {type(prompts).__name__}: the order is "
            "agent_loop(prompts, context, config, events)."
        )
    return [as_message(p) for p in prompts]
