"""AgentContext: the mutable state a loop reads and writes."""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from operator import is_
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from ..context import repair_transcript
from ..errors import ConfigurationError, UsageError
from ..tools import Tool, Toolset, as_tool, traits_of
from ..tools.registry import is_toolset
from ..types import AgentMessage, AssistantMessage, ContinuationKind, ExtensionMessage
from ..types._watch import SHORT_HISTORY, ContentMark, edit_count
from .decisions import Allow, Deny, Suspension

SystemPrompt = Union[str, Callable[[], str], None]


class RequestView:
    """The history as requests carry it (no extension messages, repaired), kept
    incrementally: while the history only grew since the last call (the same message
    objects first, their content unchanged: see ``types._watch.ContentMark``) and was
    valid, only the new tail is checked, so a request does not re-scan the history."""

    __slots__ = ("_clean", "_items", "_mark", "_out")
    short = SHORT_HISTORY  # fewer messages: repaired afresh, never kept

    def __init__(self) -> None:
        self._items: list[AgentMessage] = []  # the history the view was built from
        self._out: list[AgentMessage] = []
        self._mark = ContentMark(-1, containers=False)  # tool arguments do not matter here
        self._clean = False

    def update(self, messages: list[AgentMessage]) -> list[AgentMessage]:
        if len(messages) < self.short:
            self._clean = False  # nothing kept: the next call starts afresh
            if self._items:  # a history compacted below the threshold: let the old go
                self._items, self._out = [], []
            return repair_transcript([m for m in messages if not isinstance(m, ExtensionMessage)])
        edits = edit_count()  # read first: an assignment made meanwhile shows next time
        items = self._items
        n = len(items)
        last = items[-1] if items else None
        grew = (
            self._clean
            and len(messages) >= n
            and all(map(is_, islice(messages, n), items))
            and self._mark.unchanged(edits)
            # calls still open at the boundary need the full view to meet their results
            and not (isinstance(last, AssistantMessage) and last.tool_calls)
        )
        start = n if grew else 0
        if not grew:
            self._mark = ContentMark(edits, containers=False)
        tail = [m for m in messages[start:] if not isinstance(m, ExtensionMessage)]
        fixed = repair_transcript(tail)
        clean = len(fixed) == len(tail) and all(map(is_, fixed, tail))
        mark = self._mark
        mark.edits = edits
        for message in messages[start:]:
            clean = mark.add(message) and clean  # an unwatchable message: rebuild next time
        if grew:  # only the new part is copied: the kept lists grow in place
            self._out.extend(fixed)
            items.extend(messages[n:])
        else:
            self._out, self._items = fixed, list(messages)
        self._clean = clean
        return list(self._out)  # the caller's own copy


