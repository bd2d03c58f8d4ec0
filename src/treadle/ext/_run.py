"""What several extensions track about the run in progress (private)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread

from ..loop import AgentContext, Hooks
from ..types import AgentMessage, UserMessage

T = TypeVar("T")
log = logging.getLogger("treadle.ext")


class RunTracker(Hooks):
    """A hook that remembers the context of the run in progress, whether the conversation
    was empty when it began (``fresh``) and the text of its first user message (``input``).

    One run at a time per instance, like an Agent. Subclasses that override
    ``before_loop`` or ``on_message`` call ``super()`` first.
    """

    def __init__(self) -> None:
        self.context: AgentContext | None = None
        self.fresh = False
        self.input: str | None = None

    async def before_loop(self, context: AgentContext) -> bool:
        self.context = context
        self.fresh = not context.messages
        self.input = None
        return True

    async def on_message(self, message: AgentMessage) -> None:
        if self.input is None and isinstance(message, UserMessage):
            self.input = message.text


async def in_thread(fn: Callable[[], T]) -> T:
    """Blocking work (SQLite, files) off the event loop."""
    return await anyio.to_thread.run_sync(fn)


def add_to_system(system: str | None, line: str) -> str:
    return f"{system}\n\n{line}" if system else line
