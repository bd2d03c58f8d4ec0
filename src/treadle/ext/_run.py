"""What several extensions track about the run in progress (private)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread

from ..loop import Hooks, RunHandle
from ..types import AgentMessage, UserMessage

T = TypeVar("T")
log = logging.getLogger("treadle.ext")


class RunTracker(Hooks):
    """A hook that knows, per run, whether the conversation was empty when the run began
    (:meth:`fresh`) and the text of the run's first user message (:meth:`input`), kept in
    ``run.state_for(self)``: one instance serves any number of runs at once.

    Subclasses that override ``before_loop`` or ``on_message`` call ``super()`` first.
    """

    async def before_loop(self, run: RunHandle) -> bool:
        state = run.state_for(self)
        state["fresh"] = not run.context.messages
        state["input"] = None
        return True

    async def on_message(self, run: RunHandle, message: AgentMessage) -> None:
        state = run.state_for(self)
        if state.get("input") is None and isinstance(message, UserMessage):
            state["input"] = message.text

    def fresh(self, run: RunHandle) -> bool:
        """Whether ``run`` started the conversation (its history was empty)."""
        return bool(run.state_for(self).get("fresh"))

    def input(self, run: RunHandle) -> str | None:
        """The text of ``run``'s first user message (None before it joins the history)."""
        text: str | None = run.state_for(self).get("input")
        return text


async def in_thread(fn: Callable[[], T]) -> T:
    """Blocking work (SQLite, files) off the event loop."""
    return await anyio.to_thread.run_sync(fn)


def add_to_system(system: str | None, line: str) -> str:
    return f"{system}\n\n{line}" if system else line
