"""The Tool protocol and what a tool sees while it runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from ..errors import TreadleError
from ..types import ToolCall, ToolResult

if TYPE_CHECKING:
    from ..cancellation import CancellationToken

DepsT = TypeVar("DepsT")


class ToolCategory(str, Enum):
    """What kind of work a tool does; sets its default timeout (given on each member)."""

    EXEC = "exec"
    """Shells, builds, long jobs: 600 s."""
    MCP = "mcp"
    """Tools behind an MCP server or another network endpoint: 120 s."""
    INFO = "info"
    """Reads and look-ups: 30 s."""
    EDIT = "edit"
    """File edits: 30 s."""

    @property
    def default_timeout(self) -> float:
        return _CATEGORY_TIMEOUTS[self]


_CATEGORY_TIMEOUTS = {
    ToolCategory.EXEC: 600.0,
    ToolCategory.MCP: 120.0,
    ToolCategory.INFO: 30.0,
    ToolCategory.EDIT: 30.0,
}


class TaskComplete(TreadleError):
    """Raise from a tool to end the run after the current batch (a "done" tool).

    ``text`` becomes the tool's result; the loop then ends with reason ``completed``.
    """

    def __init__(self, text: str = "Task complete.", *, details: Any = None) -> None:
        super().__init__(text)
        self.text = text
        self.details = details


class ApprovalRequired(TreadleError):
    """Raise from a tool to ask a person before going on, mid-call.

    The call has started; the loop asks the config's ``approval_handler`` (with
    ``Ask(prompt)``) or, without one, ends the run ``suspended`` on the call like an
    ``Ask`` of the hooks. Once a person approves, the tool is called again with
    ``ctx.approved`` true and ``ctx.saved`` set to ``saved``; a denial never calls it
    again (the model gets the denial). ``saved``: JSON-able state the tool wants back
    (kept by the server with the suspension, stored with a session; never from a client).
    Raising it again after an approval asks again (a multi-step approval).
    """

    def __init__(self, prompt: str | None = None, saved: Any = None) -> None:
        super().__init__(prompt or "The tool asks for a person's approval.")
        self.prompt = prompt
        self.saved = saved


class ToolArgumentsError(TreadleError, ValueError):
    """A tool's arguments did not match its schema. The message lists what was wrong."""


class ToolContext(Generic[DepsT]):
    """What a running tool can see and do.

    - ``deps``: the application object passed as ``AgentLoopConfig.deps`` (dependency injection).
    - ``tool_call``: the call being answered (``raw_arguments`` included).
    - ``cancelled``: true once the run must stop now; long tools should check it
      (``stop_requested`` also covers an ``after_turn`` request).
    - ``await update(...)``: report progress (a ``tool_execution_update`` event).
    - ``loop_id`` / ``depth`` / ``events``: for tools that start a sub-agent, so its events can
      be forwarded onto the parent's stream.
    - ``run``: the run handle (``treadle.RunHandle``) of the run calling the tool; a tool that
      starts a loop of its own passes it on (``agent_loop(..., parent=ctx.run)``), so the
      parent's ``on_event`` observers see the sub-agent's events.
    - ``approved``: true when a person approved this call (after a hook's ``Ask``, or after
      the tool raised :class:`ApprovalRequired`); ``saved``: what the tool gave
      ``ApprovalRequired(saved=...)`` when it asked, on the call after the approval
      (``None`` otherwise).
    """

    __slots__ = (
        "_report",
        "_thread",
        "approved",
        "cancel",
        "context",
        "deps",
        "depth",
        "events",
        "loop_id",
        "run",
        "saved",
        "tool_call",
    )

    def __init__(
        self,
        *,
        tool_call: ToolCall,
        deps: DepsT,
        cancel: CancellationToken | None = None,
        loop_id: str = "",
        depth: int = 0,
        events: Any = None,
        context: Any = None,
        report: Callable[[ToolResult], Awaitable[None]] | None = None,
        run: Any = None,
        approved: bool = False,
        saved: Any = None,
    ) -> None:
        self.tool_call = tool_call
        self.deps = deps
        self.cancel = cancel
        self.loop_id = loop_id
        self.depth = depth
        self.events = events
        self.context = context
        self._report = report
        self.run = run
        self.approved = approved
        self.saved = saved
        self._thread = False  # a plain def tool's worker thread is running (function_tool.py)

    @property
    def tool_call_id(self) -> str:
        return self.tool_call.id

    @property
    def tool_name(self) -> str:
        return self.tool_call.name

    @property
    def cancelled(self) -> bool:
        """True once the run must stop now (an immediate cancellation): wind down."""
        return self.cancel is not None and self.cancel.immediate

    @property
    def stop_requested(self) -> bool:
        """True once any stop was asked for, ``after_turn`` included (which lets this tool
        finish): useful for tools that can end early without losing work."""
        return self.cancel is not None and self.cancel.cancelled

    async def update(self, partial: ToolResult | str) -> None:
        """Report progress; shows up as a ``tool_execution_update`` event."""
        if self._report is not None:
            await self._report(
                partial if isinstance(partial, ToolResult) else ToolResult.of(partial)
            )


@runtime_checkable
class Tool(Protocol):
    """Anything with a name, a description, a JSON-schema ``parameters`` and ``run``.

    How the loop treats it (timeout, category, running alone, starting early, retries,
    approval, external ...) is its optional ``traits`` attribute, one
    :class:`~treadle.tools.ToolTraits`; a tool without one gets the defaults. The loop reads
    it once per tool when a run's tools are resolved. (It is not a protocol member, so a
    tool without it still is a ``Tool``.) Traits given as loose attributes instead
    (``sequential = True``) are refused with an error naming them.
    """

    name: str
    description: str
    parameters: dict[str, Any]

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> Any:
        """Do the work. Return a :class:`ToolResult`, a string, content blocks or any
        JSON-serialisable value; raise to report an error to the model."""
        ...


@runtime_checkable
class Toolset(Protocol):
    """Several tools from one source, which may change between turns (an MCP server, a
    plugin directory ...). It goes wherever tools go (``AgentContext.tools``,
    ``Agent(tools=[...])``); before each turn the loop awaits :meth:`get_tools` and offers
    what it returns, so keep it cheap when nothing changed (cache, refresh on a signal).
    A failure there ends the run with ``reason="error"`` and the toolset's message. Tool
    names must be unique across all tools and toolsets; a clash is reported with both
    sources (a tool's ``traits.source`` names where it came from)."""

    async def get_tools(self) -> Sequence[Tool]:
        """The tools to offer for the next model call."""
        ...