class AgentContext(BaseModel):
    """One conversation: its history and what a run needs around it.

    You make one per conversation and pass it to :func:`~treadle.agent_loop` (an ``Agent``
    makes and keeps its own). The loop reads it and writes into it. Each message a run
    produces is appended to ``messages`` as it happens, so after the call the context holds
    the whole conversation so far, ready for the next prompt. It is plain data (a pydantic
    model): build one from a stored history, copy it to try something out, look at it
    between runs. Only one run at a time may use a context; concurrent runs each need
    their own.

    What it holds:

    - ``messages``: the history, oldest first (user, assistant, tool-result and extension
      messages).
    - ``system_prompt``: a string, or a function called before every model request; it is
      never stored in the history.
    - ``tools``: what the model may call: ``@tool`` functions, plain functions, ``Tool``
      objects, toolsets. Names must be unique.
    - ``agent_id``, ``session_id``, ``loop_id``: filled with UUIDs by the first run when
      missing, and kept, so :func:`~treadle.agent_loop_continue` on the same context
      carries on under the same ids.
    - ``suspended`` and ``approvals``: the tool calls a suspended run waits on, and the
      decisions given for them with :meth:`approve` and :meth:`deny`.
    - ``state``: free space for extensions and hooks, kept with the context and never sent
      to a model.

    Example:
        Two prompts, one conversation:

        ```python
        import anyio

        from treadle import AgentContext, AgentLoopConfig, agent_loop
        from treadle.testing import ScriptedProvider

        context = AgentContext(system_prompt="Answer in one word.")
        config = AgentLoopConfig(provider=ScriptedProvider(["Paris", "Rome"]))
        anyio.run(agent_loop, "Capital of France?", context, config)
        anyio.run(agent_loop, "And of Italy?", context, config)
        assert [m.role for m in context.messages] == ["user", "assistant"] * 2
        assert context.messages[-1].text == "Rome"
        ```
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", defer_build=True)

    system_prompt: SystemPrompt = None
    messages: list[AgentMessage] = Field(default_factory=list)
    tools: list[Any] = Field(default_factory=list)
    agent_id: str | None = None
    session_id: str | None = None
    loop_id: str | None = None
    parent_loop_id: str | None = None
    parent_tool_call_id: str | None = None
    """For a sub-agent's context: the parent's tool call that started it."""
    depth: int = Field(default=0, ge=0)
    continuation_kind: ContinuationKind = ContinuationKind.INITIAL
    approvals: dict[str, Union[Allow, Deny]] = Field(default_factory=dict)
    suspended: dict[str, Suspension] = Field(default_factory=dict)
    """The calls a run suspended on, by id: what its hooks judged (kept by the loop)."""
    state: dict[str, Any] = Field(default_factory=dict)
    _view: RequestView | None = PrivateAttr(default=None)
    _in_loop: list[Any] | None = PrivateAttr(default=None)
    """The ``messages`` list a running loop writes to (a copy of the context with a list of
    its own is another history, free to run)."""

    @field_validator("tools", mode="after")
    @classmethod
    def _wrap_tools(cls, value: list[Any]) -> list[Tool | Toolset]:
        items: list[Tool | Toolset] = [t if is_toolset(t) else as_tool(t) for t in value]
        tools = [t for t in items if not is_toolset(t)]
        for t in tools:
            traits_of(t)  # traits declared the old way are refused here, when the tool is added
        names = [t.name for t in tools]  # type: ignore[union-attr]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            repeated = ", ".join(duplicates)
            raise ConfigurationError(f"tool names must be unique; repeated: {repeated}")
        return items

    def resolve_system_prompt(self) -> str | None:
        prompt = self.system_prompt
        return prompt() if callable(prompt) else prompt

    def request_history(self) -> list[AgentMessage]:
        """``messages`` as a model request carries them: extension messages left out, a call
        without a result answered with an error result and a result without a call dropped
        (:func:`~treadle.context.repair_transcript`). Kept between calls, so while the history only
        grows, each call checks only the new messages."""
        private = self.__pydantic_private__  # direct: pydantic's __getattr__ costs more
        view = private.get("_view") if private is not None else None
        if view is None:
            view = self._view = RequestView()
        return view.update(self.messages)

    def approve(self, tool_call_id: str, arguments: dict[str, Any] | None = None) -> None:
        """Allow a call a suspended run is waiting on. New ``arguments`` make it a new
        call: the ``before_tool_call`` hooks judge it again when the run continues.
        Raises :class:`~treadle.UsageError` for a call the run is not waiting on."""
        self._check_waiting(tool_call_id, "approve")
        if arguments is not None and not isinstance(arguments, dict):
            raise UsageError(
                f"approve({tool_call_id!r}, arguments=...) takes a dict of the tool's "
                f"arguments, not {type(arguments).__name__}"
            )
        self.approvals[tool_call_id] = Allow(dict(arguments) if arguments is not None else None)

    def deny(self, tool_call_id: str, reason: str = "The user denied this tool call.") -> None:
        """Refuse a call a suspended run is waiting on; the model gets ``reason``.
        Raises :class:`~treadle.UsageError` for a call the run is not waiting on."""
        self._check_waiting(tool_call_id, "deny")
        self.approvals[tool_call_id] = Deny(reason)

    @property
    def waiting_tool_calls(self) -> list[str]:
        """Ids of the calls a suspended run waits on: calls it suspended on (an ``Ask``, an
        external tool) still open at the end of the history. Only these can be decided."""
        suspended = self.suspended
        return [c for c in self.pending_tool_calls if c in suspended]

    def _check_waiting(self, tool_call_id: str, verb: str) -> None:
        waiting = self.waiting_tool_calls
        if tool_call_id in waiting:
            return
        named = ", ".join(repr(c) for c in waiting) or "none"
        raise UsageError(
            f"cannot {verb} tool call {tool_call_id!r}: no run suspended on it and waits for it "
            f"(only a call a run suspended on can be decided; waiting: {named})"
        )

    @property
    def pending_tool_calls(self) -> list[str]:
        """Ids of tool calls in the last assistant message that have no result yet."""
        answered: set[str] = set()
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage):
                return [c.id for c in message.tool_calls if c.id not in answered]
            if message.role == "tool_result":
                answered.add(message.tool_call_id)
            else:
                return []
        return []
