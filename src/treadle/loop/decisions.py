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
    saved: Any = None


ToolDecision = Union[Allow, Deny, Ask]


@dataclass(frozen=True, slots=True)
class Suspension:
    """A tool call a run suspended on (an ``Ask`` of its hooks, an external tool): the
    name and the arguments its ``before_tool_call`` hooks judged. Only such a call can be
    approved or denied (``context.approve(id)``); an approval of exactly these arguments
    runs them without asking the hooks again. ``restored``: rebuilt from a stored session
    (the hooks' own replacements were not stored), so an approval is judged by the hooks
    again, and an ``Ask`` among them is answered by it. ``prompt``: the ``Ask``'s question
    for the person (a UI shows it with the call). ``saved``: for a call whose tool asked
    mid-call (``ApprovalRequired``), the state it gave, handed back as ``ctx.saved`` when
    the approved call runs again; kept by the server, never taken from a client."""

    name: str
    arguments: dict[str, Any]
    external: bool = False
    restored: bool = False
    prompt: str | None = None
    saved: Any = None
