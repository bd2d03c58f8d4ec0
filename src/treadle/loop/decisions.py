"""What a ``before_tool_call`` hook decides about a tool call: allow, deny, or ask a person.

Its own module so that both the config (hooks, approval handlers) and the context (pending
approvals) can use these types without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union


@dataclass(frozen=True, slots=True)
class Allow:
    """Run the tool; ``arguments`` replaces the model's arguments when given."""

    arguments: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the tool; the model gets an error result with ``reason``."""

    reason: str = "The user denied this tool call."


@dataclass(frozen=True, slots=True)
class Ask:
    """A person must decide. The config's ``approval_handler`` is asked; without one the run
    ends ``suspended`` and resumes through ``agent_loop_continue`` once decisions are given
    (``context.approve(id)`` / ``context.deny(id)``)."""

    prompt: str | None = None


ToolDecision = Union[Allow, Deny, Ask]
