"""Internal signals: exceptions treadle raises and catches inside itself, never letting one
reach a caller (a run ends with a reason instead). They are outside the public tree on
purpose: ``except treadle.TreadleError`` in an application must never swallow one on its
way, and no caller should catch them. docs/errors.md lists them."""

from __future__ import annotations

from typing import Any

from .errors import _rebuild


class Signal(Exception):
    """Base of the internal signals (they pickle and copy, like the public errors)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self.args, self.__dict__)


class HookFailed(Signal):
    """A hook or callback raised, or returned something it must not: the run ends with
    error kind ``hook``, and ``original`` (with its traceback) is what it raised."""

    def __init__(self, where: str, original: BaseException) -> None:
        super().__init__(f"{where} raised {type(original).__name__}: {original}")
        self.where = where
        self.original = original


class ToolRaised(Signal):
    """A tool raised a BaseException (or ``raise_tool_errors=True``): the history is closed,
    ``agent_end`` sent, then ``original`` is raised to the caller."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


class RunLimitHit(Signal):
    """The run's duration or token limit was reached while the model was still streaming."""


class CompactionCancelled(Signal):
    """The run was cancelled while a compaction was in progress."""
